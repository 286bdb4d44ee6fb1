"""The live door's one checked converter: a span's canonical record -> ``Event``.

``event_from_record`` judges a record with ``normalize.normalize``, the same function the store
calls on every line its SQL fast path cannot take, so the live audit keeps and refuses exactly what
the batch audit does, for the same reasons. ``span_events`` is the processor's shortcut for the
common case (typed OTel attributes with canonical names and values), returning None whenever a
record needs the checks.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import json
from typing import TYPE_CHECKING, Any

from ..detect.live.detector import LiveEvent
from ..core.fields import FIELDS, TIME_FIELDS
from ..core.model import Event, Kind, Reporter, SinkResult
from ..normalize.reference import Ignored, Rejected, normalize
from ..core.instants import instant
from ..store.typed import Prepared, typed
from ..normalize.vocabulary import DEFAULT, Vocabulary
from ..ingest.otel_mapping import _EVENT_ATTR, OWNERSHIP_ATTRIBUTES, PREFIX, _kind_name, _plain

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan


class MappingError(Rejected):
    """A record from a span cannot become a canonical event (the reason says which field)."""


_KINDS = {k.value: k for k in Kind}
_SINK_RESULTS = {r.value: r for r in SinkResult}
_REPORTERS = {r.value: r for r in Reporter}


def event_from_record(rec: dict[str, Any], seq: int | None = None,
                      vocabulary: Vocabulary = DEFAULT) -> Event:
    """A canonical ``Event`` from a ``map_span`` or ``map_log`` record; raises ``MappingError``
    with the reason, or ``Ignored`` when the vocabulary's ``[ignore]`` declares it irrelevant.

    ``seq`` replaces a missing ``seq`` (the caller's observation order). ``attrs`` are redacted
    as the store redacts them (payload-like values hashed), on a copy: the record is persisted too.
    """
    event, placed = checked_event(rec, vocabulary)
    if not placed:
        if seq is None:
            raise MappingError('"seq" is missing')
        event = dataclasses.replace(event, seq=seq)
    return event


def checked_event(rec: dict[str, Any], vocabulary: Vocabulary = DEFAULT) -> tuple[Event, bool]:
    """``(event, whether the record gave a seq)``: ``event_from_record`` without a seq of the
    caller's (an event without one has ``seq`` None), for a record whose key is only known once
    the vocabulary has read it (a log line's)."""
    if any(isinstance(v, (dict, list)) for v in rec.values()):
        rec = copy.deepcopy(rec)  # nested members go to attrs, redacted there: the record is persisted too
    else:
        attrs = rec.get("attrs")
        if attrs:
            rec = dict(rec, attrs=copy.deepcopy(attrs))
    try:
        out = normalize(rec.items(), vocabulary)
    except Ignored:
        raise
    except Rejected as e:
        raise MappingError(str(e)) from None
    s = out["seq"]
    return _event(out, s), s is not None


#: How the normalizer's value of a field becomes ``Event``'s, by field (by role for instants); the
#: other fields are taken as they are. Every field of the registry (core/fields.py) is carried.
_AS_EVENT = {"kind": _KINDS.__getitem__, "sink_result": lambda v: None if v is None else _SINK_RESULTS[v],
             "reporter": lambda v: _REPORTERS.get(v, v), **{f: instant for f in TIME_FIELDS}}


def _event(out: dict[str, Any], s: int | None) -> Event:
    values = {f: _AS_EVENT[f](out[f]) if f in _AS_EVENT else out[f] for f in (*FIELDS, "attrs")}
    values["seq"] = s
    return Event(**values)


def span_events(span: "ReadableSpan") -> list[LiveEvent] | None:
    """The live path's shortcut: ``[event_from_record(r) for r in span_records(span)]`` without
    building the records, as ``LiveEvent`` tuples; None when one of them needs
    ``event_from_record``'s checks (an alias, a string integer, a missing field...).

    Same fields and values (pinned by tests/otel/test_otel.py), except three the live detector
    does not need built per event: ``ts`` stays the span's nanoseconds (findings render it),
    ``event_id`` is None (events at one seq are then compared by value), and ``attrs`` is only
    ``{"otel.capped": True}`` for capped spans.
    """
    try:  # the SDK's own containers (BoundedAttributes, BoundedList); anything else: checked path
        raw_attrs, raw_events, ctx = span._attributes, span._events, span._context
        attrs, events = raw_attrs._dict, raw_events._dq
        capped = bool(raw_attrs.dropped or raw_events.dropped)
    except AttributeError:
        return None
    fields = OWNERSHIP_ATTRIBUTES
    base = {fields[k]: v for k, v in attrs.items() if k in fields}
    if "worker" not in base:
        resource = span._resource
        if resource is not None:
            worker = _plain(resource.attributes).get("service.instance.id")
            if worker is not None:
                base["worker"] = worker
    out: list[LiveEvent] = []
    span_kind = attrs.get(_EVENT_ATTR)
    if span_kind is not None:
        e = _typed_event(base, _kind_name(span_kind), span._start_time, capped)
        if e is None:
            return None
        out.append(e)
    for ev in events:
        name = ev._name
        if not name.startswith(PREFIX):
            continue
        ev_raw = ev._attributes
        f = base
        ev_capped = capped
        if ev_raw is not None:
            try:
                ev_attrs, ev_capped = ev_raw._dict, capped or bool(ev_raw.dropped)
            except AttributeError:
                return None
            if ev_attrs:
                own = {fields[k]: v for k, v in ev_attrs.items() if k in fields}
                if own:
                    f = {**base, **own}
        e = _typed_event(f, name[10:], ev._timestamp, ev_capped)
        if e is None:
            return None
        out.append(e)
    return out


def record_event(rec: dict[str, Any]) -> LiveEvent | None:
    """``event_from_record``'s shortcut for a record whose values are already typed and canonical
    (what the SDK's attributes and OTLP decoding give); None when it needs the checks. ``ts`` stays
    the record's text and ``event_id`` None, as in ``span_events``."""
    attrs = rec.get("attrs")
    return _typed_event(rec, rec.get("kind"), rec.get("ts"), type(attrs) is dict and bool(attrs.get("otel.capped")))


#: The typed columns an event is built from, in ``LiveEvent``'s order.
_TYPED = ("seq", "workflow_key", "kind", "epoch", "worker", "effect_key", "sink", "sink_result", "reporter",
          "step_id", "ts")


def typed_events(prepared: Prepared, n: int) -> list[LiveEvent | None]:
    """The live events of ``n`` records split ahead for the store (``store.typed.prepare``, in
    serve's decoder processes), at the records' places: a typed record's columns are its event,
    no dict visited (what ``record_event`` gives it). None where the record takes ``_admit``'s
    path: the split did not type it, or it has no seq (its key is then ordered by arrival)."""
    t = prepared.typed
    if t is None or not t.num_rows:
        return [None] * n
    m = t.num_rows
    seqs, keys, kinds, epochs, workers, effect_keys, sinks, results, reporters, steps, ts = (
        t.column(c).to_pylist() for c in _TYPED)
    kinds = [_KINDS[k] for k in kinds]
    results = [None] * m if t.column("sink_result").null_count == m else [_SINK_RESULTS.get(r) for r in results]
    reporters = [None] * m if t.column("reporter").null_count == m else [_REPORTERS.get(r) for r in reporters]
    capped = [None] * m
    attrs = t.column("attrs")
    if attrs.null_count < m:
        for i, text in enumerate(attrs.to_pylist()):  # a substring first: json only for the few
            if text is not None and '"otel.capped"' in text and json.loads(text).get("otel.capped"):
                capped[i] = _CAPPED
    new, unset = _new, _UNSET
    events = [new(LiveEvent, row + unset) for row in zip(seqs, keys, kinds, epochs, workers, effect_keys, sinks,
                                                         results, reporters, steps, ts, itertools.repeat(None),
                                                         capped)]
    if t.column("seq").null_count:
        events = [None if e.seq is None else e for e in events]
    if m == n and prepared.rest == []:
        return events  # every record typed, in order (pos 1..n)
    out: list[LiveEvent | None] = [None] * n
    for pos, e in zip(t.column("pos").to_pylist(), events):
        out[pos - 1] = e
    return out


_CAPPED = {"otel.capped": True}
_new = tuple.__new__
_UNSET = tuple(LiveEvent._field_defaults[f] for f in LiveEvent._fields[13:])  # file, line, observed, ...


def _typed_event(f: dict[str, Any], kind_name: Any, ts: int | str | None, capped: bool) -> LiveEvent | None:
    """``event_from_record``'s fast path over the mapped fields ``f``: the records
    ``store.typed.typed`` takes (the store's rule, one for both engines) that have a seq; None
    for the others (the checked path, or arrival order when seq is missing)."""
    if not typed(f, kind_name):
        return None
    get = f.get
    s = get("seq")
    if s is None:
        return None
    kind = _KINDS[kind_name]
    sr, rep = get("sink_result"), get("reporter")
    # tuple.__new__ with every field: NamedTuple's generated __new__ (keyword defaults) costs twice this
    return _new(LiveEvent, (s, get("workflow_key"), kind, None if kind is Kind.OUTCOME_VERIFIED else get("epoch"),
                            get("worker") or "unknown", get("effect_key"), get("sink"),
                            _SINK_RESULTS[sr] if sr is not None and kind is Kind.EFFECT_ATTEMPTED else None,
                            None if rep is None else _REPORTERS[rep], get("step_id"), ts, None,
                            _CAPPED if capped else None, *_UNSET))


# Records -> events for the live detector. The batch door sends the same records through the
