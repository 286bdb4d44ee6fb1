"""Kinds named by a message (SPEC section 2, "Logs as teams write them"): what one value of the
kind field means under a vocabulary's exact names, ``[kind_patterns]`` and ``[ignore]`` entries.

``KindRules.classify`` is the reference. The most specific entry wins (SPEC revision 3.1): a value
an exact entry names (a built-in name, a ``[kinds]`` value) is that kind, whatever patterns match
it; otherwise every matching ``[kind_patterns]`` regular expression is collected, and patterns of
two different kinds make the value ambiguous; a value no kind entry matches is ignored when an
``[ignore]`` entry matches it, else an unknown kind. Patterns are Python ``re``, searched, case-insensitive.

``re2_of`` rewrites a pattern into DuckDB's dialect (RE2) when both engines give it one meaning on
the values the store's SQL hands it (printable ASCII): the store then decides ignored lines before
the Python normalizer, and a pattern it cannot rewrite leaves those lines to the normalizer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

try:  # Python 3.11 keeps the parser here; sre_parse is its deprecated alias
    import re._parser as _sre  # type: ignore[import-not-found]
    import re._constants as _c  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - older layouts
    import sre_parse as _sre  # type: ignore[no-redef]
    import sre_constants as _c  # type: ignore[no-redef]

from ..core.fields import name_key

#: A kind's meaning: ``(kind, {field: value} it implies)``.
Meaning = tuple[str, Mapping[str, str]]

_NOTHING: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Pattern:
    """One ``[kind_patterns]`` or ``[ignore] kind_patterns`` entry: its text as written, compiled."""

    text: str
    regex: re.Pattern
    meaning: Meaning | None = None   # None for an [ignore] pattern
    target: str = ""                 # the right-hand side as written ("result_rejected")


def compile_pattern(text: str) -> re.Pattern:
    """``text`` as the vocabulary reads it: Python ``re``, case-insensitive; ``re.error`` if it
    does not compile."""
    return re.compile(text, re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Classified:
    """What a value of the kind field is: ``meaning`` (a kind), ``ignored`` (the ``[ignore]`` entry
    that matched: ``("kinds", value)`` or ``("kind_patterns", pattern)``), ``ambiguous`` (two
    entries of different kinds, each as ``(entry, kind)``), or none of them (an unknown kind)."""

    meaning: Meaning | None = None
    ignored: tuple[str, str] | None = None
    ambiguous: tuple[tuple[str, str], tuple[str, str]] | None = None


UNKNOWN = Classified()


@dataclass(frozen=True)
class KindRules:
    """The kind entries of a vocabulary: exact names (built-in and ``[kinds]``, by ``name_key``),
    ``patterns`` (``[kind_patterns]``, in file order) and what ``[ignore]`` declares irrelevant."""

    exact: Mapping[str, Meaning]
    patterns: tuple[Pattern, ...] = ()
    ignore_exact: Mapping[str, str] = field(default_factory=dict)  # name_key -> the entry as written
    ignore_patterns: tuple[Pattern, ...] = ()

    def exact_of(self, text: str) -> Meaning | None:
        """The exact entry a name matches: as written, by ``name_key``, or by its last dotted part
        (a namespaced kind, ``ownership.progress``)."""
        hit = self.exact.get(text)
        if hit is not None:
            return hit
        key = name_key(text)
        return self.exact.get(key) or self.exact.get(key.rsplit(".", 1)[-1])

    def classify(self, text: str) -> Classified:
        """What the kind value ``text`` means (see the module's docstring)."""
        exact = self.exact_of(text)
        if exact is not None:  # the most specific entry wins (SPEC revision 3.1): patterns are not searched
            return Classified(meaning=exact)
        found = [(f"[kind_patterns] '{p.text}'", p.meaning) for p in self.patterns if p.regex.search(text)]
        if not found:
            return self._ignored(text)
        meaning, disagree = _one_meaning(found)
        return Classified(ambiguous=disagree) if disagree is not None else Classified(meaning=meaning)

    def _ignored(self, text: str) -> Classified:
        entry = self.ignored_by(text)
        return UNKNOWN if entry is None else Classified(ignored=entry)

    def ignored_by(self, text: str) -> tuple[str, str] | None:
        """The first ``[ignore]`` entry matching ``text`` (exact values first, then patterns, each
        in file order), or None. Which entry counts a line never changes whether it is ignored."""
        if self.ignore_exact:
            written = self.ignore_exact.get(name_key(text))
            if written is not None:
                return ("kinds", written)
        for p in self.ignore_patterns:
            if p.regex.search(text):
                return ("kind_patterns", p.text)
        return None

    @property
    def ignores(self) -> bool:
        return bool(self.ignore_exact or self.ignore_patterns)


def _one_meaning(found: Sequence[tuple[str, Meaning]]
                 ) -> tuple[Meaning | None, tuple[tuple[str, str], tuple[str, str]] | None]:
    """``(meaning, None)``: the one meaning of the patterns ``found`` (``(entry, meaning)``); or
    ``(None, (first, second))``: two patterns that disagree, each ``(entry, what it says)``.
    Patterns of one kind add their implications (``result_rejected`` and a plain
    ``effect_attempted`` pattern: rejected); two kinds, or two values of one implied field, disagree."""
    first_entry, (kind, implied) = found[0]
    merged = dict(implied)
    for entry, (other_kind, other_implied) in found[1:]:
        if other_kind != kind:
            return None, ((first_entry, kind), (entry, other_kind))
        for f, v in other_implied.items():
            if merged.setdefault(f, v) != v:
                return None, ((first_entry, f"{kind} with {f}={merged[f]}"), (entry, f"{kind} with {f}={v}"))
    return (kind, MappingProxyType(merged) if merged else _NOTHING), None


# Patterns both engines read alike.

_PRINTABLE_ASCII = re.compile(r"[\x20-\x7e]*")
#: RE2 refuses counted repetitions above this.
_RE2_MAX_REPEAT = 1000


def printable_ascii(text: str) -> bool:
    """Whether the store's SQL may decide ``text`` (printable ASCII: ``re`` and RE2 agree there)."""
    return _PRINTABLE_ASCII.fullmatch(text) is not None


def re2_of(pattern: str) -> str | None:
    """``pattern`` (Python ``re``, searched case-insensitively) rewritten for RE2 (DuckDB's
    ``regexp_matches(value, p, 'i')``) when the two mean the same on printable ASCII values, else
    None. Only plain constructs qualify: literals, ``.``, classes of ranges and ``\\d \\w \\s``,
    greedy and lazy repetition up to 1000, alternation, groups, ``^ $ \\b \\B \\A \\Z``.
    Lookarounds, back references, inline flags, possessive and atomic forms do not (the store's
    SQL then leaves such lines to the Python normalizer, which is always right)."""
    if not pattern.isascii():
        return None
    try:
        parsed = _sre.parse(pattern, re.IGNORECASE)
    except re.error:
        return None
    if parsed.state.flags & ~(re.IGNORECASE | re.UNICODE):
        return None
    try:
        return _emit(parsed)
    except _Unsafe:
        return None


class _Unsafe(Exception):
    pass


def _char(code: int) -> str:
    """One literal character for RE2: a letter or digit as it is, anything else in hex."""
    if code > 0x7F:
        raise _Unsafe
    ch = chr(code)
    return ch if ch.isalnum() else f"\\x{code:02x}"


_CATEGORIES = {_c.CATEGORY_DIGIT: r"\d", _c.CATEGORY_NOT_DIGIT: r"\D", _c.CATEGORY_WORD: r"\w",
               _c.CATEGORY_NOT_WORD: r"\W", _c.CATEGORY_SPACE: r"\s", _c.CATEGORY_NOT_SPACE: r"\S"}
_AT = {_c.AT_BEGINNING: "^", _c.AT_BEGINNING_STRING: r"\A", _c.AT_END: "$", _c.AT_END_STRING: r"\z",
       _c.AT_BOUNDARY: r"\b", _c.AT_NON_BOUNDARY: r"\B"}


def _emit(items) -> str:
    out = []
    for op, av in items:
        if op is _c.LITERAL:
            out.append(_char(av))
        elif op is _c.NOT_LITERAL:
            out.append(f"[^{_char(av)}]")
        elif op is _c.ANY:
            out.append(".")
        elif op is _c.IN:
            out.append(_emit_class(av))
        elif op in (_c.MAX_REPEAT, _c.MIN_REPEAT):
            low, high, sub = av
            if low > _RE2_MAX_REPEAT or (high is not _c.MAXREPEAT and high > _RE2_MAX_REPEAT):
                raise _Unsafe
            count = (f"{{{low},}}" if high is _c.MAXREPEAT else
                     f"{{{low}}}" if low == high else f"{{{low},{high}}}")
            out.append(f"(?:{_emit(sub)}){count}{'?' if op is _c.MIN_REPEAT else ''}")
        elif op is _c.SUBPATTERN:
            _group, add, delete, sub = av
            if add or delete:
                raise _Unsafe
            out.append(f"(?:{_emit(sub)})")
        elif op is _c.BRANCH:
            out.append("(?:" + "|".join(_emit(b) for b in av[1]) + ")")
        elif op is _c.AT and av in _AT:
            out.append(_AT[av])
        else:  # lookarounds, back references, conditionals, atomic and possessive forms
            raise _Unsafe
    return "".join(out)


def _emit_class(items) -> str:
    parts, negate = [], False
    for op, av in items:
        if op is _c.NEGATE:
            negate = True
        elif op is _c.LITERAL:
            parts.append(_char(av))
        elif op is _c.RANGE:
            parts.append(f"{_char(av[0])}-{_char(av[1])}")
        elif op is _c.CATEGORY and av in _CATEGORIES:
            parts.append(_CATEGORIES[av])
        else:
            raise _Unsafe
    if not parts:
        raise _Unsafe
    return "[" + ("^" if negate else "") + "".join(parts) + "]"
