"""A team's vocabulary (``--map FILE``) over the format's own (``core.fields``), and the quarantine
reasons the normalizer gives.

A ``Vocabulary`` is the SPEC's vocabulary plus a team's ``--map FILE`` (TOML) overlay (section 2,
"Logs as teams write them")::

    [fields]
    msg = "kind"
    "lease.token" = "epoch"          # a path into nested objects, or a flat dotted key
    [kinds]
    "claimed job" = "lease_acquired"
    [kind_patterns]
    '^committed \\S+' = "effect_committed"
    [ignore]
    kind_patterns = ['^GET /']

``vocabulary_file`` reads the file; this module holds what it builds and how the normalizer asks it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ..core.fields import ALIAS_PRIORITY_END, FIELD_ALIASES, FIELDS, KIND_ALIASES, KINDS, _NOTHING, name_key
from .kinds import Classified, KindRules, Pattern, compile_pattern
from .vocabulary_file import _KIND_LIST, VocabularyError, _toml, load

#: Quarantine reasons, one template per rule; ``{field}``/``{value}``/``{kind}`` are filled in.
REASONS: Mapping[str, str] = MappingProxyType({
    "not_utf8": "line is not valid UTF-8; re-encode the file as UTF-8",
    "not_json": "line is not valid JSON; write one JSON object per line",
    "not_object": "line is JSON but not an object; write one JSON object per line",
    "key_missing": '"workflow_key" is missing; add the unit that must have one effect owner (or job_id / run_id)',
    "kind_missing": '"kind" is missing; expected one of ' + _KIND_LIST,
    "kind_unknown": ('"{source}" is "{value}", not a kind the auditor knows; map it with --map FILE '
                     '([kinds] {name} = {guess}){ignore}'),
    "kind_ambiguous": ('"{source}" is "{value}", which {first} and {second}; the line is ambiguous, make the '
                       '--map entries exclusive'),
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


#: Where entries are written, for messages: ``(table, name) -> line``.
Lines = Mapping[tuple[str, str], int]


@dataclass(frozen=True)
class Vocabulary:
    """Field and kind names the normalizer accepts: the SPEC's own plus a team's overlay.

    ``fields`` maps a ``name_key`` spelling (a dotted path for a nested field: ``lease.token``) to
    ``(canonical field, priority)``: the field itself is 0, its built-in aliases 1 up to
    ``ALIAS_PRIORITY_END``, the overlay's names from there on. ``containers`` are the members a
    mapped path descends into (``lease`` for ``lease.token``). ``rules`` says what a kind value means.
    """

    fields: Mapping[str, tuple[str, int]]
    rules: KindRules
    source: str | None = None  # the --map file it came from, for messages
    containers: frozenset[str] = frozenset()
    mapped: bool = False       # a name or path is mapped onto kind: its values are messages

    @property
    def kinds(self) -> Mapping[str, tuple[str, Mapping[str, str]]]:
        """Exact kind names (built-in and ``[kinds]``) -> ``(kind, {field: value} it implies)``."""
        return self.rules.exact

    @classmethod
    def default(cls) -> "Vocabulary":
        return DEFAULT

    @classmethod
    def build(cls, fields: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
              kinds: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
              source: str | None = None, lines: Lines | None = None, *,
              kind_patterns: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
              ignore_kinds: Iterable[str] = (), ignore_patterns: Iterable[str] = ()) -> "Vocabulary":
        """The SPEC's vocabulary plus ``fields`` (name or dotted path -> canonical field), ``kinds``
        (value -> a kind, or a built-in kind alias and what it implies), ``kind_patterns`` (regular
        expression -> the same) and what ``[ignore]`` declares irrelevant. ``lines`` says where each
        ``(table, name)`` entry is written, for the messages of ``VocabularyError``."""
        refuse = _refuser(source, lines or {})
        names, containers, mapped = _field_names(_pairs(fields), refuse)
        exact: dict[str, tuple[str, Mapping[str, str]]] = {k: (k, _NOTHING) for k in KINDS}
        exact.update(KIND_ALIASES)
        for name, target in _pairs(kinds):
            meaning = _meaning(target)
            if meaning is None:
                raise refuse("kinds", name, f"= {_toml(target)}: not a kind the auditor knows; use one of {_KIND_LIST}")
            key = name_key(name)
            if not key:
                raise refuse("kinds", name, "is empty; write the value your log gives the kind")
            if exact.get(key, meaning)[0] != meaning[0]:
                raise refuse("kinds", name, f'= "{target}": "{name}" already means "{exact[key][0]}"; remove this line')
            exact.setdefault(key, meaning)
        patterns = _patterns(_pairs(kind_patterns), refuse)
        ignore_exact = {}
        for value in ignore_kinds:
            if not isinstance(value, str) or not name_key(value):
                raise refuse("ignore", "kinds", f"holds {_toml(value)}: write the values to ignore as strings")
            ignore_exact.setdefault(name_key(value), value)
        ignored = []
        for text in ignore_patterns:
            if not isinstance(text, str):
                raise refuse("ignore", "kind_patterns", f"holds {_toml(text)}: write the patterns as strings")
            ignored.append(Pattern(text, _compiled(text, ("ignore", "kind_patterns"), refuse)))
        rules = KindRules(MappingProxyType(exact), tuple(patterns), MappingProxyType(ignore_exact), tuple(ignored))
        return cls(MappingProxyType(names), rules, source, frozenset(containers), mapped)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Vocabulary":
        """Read a ``--map`` TOML file (``vocabulary_file.load``); ``VocabularyError`` names the
        file, the line and the entry, before any input is read."""
        return load(path, cls.build)

    # Lookups.

    def field_of(self, name: str) -> tuple[str, int] | None:
        """``(canonical field, priority)`` for a member name, or None for an attrs member."""
        hit = self.fields.get(name)
        return hit if hit is not None else self.fields.get(name_key(name))

    def kind_of(self, name: str) -> tuple[str, Mapping[str, str]] | None:
        """The meaning of a kind value, or None (unknown, ignored or ambiguous)."""
        return self.rules.classify(name).meaning

    def classify(self, value: str) -> Classified:
        """What one value of the kind field is: a kind, ignored, ambiguous or unknown."""
        return self.rules.classify(value)

    @property
    def ignores(self) -> bool:
        return self.rules.ignores

    @property
    def shaped(self) -> bool:
        """Whether this vocabulary reads logs not written as events: a name or path mapped onto
        kind, a path, a pattern or an [ignore] entry. The live doors then read every log record."""
        return self.mapped or bool(self.containers) or bool(self.rules.patterns) or self.rules.ignores


def _pairs(entries: Mapping[str, str] | Iterable[tuple[str, str]] | None) -> list[tuple[str, str]]:
    if entries is None:
        return []
    return list(entries.items()) if isinstance(entries, Mapping) else list(entries)


def _refuser(source: str | None, lines: Lines):
    def refuse(table: str, name: str, message: str) -> VocabularyError:
        line = lines.get((table, name))
        where = source or "vocabulary"
        at = f"{where}:{line}" if line is not None else where
        shown = name if name.strip() else f'"{name}"'  # a blank name is still seen
        entry = f"[{table}] {shown}" if (table, name) in lines or not lines else shown
        return VocabularyError(f"{at}: {entry} {message}")
    return refuse


_LIST_INDEX = re.compile(r"\[[^\]]*\]|\[|\]")


def _field_names(fields: list[tuple[str, str]], refuse) -> tuple[dict[str, tuple[str, int]], set[str], bool]:
    """The field names of the SPEC and of ``fields``, the containers their paths descend into,
    and whether a name is mapped onto kind."""
    names: dict[str, tuple[str, int]] = {}
    for f in FIELDS:
        names[f] = (f, 0)
        for i, alias in enumerate(FIELD_ALIASES.get(f, ()), start=1):
            names[alias] = (f, i)
    containers: set[str] = set()
    mapped = False
    for name, target in fields:
        if not isinstance(target, str) or target not in FIELDS:
            raise refuse("fields", name, f'= {_toml(target)}: not a canonical field; use one of {", ".join(FIELDS)}')
        if _LIST_INDEX.search(name):
            raise refuse("fields", name, f'= "{target}": a path cannot go into a list; map a member of an '
                                         "object (write the list's item as its own field in your logger)")
        parts = [name_key(p) for p in name.split(".")]
        key = ".".join(parts)
        if not all(parts) or key == "attrs":
            raise refuse("fields", name, "is not a usable field name" + (
                "; a path names members joined by single dots (lease.token)" if "." in name else
                "; name the member of your log that holds the field" if not name.strip() else
                "; attrs is where the auditor keeps what it does not read" if key == "attrs" else ""))
        if names.get(key, (target, 0))[0] != target:
            raise refuse("fields", name, f'= "{target}": "{name}" already means "{names[key][0]}"; remove this line')
        names.setdefault(key, (target, ALIAS_PRIORITY_END + len(names)))
        containers.update(".".join(parts[:i]) for i in range(1, len(parts)))
        mapped = mapped or (target == "kind" and names[key][1] >= ALIAS_PRIORITY_END)
    return names, containers, mapped


def _meaning(target: object) -> tuple[str, Mapping[str, str]] | None:
    if not isinstance(target, str):
        return None
    if target in KINDS:
        return (target, _NOTHING)
    return KIND_ALIASES.get(target)


def _compiled(text: str, where: tuple[str, str], refuse) -> re.Pattern:
    try:
        return compile_pattern(text)
    except (re.error, RecursionError, OverflowError) as e:
        raise refuse(where[0], where[1], f"'{text}' is not a regular expression Python reads ({e}); fix the "
                                         "pattern (TOML literal strings, in single quotes, keep backslashes)")


def _patterns(pairs: list[tuple[str, str]], refuse) -> list[Pattern]:
    """``[kind_patterns]`` compiled, refused when one does not compile or two give one pattern two
    kinds. A pattern that also matches an exact name (built-in or ``[kinds]``) of another kind is
    no conflict: the exact entry wins for that value (SPEC revision 3.1)."""
    out: list[Pattern] = []
    seen: dict[str, str] = {}
    for text, target in pairs:
        meaning = _meaning(target)
        if meaning is None:
            raise refuse("kind_patterns", text,
                         f"= {_toml(target)}: not a kind the auditor knows; use one of {_KIND_LIST}")
        regex = _compiled(text, ("kind_patterns", text), refuse)
        folded = text.lower()
        if seen.get(folded, meaning[0]) != meaning[0]:
            raise refuse("kind_patterns", text, f'= "{target}": the same pattern already means "{seen[folded]}"; '
                                                "remove this line")
        seen.setdefault(folded, meaning[0])
        out.append(Pattern(text, regex, meaning, target))
    return out


def vocabulary_of(v: "Vocabulary | str | os.PathLike | None") -> Vocabulary:
    """A ``Vocabulary`` from an object, a ``--map`` path, or None (the SPEC's own)."""
    if v is None:
        return DEFAULT
    if isinstance(v, Vocabulary):
        return v
    return load(v, Vocabulary.build)


DEFAULT = Vocabulary.build()
