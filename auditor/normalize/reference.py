"""Stage 2, normalize: one record (a JSON line, a CSV or Parquet row, a logfmt line, a span's or a
log record's record) to the canonical fields, the reason it is quarantined, or the ``[ignore]``
entry that declares it irrelevant. SPEC section 2, revisions 2 and 3, built on ``vocabulary``.

The store's SQL takes the common shape (canonical names, well-typed values) on its fast path and
hands every other line to ``normalize_line``; the live doors call ``normalize`` on their records.
Both therefore keep, ignore and refuse the same lines for the same reasons. ``members`` decides
which member gives which field, ``values`` reads each value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from ..core.columns import added_fields
from ..core.fields import (REGISTRY, DECISIONS, EFFECT_KINDS, EPOCH_OPTIONAL_KINDS, FIELDS, HEARTBEATS, INTEGER_FIELDS,
                           REPORTERS, SINK_RESULTS, TIME_FIELDS, UNKNOWN_SINK_RESULT, ALIAS_PRIORITY_END, name_key)
from .jsonline import parse_line
from .members import collect, pick
from .values import (ATTRS_ERROR, Ignored, Rejected, _as_int, _as_key, _attrs, _choice, _instant, _key_or_none,
                     _payload_key, _scalar, _shown, _text, _ts, reason, redact)
from .vocabulary import DEFAULT, Vocabulary
from .words import hint as guess_kind

__all__ = ["normalize", "normalize_line", "parse_line", "attrs_of", "redact", "Rejected", "Ignored",
           "SQL_SHAPE", "ATTRS_ERROR", "_payload_key", "_ts"]

_BARE_TOML_KEY = re.compile(r"[A-Za-z0-9_-]+")


def attrs_of(record: dict[str, Any], keep_payloads: bool = False,
             vocabulary: Vocabulary = DEFAULT) -> dict[str, Any] | None:
    """The ``attrs`` of a raw record: its ``attrs`` object plus every non-canonical field."""
    extra = {k: v for k, v in record.items() if vocabulary.field_of(k) is None and k != "attrs"}
    return _attrs(record.get("attrs"), extra, keep_payloads)


def normalize(members: Iterable[tuple[Any, Any]], vocabulary: Vocabulary = DEFAULT,
              keep_payloads: bool = False) -> dict[str, Any]:
    """The canonical fields of one record given as ``(name, value)`` members (duplicates kept;
    a value may be an object that a mapped path descends into), plus ``attrs`` (a dict or None),
    ``ts_epoch`` (seconds, when ``ts`` was a number) and ``dropped`` (the descriptive fields whose
    value could not be read and was dropped, SPEC revision 3's ``malformed_field``).

    Raises ``Rejected`` with the quarantine reason, or ``Ignored`` when the kind value is one an
    ``[ignore]`` entry declares irrelevant and no kind entry claims (nothing else is read then: an
    ignored line needs no key or epoch). The sources of a field are its canonical spellings (any
    case, camelCase) and its ``--map`` names and paths; different non-empty values among them make
    the line ambiguous, whatever their order. A built-in alias is read only when none of them is
    given (unread, it goes to ``attrs``). ``seq`` may come back None (the store then decides
    whether the key is ordered by observation or the event is unplaced). ``ts`` is as written;
    whether it parses as RFC 3339 is left to the store (DuckDB's cast), which drops it, and
    reports it dropped, when it does not.
    """
    given, extra, inner = collect(members, vocabulary)
    picked: dict[str, tuple[str, Any]] = {}
    if "kind" in given:  # first: an ignored line is read no further
        picked["kind"] = pick("kind", given["kind"], vocabulary, extra)
    kind_name, raw_kind = picked.get("kind", (None, None))
    hit = None
    if raw_kind is not None and not isinstance(raw_kind, (dict, list)):
        found = vocabulary.classify(_text(raw_kind))
        if found.ignored is not None:
            raise Ignored(_text(raw_kind), found.ignored)
        if found.ambiguous is not None:
            (first, one), (second, other) = found.ambiguous
            raise Rejected(reason("kind_ambiguous", source=_source_name(kind_name, vocabulary),
                                  value=_shown(raw_kind, 60), first=f"{first} reads as {one}",
                                  second=f"{second} as {other}"))
        hit = found.meaning
    kind = None if hit is None else hit[0]
    undecided: set[str] = set()
    for f, sources in given.items():
        if f not in picked:
            try:
                picked[f] = pick(f, sources, vocabulary, extra)
            except Rejected:
                if _costly(f, kind):
                    raise
                undecided.add(f)  # two values of a descriptive field: dropped, the event kept (rev 3.1)
    get = {f: v for f, (_, v) in picked.items()}.get
    # An object or array costs the line only in a field the event's kind reads.
    for f in ("seq", "workflow_key", "kind", "epoch", "effect_key"):
        if (f == "epoch" and kind == "outcome_verified") or (f == "effect_key" and kind not in EFFECT_KINDS):
            continue
        _scalar(f, get(f))
    key = get("workflow_key")
    if key is None:
        raise Rejected(reason("key_missing"))
    key = _as_key("workflow_key", key)
    if raw_kind is None:
        raise Rejected(reason("kind_missing"))
    if hit is None:
        raise Rejected(_unknown_kind(kind_name, raw_kind, vocabulary))
    out = {"seq": None if get("seq") is None else _as_int("seq", get("seq")), "workflow_key": key, "kind": kind}
    dropped: set[str] = set()
    _owner_fields(out, get, kind, dropped)
    _descriptive_fields(out, get, kind, hit[1], dropped)
    out["attrs"] = _attrs(inner, extra, keep_payloads) if (inner is not None or extra) else None
    out["dropped"] = sorted(dropped | undecided) or None
    return out


def _costly(f: str, kind: str | None) -> bool:
    """Whether two values of ``f`` cost the line (SPEC revision 3.1): only in ``seq``,
    ``workflow_key``, ``kind``, ``epoch`` (not on ``outcome_verified``, which ignores it) and an
    effect kind's ``effect_key``; a kind no entry knows is quarantined anyway, for its kind."""
    if f in ("seq", "workflow_key", "kind"):
        return True
    if f == "epoch":
        return kind != "outcome_verified"
    return f == "effect_key" and (kind is None or kind in EFFECT_KINDS)


def _source_name(name: str | None, vocabulary: Vocabulary) -> str:
    """How a reason names where the kind came from: the ``--map`` name or path that gave it, else
    ``kind`` (a canonical spelling or a built-in alias)."""
    hit = None if name is None else vocabulary.field_of(name) or vocabulary.fields.get(
        ".".join(name_key(p) for p in name.split(".")))
    return name if hit is not None and hit[1] >= ALIAS_PRIORITY_END else "kind"


def _unknown_kind(name: str | None, raw_kind: Any, vocabulary: Vocabulary) -> str:
    text = _text(raw_kind).strip()
    shown = text if _BARE_TOML_KEY.fullmatch(text) else json.dumps(text)
    ignore = ""
    if vocabulary.shaped:
        ignore = f'; or, if it is not about ownership, declare it irrelevant: [ignore] kinds = [{json.dumps(text)[:60]}]'
    return reason("kind_unknown", source=_source_name(name, vocabulary), value=_shown(raw_kind, 60),
                  name=shown[:60], guess=guess_kind(name_key(text)), ignore=ignore)


def _owner_fields(out: dict[str, Any], get, kind: str, dropped: set[str]) -> None:
    """``epoch`` and ``effect_key``: required where the kind reads them, else never costly."""
    epoch = None
    if kind != "outcome_verified":  # epoch on outcome_verified is ignored, whatever it holds
        epoch = get("epoch")
        if epoch is not None:
            epoch = _as_int("epoch", epoch)
            if epoch < 0:
                raise Rejected(reason("negative_epoch", value=epoch))
        elif kind not in EPOCH_OPTIONAL_KINDS:
            raise Rejected(reason("epoch_missing", kind=kind))
    effect_key = get("effect_key")
    if kind in EFFECT_KINDS:
        if effect_key is None:
            raise Rejected(reason("effect_key_missing", kind=kind))
        effect_key = _as_key("effect_key", effect_key)
    elif effect_key is not None:  # a field the kind does not use never costs the line
        effect_key = _key_or_none(effect_key)
        if effect_key is None:
            dropped.add("effect_key")
    out["epoch"], out["effect_key"] = epoch, effect_key


def _descriptive_fields(out: dict[str, Any], get, kind: str, implied, dropped: set[str]) -> None:
    """Descriptive fields (SPEC rev 3): a value that cannot be read is dropped, the event stays,
    and the drop is reported (malformed_field). Authority fields never cost a line either."""
    def text_of(f: str) -> str | None:
        v = get(f)
        if v is None:
            return None
        if isinstance(v, (dict, list)):
            dropped.add(f)
            return None
        return _text(v)

    authority_id = get("authority_id")
    if authority_id is not None:
        authority_id = _key_or_none(authority_id)
        if authority_id is None:
            dropped.add("authority_id")
    decision = _choice(get("decision"), DECISIONS)
    if decision is None and (kind == "revalidated" or get("decision") is not None):
        dropped.add("decision")  # a revalidation without a readable decision decides nothing
    sink_result = None
    if kind == "effect_attempted":
        sink_result = implied.get("sink_result")
        if sink_result is None and (given_result := text_of("sink_result")) is not None:
            sink_result = given_result.strip().lower()
            if sink_result not in SINK_RESULTS:
                sink_result = UNKNOWN_SINK_RESULT
                dropped.add("sink_result")
    reporter = text_of("reporter")
    if reporter is not None:
        reporter = reporter.strip()
        if reporter.lower() in REPORTERS:
            reporter = reporter.lower()
    ts, ts_epoch = get("ts"), None
    if ts is not None:
        ts, ts_epoch = (None, None) if isinstance(ts, (dict, list)) else _ts(ts)
        if ts is None:
            dropped.add("ts")
    worker = text_of("worker")
    out["worker"] = "unknown" if worker is None else worker
    for f in _TEXT_1:
        out[f] = text_of(f)
    out["sink_result"], out["reporter"], out["ts"], out["ts_epoch"] = sink_result, reporter, ts, ts_epoch
    for f in TIME_FIELDS:
        v = get(f)
        out[f] = None if v is None or isinstance(v, (dict, list)) else _instant(v)
        if v is not None and out[f] is None:
            dropped.add(f)
    heartbeat = implied.get("heartbeat")
    if heartbeat is None and get("heartbeat") is not None:
        heartbeat = _choice(get("heartbeat"), HEARTBEATS)
        if heartbeat is None:
            dropped.add("heartbeat")
    out["heartbeat"] = heartbeat
    out["decision"], out["authority_id"] = decision, authority_id
    for f in _TEXT_2:
        out[f] = text_of(f)
    _added_fields(out, get, text_of, dropped)


#: The text fields each revision's rules above read as text (worker has a default of its own).
_TEXT_1 = tuple(s.name for s in REGISTRY if s.revision == "1" and s.role == "text" and s.name != "worker")
_TEXT_2 = tuple(s.name for s in REGISTRY if s.revision == "2" and s.role in ("text", "json"))


def _added_fields(out: dict[str, Any], get, text_of, dropped: set[str]) -> None:
    """The fields added after revision 2 (``core.columns.added_fields``: text, json, key, enum or
    time), each read by its role alone: a value that cannot be read is dropped and reported, the
    event stays (instants are read with ``TIME_FIELDS`` above)."""
    for s in added_fields():
        v = get(s.name)
        if s.role in ("text", "json"):
            out[s.name] = text_of(s.name)
        elif s.role in ("key", "enum"):
            out[s.name] = None if v is None else _key_or_none(v) if s.role == "key" else _choice(v, s.values)
            if v is not None and out[s.name] is None:
                dropped.add(s.name)


_OUT_FIELDS = FIELDS + ("ts_epoch", "attrs", "rejected", "dropped", "ignored")


def normalize_line(text: str, vocabulary: Vocabulary = DEFAULT, keep_payloads: bool = False) -> str:
    """``normalize`` of one JSON line as the JSON object the store's SQL reads back: the
    canonical fields, ``ts_epoch``, ``attrs`` (JSON text), ``rejected`` (the quarantine reason,
    null for an event; ``reason`` is a canonical field of its own) and ``ignored`` (the kind value
    an ``[ignore]`` entry matched; the store counts the line under that entry)."""
    try:
        out = normalize(parse_line(text), vocabulary, keep_payloads)
    except Ignored as e:
        return json.dumps({"ignored": e.value})
    except Rejected as e:
        return json.dumps({"rejected": str(e)})
    attrs = out["attrs"]
    if attrs is not None:
        try:
            out["attrs"] = json.dumps(attrs, sort_keys=True, ensure_ascii=False, default=str)
        except (ValueError, RecursionError):
            out["attrs"] = json.dumps(ATTRS_ERROR)
    return json.dumps(out, default=str)


#: The shape ``normalize_line``'s output is read back with (DuckDB ``json_transform``).
SQL_SHAPE = json.dumps({**{f: "VARCHAR" for f in FIELDS}, "seq": "BIGINT", "epoch": "BIGINT",
                        "ts_epoch": "DOUBLE", "attrs": "VARCHAR", "rejected": "VARCHAR",
                        "dropped": "VARCHAR[]", "ignored": "VARCHAR"})
assert set(json.loads(SQL_SHAPE)) == set(_OUT_FIELDS)
assert INTEGER_FIELDS == {f for f, t in json.loads(SQL_SHAPE).items() if t == "BIGINT"}
