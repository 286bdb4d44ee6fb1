"""Reading a vocabulary file (``--map FILE``, TOML) into a ``Vocabulary``, or refusing it with the
file, the line and the entry before any input is read (SPEC section 2). The loader sits below
``vocabulary`` (it imports nothing of it): ``Vocabulary.load`` hands it ``Vocabulary.build``.

Tables: ``[fields]`` (names and dotted paths onto canonical fields; ``"lease.token"`` and the
unquoted TOML dotted key ``lease.token`` are one entry), ``[kinds]`` (exact values onto kinds),
``[kind_patterns]`` (regular expressions onto kinds) and ``[ignore]`` (``kinds`` and
``kind_patterns`` lists of values declared irrelevant). An entry at the top level is a kind or a
field by its right-hand side.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from collections.abc import Callable

from ..core.errors import AuditorError
from ..core.fields import FIELDS, KIND_ALIASES, KINDS

_KIND_LIST = ", ".join(KINDS)


class VocabularyError(AuditorError):
    """A vocabulary file (``--map``) cannot be read or maps onto something the contract lacks."""


def _toml(v: object) -> str:
    return json.dumps(v, default=str)


TABLES = ("fields", "kinds", "kind_patterns", "ignore")
_HOW = ('write [fields], [kinds], [kind_patterns] and [ignore] tables of name = "canonical name" lines '
        "(docs/FORMAT.md)")


def load(path: str | os.PathLike, build: Callable[..., Any]) -> Any:
    """Read a ``--map`` TOML file into ``build`` (``Vocabulary.build``: the loader sits below the
    vocabulary, which calls it); ``VocabularyError`` names the file, the line and the entry."""
    where = os.fspath(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise VocabularyError(f"{where}: cannot read the vocabulary file ({e.strerror or e}); check the path") from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise VocabularyError(f"{where}:{line}: not a TOML file (byte {raw[e.start]:#04x} is not UTF-8); "
                              f"save the file as UTF-8") from e
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _not_toml(where, e, text) from e
    lines = _entry_lines(text)
    tables: dict[str, list[tuple[str, str]]] = {"fields": [], "kinds": [], "kind_patterns": []}
    ignore: dict[str, list[str]] = {"kinds": [], "kind_patterns": []}
    for name, value in data.items():
        line = lines.get(("", name))
        at = f"{where}:{line}" if line is not None else where
        if name == "ignore":
            _read_ignore(value, ignore, where, lines, text)
        elif name in tables:
            if not isinstance(value, dict):
                raise VocabularyError(f"{at}: {name} is not a table; write [{name}] on its own line")
            for k, v in _flat(value, name, where, lines):
                tables[name].append((k, v))
        elif isinstance(value, dict) and line is not None:
            raise VocabularyError(f"{at}: unknown table [{name}]; a vocabulary file has [fields], [kinds], "
                                  '[kind_patterns] and [ignore] tables, or name = "canonical name" entries at the top')
        else:  # an entry at the top level (a dotted key is a path): its right-hand side says which
            for k, v in _flat({name: value}, "", where, lines):
                line = lines.get(("", k))
                at = f"{where}:{line}" if line is not None else where
                table = "fields" if v in FIELDS else "kinds" if v in KINDS or v in KIND_ALIASES else None
                if table is None:
                    raise VocabularyError(f"{at}: {k} = {_toml(v)}: neither a kind nor a canonical field; use "
                                          f"a kind ({_KIND_LIST}) or a field ({', '.join(FIELDS)})")
                tables[table].append((k, v))
                lines[(table, k)] = line
    return build(tables["fields"], tables["kinds"], where, lines, kind_patterns=tables["kind_patterns"],
                 ignore_kinds=ignore["kinds"], ignore_patterns=ignore["kind_patterns"])


def _flat(table: dict[str, Any], name: str, where: str, lines: dict) -> list[tuple[str, str]]:
    """The entries of ``table`` as ``(name, value)``, a TOML dotted key (``lease.token = ...``, a
    table of its own to TOML) as its dotted name; a value that is not a string is refused."""
    out: list[tuple[str, str]] = []
    stack: list[tuple[str, dict[str, Any]]] = [("", table)]
    while stack:
        prefix, node = stack.pop(0)
        for k, v in node.items():
            full = f"{prefix}.{k}" if prefix else k
            if isinstance(v, dict):
                stack.append((full, v))
                continue
            if not isinstance(v, str):
                line = lines.get((name, full), "?")
                entry = f"[{name}] {full}" if name else full
                raise VocabularyError(f'{where}:{line}: {entry} is {v!r}, expected a string: {full} = "..."')
            out.append((full, v))
    return out


def _read_ignore(value: Any, ignore: dict[str, list[str]], where: str, lines: dict, text: str) -> None:
    """``[ignore]``: ``kinds`` and ``kind_patterns``, lists of strings; each pattern's own line is
    remembered for the message should it not compile."""
    line = lines.get(("", "ignore"))
    if not isinstance(value, dict):
        raise VocabularyError(f"{where}:{line or '?'}: ignore is not a table; write [ignore] on its own line")
    for key, items in value.items():
        at = lines.get(("ignore", key), line)
        if key not in ignore:
            raise VocabularyError(f'{where}:{at or "?"}: [ignore] {key} is not an [ignore] entry; write kinds = '
                                  '["..."] (exact values) or kind_patterns = [\'...\'] (regular expressions)')
        if isinstance(items, str):
            items = [items]
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
            raise VocabularyError(f'{where}:{at or "?"}: [ignore] {key} is {items!r}, expected a list of '
                                  f'strings: {key} = ["..."]')
        if key == "kind_patterns":
            for item in items:
                try:
                    re.compile(item, re.IGNORECASE)
                except (re.error, RecursionError, OverflowError) as e:
                    line = _line_of(text, at, item) if at is not None else "?"
                    raise VocabularyError(
                        f"{where}:{line}: [ignore] kind_patterns '{item}' is not a regular expression Python "
                        f"reads ({e}); fix the pattern (TOML literal strings, in single quotes, keep "
                        "backslashes)") from None
        ignore[key].extend(items)


def _line_of(text: str, start: int, literal: str) -> int:
    """The line, from ``start`` on, where ``literal`` is written (a list may span lines)."""
    for n, line in enumerate(text.splitlines()[start - 1:], start):
        if literal in line:
            return n
    return start


_TABLE_LINE = re.compile(r"\s*\[\s*([A-Za-z0-9_.-]+)\s*\]\s*(#.*)?$")
_ENTRY_LINE = re.compile(r"""\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_.-]+)\s*=""")


_AT = re.compile(r" \(at line (\d+), column (\d+)\)$")


def _not_toml(where: str, e: tomllib.TOMLDecodeError, text: str) -> VocabularyError:
    """tomllib's error as ``file:line: ...`` (it writes the place at the end of its message, or
    "at end of document": the last line)."""
    message = str(e)
    m = _AT.search(message)
    if m is not None:
        return VocabularyError(f"{where}:{m[1]}: not a TOML file ({message[:m.start()]}, column {m[2]}); {_HOW}")
    message = message.removesuffix(" (at end of document)")
    return VocabularyError(f"{where}:{len(text.splitlines()) or 1}: not a TOML file ({message} at the end of the "
                           f"file); {_HOW}")


def _entry_lines(text: str) -> dict[tuple[str, str], int]:
    """Where each ``(table, name)`` entry of a vocabulary file is written (1-based lines; the top
    level is table ``""``, a table header is ``("", table)``), for error messages: tomllib says
    what it read, not where. A ``[fields.lease]`` table's ``token`` is ``("fields", "lease.token")``."""
    out: dict[tuple[str, str], int] = {}
    table, prefix = "", ""
    for n, line in enumerate(text.splitlines(), 1):
        if m := _TABLE_LINE.match(line):
            table, _, prefix = m.group(1).partition(".")
            out.setdefault(("", table), n)
            continue
        if m := _ENTRY_LINE.match(line):
            raw = m.group(1)
            if raw.startswith('"'):
                try:
                    name = tomllib.loads(f"x = {raw}")["x"]
                except tomllib.TOMLDecodeError:
                    continue
            else:
                name = raw.strip("'")
            out.setdefault((table, f"{prefix}.{name}" if prefix else name), n)
    return out
