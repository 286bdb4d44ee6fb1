"""A team's vocabulary (``--map FILE``) over the format's own (``core.fields``), and the quarantine
reasons the normalizer gives.

A ``Vocabulary`` is the SPEC's vocabulary plus a team's ``--map FILE`` (TOML) overlay::

    [kinds]
    result_committed = "effect_committed"
    [fields]
    lease_token = "epoch"
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from ..core.errors import AuditorError
from ..core.fields import ALIAS_PRIORITY_END, FIELD_ALIASES, FIELDS, KIND_ALIASES, KINDS, _NOTHING, name_key


_KIND_LIST = ", ".join(KINDS)

#: Quarantine reasons, one template per rule; ``{field}``/``{value}``/``{kind}`` are filled in.
REASONS: Mapping[str, str] = MappingProxyType({
    "not_utf8": "line is not valid UTF-8; re-encode the file as UTF-8",
    "not_json": "line is not valid JSON; write one JSON object per line",
    "not_object": "line is JSON but not an object; write one JSON object per line",
    "key_missing": '"workflow_key" is missing; add the unit that must have one effect owner (or job_id / run_id)',
    "kind_missing": '"kind" is missing; expected one of ' + _KIND_LIST,
    "kind_unknown": ('"kind" is "{value}", not a kind the auditor knows; map it with --map FILE '
                     '([kinds] {name} = "{guess}")'),
    "not_integer": '"{field}" is "{value}", expected an integer in int64 range',
    "negative_epoch": '"epoch" is {value}, expected an integer >= 0',
    "epoch_missing": '"epoch" is missing; every {kind} needs the owner epoch it was produced under',
    "effect_key_missing": '"effect_key" is missing; every {kind} needs the effect key it concerns',
    "nested": ('"{field}" is {what}, expected a single value; its content is not stored (write the '
               'value itself, or move the structure into "attrs")'),
    "not_text": '"{field}" is {value}, expected a string or an integer',
    "ambiguous": ('"{field}" is given twice with different values ({first} and {second}); the line is '
                  'ambiguous, keep one of them'),
})

_GUESSES = (("commit", "effect_committed"), ("verif", "outcome_verified"), ("reject", "effect_attempted"),
            ("attempt", "effect_attempted"), ("start", "effect_attempted"), ("request", "effect_attempted"),
            ("call", "effect_attempted"), ("claim", "lease_acquired"), ("acquir", "lease_acquired"),
            ("lease", "lease_acquired"))


def _toml(v: object) -> str:
    import json

    return json.dumps(v, default=str)


def guess_kind(name: str) -> str:
    """The canonical kind a team's kind name most likely means, for the ``--map`` hint."""
    for part, kind in _GUESSES:
        if part in name:
            return kind
    return "progress"


class VocabularyError(AuditorError):
    """A vocabulary file (``--map``) cannot be read or maps onto something the contract lacks."""


@dataclass(frozen=True)
class Vocabulary:
    """Field and kind names the normalizer accepts: the SPEC's own plus a team's overlay.

    ``fields`` maps a ``name_key`` spelling to ``(canonical field, priority)``: the lowest
    priority present and non-empty wins (the field itself is 0, then its aliases in order, then
    the overlay's names). ``kinds`` maps a kind name to ``(kind, {field: value} it implies)``.
    """

    fields: Mapping[str, tuple[str, int]]
    kinds: Mapping[str, tuple[str, Mapping[str, str]]]
    source: str | None = None  # the --map file it came from, for messages
    extra_fields: Mapping[str, str] = field(default_factory=dict)
    extra_kinds: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def default(cls) -> "Vocabulary":
        return DEFAULT

    @classmethod
    def build(cls, fields: Mapping[str, str] | None = None, kinds: Mapping[str, str] | None = None,
              source: str | None = None, lines: Mapping[tuple[str, str], int] | None = None) -> "Vocabulary":
        """The SPEC's vocabulary plus ``fields`` (name -> canonical field) and ``kinds`` (name -> a
        kind, or a built-in kind alias and what it implies). ``lines`` says where each
        ``(table, name)`` entry is written, for the messages of ``VocabularyError``."""
        lines = lines or {}

        def refuse(table: str, name: str, message: str) -> VocabularyError:
            line = lines.get((table, name))
            where = source or "vocabulary"
            at = f"{where}:{line}" if line is not None else where
            entry = f"[{table}] {name}" if (table, name) in lines or not lines else name
            return VocabularyError(f"{at}: {entry} {message}")

        names: dict[str, tuple[str, int]] = {}
        for f in FIELDS:
            names[f] = (f, 0)
            for i, alias in enumerate(FIELD_ALIASES.get(f, ()), start=1):
                names[alias] = (f, i)
        for name, target in (fields or {}).items():
            if not isinstance(target, str) or target not in FIELDS:
                raise refuse("fields", name, f'= {_toml(target)}: not a canonical field; use one of {", ".join(FIELDS)}')
            key = name_key(name)
            if not key or key == "attrs":
                raise refuse("fields", name, "is not a usable field name")
            if names.get(key, (target, 0))[0] != target:
                raise refuse("fields", name, f'= "{target}": "{name}" already means "{names[key][0]}"; remove this line')
            names.setdefault(key, (target, ALIAS_PRIORITY_END + len(names)))
        kind_map: dict[str, tuple[str, Mapping[str, str]]] = {k: (k, _NOTHING) for k in KINDS}
        kind_map.update(KIND_ALIASES)
        for name, target in (kinds or {}).items():
            meaning = kind_map.get(target) if isinstance(target, str) and (target in KINDS or target in KIND_ALIASES) else None
            if meaning is None:
                raise refuse("kinds", name, f"= {_toml(target)}: not a kind the auditor knows; use one of {_KIND_LIST}")
            key = name_key(name).rsplit(".", 1)[-1]
            if kind_map.get(key, meaning)[0] != meaning[0]:
                raise refuse("kinds", name, f'= "{target}": "{name}" already means "{kind_map[key][0]}"; remove this line')
            kind_map.setdefault(key, meaning)
        return cls(MappingProxyType(names), MappingProxyType(kind_map), source,
                   MappingProxyType(dict(fields or {})), MappingProxyType(dict(kinds or {})))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Vocabulary":
        """Read a ``--map`` TOML file: ``[kinds]`` and ``[fields]`` tables of ``name = "canonical
        name"`` strings, and such entries at the top level too, whose right-hand side says which
        they are (a kind, or a canonical field; SPEC rev 3). Refused with the file, the line and
        the entry, before any input is read."""
        where = os.fspath(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise VocabularyError(f"{where}: cannot read the vocabulary file ({e.strerror or e}); check the path") from e
        except UnicodeDecodeError as e:
            raise VocabularyError(f"{where}: not a TOML file ({e}); write [kinds] and [fields] tables of "
                                  'name = "canonical name" lines') from e
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise VocabularyError(f"{where}: not a TOML file ({e}); write [kinds] and [fields] tables of "
                                  'name = "canonical name" lines') from e
        lines = _entry_lines(text)
        tables: dict[str, dict[str, str]] = {"kinds": {}, "fields": {}}
        for name, value in data.items():
            line = lines.get(("", name))
            at = f"{where}:{line}" if line is not None else where
            if name in tables:
                if not isinstance(value, dict):
                    raise VocabularyError(f"{at}: {name} is not a table; write [{name}] on its own line")
                for k, v in value.items():
                    if not isinstance(v, str):
                        raise VocabularyError(f'{where}:{lines.get((name, k), "?")}: [{name}] {k} is {v!r}, '
                                              f'expected a string: {k} = "..."')
                    tables[name][k] = v
            elif isinstance(value, dict):
                raise VocabularyError(f"{at}: unknown table [{name}]; a vocabulary file has [kinds] and [fields] "
                                      'tables, or name = "canonical name" entries at the top')
            elif not isinstance(value, str):
                raise VocabularyError(f'{at}: {name} is {value!r}, expected a string: {name} = "..."')
            elif value in FIELDS:
                tables["fields"][name] = value
                lines[("fields", name)] = line
            elif value in KINDS or value in KIND_ALIASES:
                tables["kinds"][name] = value
                lines[("kinds", name)] = line
            else:
                raise VocabularyError(f"{at}: {name} = {_toml(value)}: neither a kind nor a canonical field; use "
                                      f"a kind ({_KIND_LIST}) or a field ({', '.join(FIELDS)})")
        return cls.build(tables["fields"], tables["kinds"], where, lines)

    # Lookups.

    def field_of(self, name: str) -> tuple[str, int] | None:
        """``(canonical field, priority)`` for a member name, or None for an attrs member."""
        hit = self.fields.get(name)
        return hit if hit is not None else self.fields.get(name_key(name))

    def kind_of(self, name: str) -> tuple[str, Mapping[str, str]] | None:
        hit = self.kinds.get(name)
        if hit is not None:
            return hit
        key = name_key(name)
        return self.kinds.get(key) or self.kinds.get(key.rsplit(".", 1)[-1])


_TABLE_LINE = re.compile(r"\s*\[\s*([A-Za-z0-9_-]+)\s*\]\s*(#.*)?$")
_ENTRY_LINE = re.compile(r"""\s*("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_.-]+)\s*=""")


def _entry_lines(text: str) -> dict[tuple[str, str], int]:
    """Where each ``(table, name)`` entry of a vocabulary file is written (1-based lines; the top
    level is table ``""``), for error messages: tomllib says what it read, not where."""
    out: dict[tuple[str, str], int] = {}
    table = ""
    for n, line in enumerate(text.splitlines(), 1):
        if m := _TABLE_LINE.match(line):
            table = m.group(1)
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
            out.setdefault((table, name), n)
    return out


def vocabulary_of(v: "Vocabulary | str | os.PathLike | None") -> Vocabulary:
    """A ``Vocabulary`` from an object, a ``--map`` path, or None (the SPEC's own)."""
    if v is None:
        return DEFAULT
    if isinstance(v, Vocabulary):
        return v
    return Vocabulary.load(v)


DEFAULT = Vocabulary.build()
