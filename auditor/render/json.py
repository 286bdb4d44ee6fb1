"""The JSON document of SPEC section 4: stable keys, lists sorted by workflow key then seq, and
byte-identical output for the same input (no run timestamps).

The envelope is indented; each incident, finding, diagnostic and workflow is one line of compact
JSON. A big audit has millions of them: orjson encodes the dataclasses themselves (fields in
order, enums as their values, tuples as lists: exactly ``to_dict()``, which a test pins), as
explain makes them (``explain.spool``), and they are copied from there in blocks, never held as
one string.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import IO, Any

from ..explain.result import LISTS, AuditResult
from ..explain.spool import json_blocks


def _default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def render_json(result: AuditResult) -> str:
    out = io.StringIO()
    write_json(result, out)
    return out.getvalue()


def write_json(result: AuditResult, out: IO[str]) -> None:
    """Write the document to ``out``, list items one per line, as they are encoded."""
    from ..core.collector import no_gc

    with no_gc():  # what is written is acyclic: a collector pass would only walk the result again
        _write(result, out)


def _write(result: AuditResult, out: IO[str]) -> None:
    out.write("{")
    for n, (key, value) in enumerate(result.document().items()):
        out.write(("," if n else "") + f"\n  {json.dumps(key)}: ")
        if key == "lease_health":
            _write_section(value, out)
            continue
        if key not in LISTS:
            out.write(json.dumps(value, indent=2, ensure_ascii=False, default=_default).replace("\n", "\n  "))
            continue
        first = True
        # A spooled list's lines as they were encoded; a plain list's items (the dataclasses, not
        # document()'s dicts) encoded by orjson. Lines hold no raw newline: JSON escapes it.
        blocks = (_attributed(result) if key == "findings" and result.attribution
                  else json_blocks(getattr(result, key)))
        for block in blocks:
            out.write(("[\n    " if first else ",\n    ") + block.decode().replace("\n", ",\n    "))
            first = False
        out.write("[]" if first else "\n  ]")
    out.write("\n}\n")


def _attributed(result: AuditResult, size: int = 4096) -> Iterator[bytes]:
    """The findings of a store ``auditor serve`` attributed, each with its ``tokens`` (a spooled
    list's lines are encoded without them), in blocks of ``size`` lines."""
    import orjson

    block: list[bytes] = []
    for f in result.findings:
        block.append(orjson.dumps(result.finding_item(f)))
        if len(block) == size:
            yield b"\n".join(block)
            block = []
    if block:
        yield b"\n".join(block)


def _write_section(section: dict[str, Any], out: IO[str]) -> None:
    """A section whose lists hold records (``lease_health``: groups, keys): the envelope indented,
    each record on one line of compact JSON, as the document's long lists are written."""
    out.write("{")
    for n, (key, value) in enumerate(section.items()):
        out.write(("," if n else "") + f"\n    {json.dumps(key)}: ")
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            out.write("[\n      " + ",\n      ".join(
                json.dumps(v, ensure_ascii=False, separators=(",", ":"), default=_default) for v in value)
                + "\n    ]")
        else:
            out.write(json.dumps(value, ensure_ascii=False, default=_default))
    out.write("\n  }" if section else "}")
