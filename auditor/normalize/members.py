"""Which members of a record give which canonical field, and the one value each field reads
(SPEC section 2: sources, aliases, ambiguity; revision 3: paths into nested objects).

``collect`` walks a record's members: a name the vocabulary knows (a canonical spelling, a
built-in alias, a ``--map`` name, a flat dotted key such as ``lease.token``) is a source of its
field; an object that a mapped path descends into (``lease`` for ``lease.token``) is a container,
walked and never read as a field or alias itself, its unmapped members kept in ``attrs`` where they
were; every other member goes to ``attrs``. ``pick`` then takes one value per field: the field's
own spellings and ``--map`` names must agree after normalization, and a built-in alias is read
only when none of them is given.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NamedTuple

from ..core.fields import ALIAS_PRIORITY_END, ENUM_FIELDS, INTEGER_FIELDS, JSON_TEXT_FIELDS, KEY_FIELDS, REQUIRED_FIELDS, TIME_FIELDS, name_key
from ..core.instants import when
from .values import Rejected, integer_text, _Float, _json_text, _key_or_none, _text, reason
from .vocabulary import Vocabulary

#: A source of a field: ``(name as written, priority, value)``.
Source = tuple[str, int, Any]


class Collected(NamedTuple):
    """A record's members sorted: ``given`` (field -> its non-empty sources, in member order),
    ``extra`` (members for ``attrs``) and ``inner`` (the record's own ``attrs`` member)."""

    given: dict[str, list[Source]]
    extra: dict[str, Any]
    inner: Any


def collect(members: Iterable[tuple[Any, Any]], vocabulary: Vocabulary) -> Collected:
    given: dict[str, list[Source]] = {}
    extra: dict[str, Any] = {}
    inner = None
    field_of = vocabulary.field_of
    containers = vocabulary.containers
    for name, value in members:
        if not isinstance(name, str):
            name = str(name)
        if containers and isinstance(value, dict) and name_key(name) in containers:
            rest = _descend(name_key(name), name, value, vocabulary, given)
            if rest:
                if name_key(name) == "attrs":
                    inner = rest
                else:
                    extra[name] = rest
            continue
        hit = field_of(name)
        if hit is None:
            if name == "attrs" or name_key(name) == "attrs":
                inner = value
            else:
                extra[name] = value
            continue
        _source(given, hit, name, value)
    return Collected(given, extra, inner)


def _source(given: dict[str, list[Source]], hit: tuple[str, int], name: str, value: Any) -> None:
    f, prio = hit
    if f in JSON_TEXT_FIELDS and isinstance(value, (dict, list)):
        value = _json_text(value)
    if value is None or (isinstance(value, str) and not value.strip()):
        return  # empty is absent: an alias may fill the field
    given.setdefault(f, []).append((name, prio, value))


def _descend(path: str, written: str, obj: dict, vocabulary: Vocabulary, given: dict[str, list[Source]]
             ) -> dict[str, Any] | None:
    """Walk the container ``obj`` at ``path`` (``name_key`` form; ``written`` as the line spells it):
    mapped members become sources, the rest is returned (None when nothing is left), in place."""
    rest: dict[str, Any] = {}
    members = getattr(obj, "members", None)
    for name, value in (members if members is not None else obj.items()):
        if not isinstance(name, str):
            name = str(name)
        full = f"{path}.{name_key(name)}"
        shown = f"{written}.{name}"
        if isinstance(value, dict) and full in vocabulary.containers:
            inner = _descend(full, shown, value, vocabulary, given)
            if inner:
                rest[name] = inner
            continue
        hit = vocabulary.fields.get(full)
        if hit is None:
            rest[name] = value
            continue
        _source(given, hit, shown, value)
    return rest or None


def pick(f: str, sources: list[Source], vocabulary: Vocabulary, extra: dict[str, Any]) -> tuple[str, Any]:
    """The one ``(name, value)`` field ``f`` reads from its ``sources``; built-in aliases beside the
    field's own spellings or ``--map`` names go to ``extra``. ``Rejected`` when they disagree."""
    primary = [(n, v) for n, prio, v in sources if not 0 < prio < ALIAS_PRIORITY_END]
    if primary:
        for n, prio, v in sources:
            if 0 < prio < ALIAS_PRIORITY_END:
                extra.setdefault(n, v)
    return agree(f, primary or [(n, v) for n, _, v in sources], vocabulary)


def agree(f: str, sources: list[tuple[str, Any]], vocabulary: Vocabulary) -> tuple[str, Any]:
    """The one value the sources of ``f`` give (the first, when they agree after normalization);
    ``Rejected`` as ambiguous when two disagree. An object or array where another source gives a
    value is ambiguous too, except in a descriptive field, where it is dropped anyway."""
    first = sources[0]
    if len(sources) == 1:
        return first
    if f not in REQUIRED_FIELDS:
        readable = [s for s in sources if not isinstance(s[1], (dict, list))]
        if not readable:
            return first
        first = readable[0]
        sources = readable
    want = _comparable(f, first[1], vocabulary)
    for other in sources[1:]:
        if _comparable(f, other[1], vocabulary) != want:
            raise Rejected(reason("ambiguous", field=f, first=_spelled(*first), second=_spelled(*other)))
    return first


def _spelled(name: str, value: Any) -> str:
    return f"{json.dumps(name)}: {_jsonish(value)}"


def _jsonish(value: Any) -> str:
    """A value as a reason shows it: JSON, cut to 40 characters."""
    if isinstance(value, _Float):
        return value.text[:40]
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):
        text = "..."
    return text if len(text) <= 40 else text[:39] + "\u2026"


def _comparable(f: str, v: Any, vocabulary: Vocabulary) -> Any:
    """What two spellings of ``f`` are compared by: the value as the field reads it (``7`` equals
    ``"7"``, ``SINK`` equals ``sink``, two writings of one instant, two messages of one kind)."""
    if isinstance(v, (dict, list)):
        return ("object", _json_text(v))
    if isinstance(v, bool):
        return ("bool", v)
    if f in INTEGER_FIELDS:
        if isinstance(v, int):
            return v
        n = integer_text(v) if isinstance(v, str) else None
        return ("text", _text(v)) if n is None else n
    if f == "kind":
        meaning = vocabulary.classify(_text(v)).meaning
        return (meaning[0], dict(meaning[1])) if meaning is not None else ("text", name_key(_text(v)))
    if f in KEY_FIELDS:
        return _key_or_none(v) or ("text", _text(v))
    if f in ENUM_FIELDS:
        return _text(v).strip().lower()
    if f == "ts" or f in TIME_FIELDS:
        t = when(v)
        return t if t is not None else ("text", _text(v))
    return _text(v)
