"""The limits that keep one hostile input from costing unbounded memory, disk or time.

Each limit has a default that real logs never reach, an environment variable that changes it
for the command line, and a field of ``Limits`` for Python callers (``audit(..., limits=...)``).
A refused input or a quarantined line names the limit and how to raise it (``how_to_raise``).

- ``max_line_bytes``: a longer line (JSON lines, OTLP, CSV) is quarantined with a reason, the
  rest of the file is read. DuckDB parses one line at a time within its memory share; a single
  line of 32 MB needs more than 800 MB (the share is raised for it when the machine has the
  memory, see ``store.memory``), so the default stays at 16 MiB.
- ``max_input_bytes``: the decompressed size of one input, standard input and FIFOs included
  (what a stream of ``/dev/zero`` would otherwise fill the disk with).
- ``max_ratio``: how many times its compressed size a gzip or zstd file may expand, once it has
  expanded past ``RATIO_FLOOR`` (small files compress well and are cheap whatever their ratio).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Below this many decompressed bytes the ratio is not checked: a 64 MiB input costs little.
RATIO_FLOOR = 64 << 20

#: The environment variables that set each limit for the command line.
ENV = {"max_line_bytes": "AUDITOR_MAX_LINE_BYTES", "max_input_bytes": "AUDITOR_MAX_INPUT_BYTES",
       "max_ratio": "AUDITOR_MAX_RATIO"}


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one input. ``Limits.from_env()`` reads the ``AUDITOR_MAX_*`` variables."""

    max_line_bytes: int = 16 << 20
    max_input_bytes: int = 64 << 30
    max_ratio: int = 200

    @classmethod
    def from_env(cls) -> "Limits":
        from .errors import AuditorError

        values = {}
        for name, var in ENV.items():
            text = os.environ.get(var, "").strip()
            if not text:
                continue
            try:
                values[name] = _size(text)
            except ValueError:
                raise AuditorError(f"{var}={text!r}: expected a positive whole number, optionally "
                                   "with a unit (K, M, G: powers of 1024)") from None
        return cls(**values)


def how_to_raise(name: str) -> str:
    """The sentence that ends every message about a limit: where to change it."""
    return f"raise it with {ENV[name]}=N (or Limits({name}=N) in Python)"


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    text = text.upper().removesuffix("B").removesuffix("I")
    scale = units.get(text[-1:], 1)
    value = int(text[:-1] if text[-1:] in units else text)
    if value <= 0:
        raise ValueError(text)
    return value * scale
