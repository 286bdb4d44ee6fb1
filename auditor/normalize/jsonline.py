"""One JSON-object line as its members, in order, duplicates kept (SPEC section 2: a member given
twice is two sources of its field, ambiguous when they disagree). NaN, Infinity and numbers beyond
a double keep their text, as DuckDB's reader accepts them too; a member nested deeper than Python's
parser goes is kept as ``_TooDeep`` and never interpreted.
"""

from __future__ import annotations

import json
from typing import Any

from .values import Rejected, _float, _TooDeep, reason


class _Members(dict):
    """A JSON object that also remembers its members in order, duplicates included."""

    __slots__ = ("members",)


def _object_pairs(pairs: list[tuple[str, Any]]) -> _Members:
    d = _Members(pairs)
    d.members = pairs
    return d


_decoder = json.JSONDecoder(object_pairs_hook=_object_pairs, parse_float=_float, parse_constant=_float)


def parse_line(text: str) -> list[tuple[str, Any]]:
    """The members of one JSON-object line, duplicates kept; raises ``Rejected``."""
    try:
        doc = _decoder.decode(text)
    except RecursionError:
        return _shallow_members(text)
    except ValueError:
        raise Rejected(reason("not_json")) from None
    if not isinstance(doc, _Members):
        raise Rejected(reason("not_object"))
    return doc.members


def _shallow_members(text: str) -> list[tuple[str, Any]]:
    """The top-level members of a deeply nested object, each value parsed on its own."""
    from json.decoder import scanstring

    text = text.strip()
    if not text.startswith("{"):
        raise Rejected(reason("not_object"))
    members: list[tuple[str, Any]] = []
    i, n = 1, len(text)
    try:
        while i < n:
            while text[i] in " \t\r\n,":
                i += 1
            if text[i] == "}":
                return members
            key, i = scanstring(text, i + 1)
            i = text.index(":", i) + 1
            j, depth, in_str = i, 0, False
            while True:
                c = text[j]
                if in_str:
                    if c == "\\":
                        j += 1
                    elif c == '"':
                        in_str = False
                elif c == '"':
                    in_str = True
                elif c in "[{":
                    depth += 1
                elif c in "]}":
                    if depth == 0:
                        break
                    depth -= 1
                elif c == "," and depth == 0:
                    break
                j += 1
            raw = text[i:j].strip()
            try:
                value = _decoder.decode(raw)
            except RecursionError:
                value = _TooDeep()
            members.append((key, value))
            i = j
    except (ValueError, IndexError):
        pass
    raise Rejected(reason("not_json"))
