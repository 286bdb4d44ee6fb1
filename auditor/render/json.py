"""The JSON document of SPEC section 4: stable keys, lists sorted by workflow key then seq, and
byte-identical output for the same input (no run timestamps).

The envelope is indented; each incident, finding, diagnostic and workflow is one line of compact
JSON. A big audit has hundreds of thousands of them: orjson encodes the dataclasses themselves
(fields in order, enums as their values, tuples as lists: exactly ``to_dict()``, which a test
pins), one by one, and they are written as they go, never held as one string.
"""

from __future__ import annotations

import io
import json
from typing import IO, Any

import orjson

from ..result import LISTS, AuditResult


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
    dumps = orjson.dumps
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
        for entry in getattr(result, key):  # the dataclasses, not document()'s dicts: orjson reads them
            out.write(("[\n    " if first else ",\n    ") + dumps(entry).decode())
            first = False
        out.write("[]" if first else "\n  ]")
    out.write("\n}\n")


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
