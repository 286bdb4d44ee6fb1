"""Stage 1, read: the reader contract, the bottom of the package.

What every reader takes (a ``Source``: one input file, or a stream spooled to one) and reports
its progress through (``Progress``). The readers (``jsonl.py``, ``readers.py``, ``otlp.py``,
``logfmt.py``, ``csv_lines.py``) and the format registry (``formats.py``) import it; input
discovery (``sources.py``) builds it. Nothing here imports the rest of the package, so no reader
and the registry form an import circle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..core.limits import Limits

Progress = Callable[[int], None]  # called with the number of input bytes just consumed


@dataclass(frozen=True, slots=True)
class Source:
    """One input: a file, or a stream (standard input, a FIFO) spooled to a temporary file."""

    name: str      # as the user will recognise it
    path: Path     # where the bytes are
    size: int
    limits: Limits = field(default_factory=Limits)
    spooled: bool = False  # path is our temporary copy of a stream: deleted once read
