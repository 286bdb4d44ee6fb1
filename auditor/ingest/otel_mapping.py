"""The span -> canonical record mapping (SPEC section 6), shared by both doors.

Spans and span events that carry ``ownership.*`` attributes become canonical records
(``map_span``). The OTLP JSON reader (``ingest.otlp``) and the live span processor both use it, so
a span seen live and the same span read back from a Collector file give the same record and event
id. Plain data in, plain dicts out: nothing here needs the SDK or the processor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..core.instants import rfc3339
from ..core.fields import FIELDS, OPTIONAL_FIELDS

if TYPE_CHECKING:
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.trace import ReadableSpan

PREFIX = "ownership."

#: ``ownership.*`` span/event attributes and the canonical field each one fills (SPEC section 6):
#: every canonical field but those the span itself gives (kind, ts, event_id), the optional
#: fields of sections 7 and 8 included (``ownership.lease_until``, ``ownership.authority_id``...).
OWNERSHIP_ATTRIBUTES: dict[str, str] = {
    PREFIX + f: f for f in ("workflow_key", "epoch", "worker", "seq", "effect_key", "sink", "sink_result",
                            "reporter", "step_id", *OPTIONAL_FIELDS)}
assert set(OWNERSHIP_ATTRIBUTES.values()) <= set(FIELDS)
_EVENT_ATTR = "ownership.event"
#: SPEC revision 3.1: two values cost the record only in these; in any other ``ownership.*``
#: attribute they are kept as a list, which the normalizer drops (``malformed_field``), event kept.
_COSTLY = frozenset({_EVENT_ATTR} | {PREFIX + f for f in ("seq", "workflow_key", "epoch", "effect_key")})


def two_values(key: str, first: Any, second: Any) -> list[Any] | None:
    """An ``ownership.*`` attribute given twice with different values: both as a list, for the
    normalizer to drop with a ``malformed_field``, or None when the record must be refused."""
    return None if key in _COSTLY else [first, second]
_TOOL_CALL_ID = "gen_ai.tool.call.id"  # kept in attrs, never an effect key: providers regenerate it


# The mapping: one span (SDK object or OTLP JSON, reduced to plain values) -> canonical records.

def map_span(trace_id: str, span_id: str, name: str, start_ns: int | None,
             attributes: Mapping[str, Any], events: Sequence[tuple[str, int | None, Mapping[str, Any], int]],
             resource: Mapping[str, Any], capped: bool) -> list[dict[str, Any]]:
    """The canonical records of one span, in SPEC section 2 field names, not yet normalized.

    A span carrying ``ownership.event`` is one record (at its start time); each span event named
    ``ownership.<kind>`` is one record (at its own time) that inherits the span's ``ownership.*``
    attributes unless it sets them itself. ``worker`` falls back to the resource's
    ``service.instance.id``. ``attrs`` holds the record's other attributes, the span name, the
    span's ``gen_ai.tool.call.id``, and ``otel.capped: true`` when span limits dropped attributes
    or events (the evidence may be incomplete). ``event_id`` is ``otel:<trace>:<span>:<n>``
    (``span`` for the span itself, else the event's index), stable across both doors.
    ``events`` items are ``(name, time_ns, attributes, dropped_attribute_count)``.
    """
    base: dict[str, Any] = {}
    own, span_kind = _split(attributes, base)
    if "worker" not in base:
        instance = resource.get("service.instance.id")
        if instance is not None:
            base["worker"] = instance
    out: list[dict[str, Any]] = []
    prefix = f"otel:{trace_id}:{span_id}:"
    if span_kind is not None:
        rec = dict(base)
        rec["kind"] = _kind_name(span_kind)
        if start_ns is not None:
            rec["ts"] = rfc3339(start_ns)
        rec["event_id"] = prefix + "span"
        own["otel.span_name"] = name
        if capped:
            own["otel.capped"] = True
        rec["attrs"] = own
        out.append(rec)
    call_id = own.get(_TOOL_CALL_ID)
    for i, (ev_name, ev_ns, ev_attrs, ev_dropped) in enumerate(events):
        if not ev_name.startswith(PREFIX):
            continue
        rec = dict(base)
        rec["kind"] = ev_name[len(PREFIX):]
        extra, _ = _split(ev_attrs, rec)
        if ev_ns is not None:
            rec["ts"] = rfc3339(ev_ns)
        rec["event_id"] = prefix + str(i)
        if call_id is not None and _TOOL_CALL_ID not in extra:
            extra[_TOOL_CALL_ID] = call_id
        extra["otel.span_name"] = name
        if capped or ev_dropped:
            extra["otel.capped"] = True
        rec["attrs"] = extra
        out.append(rec)
    return out


def map_log(event_name: str | None, time_ns: int | None, attributes: Mapping[str, Any],
            resource: Mapping[str, Any], capped: bool, body: Any = None,
            shaped: bool = False) -> dict[str, Any] | None:
    """The canonical record of one log record, or None when it carries no ownership evidence.

    A log record is evidence when its ``event_name`` is ``ownership.<kind>`` (the Events API's
    way, which OTEP 4430 recommends over span events) or it carries ``ownership.event``; its
    ``ownership.*`` attributes fill the fields as on a span. ``time_ns`` is the record's
    timestamp, else its observed timestamp. No ``event_id``: log records have no id of their own,
    so the normalizer derives one from the canonical fields, identical in both doors (and an
    export retried by a Collector collapses into one event).

    Any other record is read as a log line when the vocabulary reads logs as teams write them
    (``shaped``, SPEC section 2, revision 3; ``shaped_log`` says how); otherwise it is not evidence.
    """
    rec: dict[str, Any] = {}
    own, kind = _split(attributes, rec)
    if kind is None:
        if not (isinstance(event_name, str) and event_name.startswith(PREFIX)):
            return shaped_log(time_ns, attributes, resource, capped, body) if shaped else None
        kind = event_name
    rec["kind"] = _kind_name(kind)
    if "worker" not in rec:
        instance = resource.get("service.instance.id")
        if instance is not None:
            rec["worker"] = instance
    if time_ns:
        rec["ts"] = rfc3339(time_ns)
    if capped:
        own["otel.capped"] = True
    rec["attrs"] = own
    return rec


#: The members a log record read as a log line adds to its attributes.
BODY, TIME, INSTANCE, MOVED = "body", "otel.time", "service.instance.id", "otel.attributes."


def shaped_log(time_ns: int | None, attributes: Mapping[str, Any], resource: Mapping[str, Any],
               capped: bool, body: Any = None) -> dict[str, Any]:
    """A log record as one log line for a vocabulary to read, so that one ``--map`` file reads the
    same log from a file and from a log record. A map body is the line (what the Collector's JSON
    parser and structured bridges send): its members are the record's members, nested maps as
    objects; any other body is the member ``body`` (the message a logging bridge writes). The
    attributes are members too; one that names a body member with another value is kept as
    ``otel.attributes.<name>``. The record's time is ``otel.time`` and the resource's
    ``service.instance.id`` that member, unless the line gives it. Nothing is canonical until the
    vocabulary maps it (``msg = "kind"``, ``"otel.time" = "ts"``): a name the log does not choose
    never competes with one it does."""
    rec: dict[str, Any] = dict(body) if isinstance(body, Mapping) else {}
    if body is not None and not isinstance(body, Mapping):
        rec[BODY] = body
    for k, v in attributes.items():
        if k in rec and rec[k] != v:
            rec[MOVED + k] = v
        else:
            rec[k] = v
    if time_ns and TIME not in rec:
        rec[TIME] = rfc3339(time_ns)
    instance = resource.get(INSTANCE)
    if instance is not None and INSTANCE not in rec:
        rec[INSTANCE] = instance
    if capped:
        rec["otel.capped"] = True
    return rec


def log_record(record: "ReadableLogRecord", shaped: bool = False) -> dict[str, Any] | None:
    """``map_log`` for an SDK log record (``ReadableLogRecord`` or ``ReadWriteLogRecord``)."""
    lr = record.log_record
    attrs = lr.attributes
    resource = record.resource
    return map_log(lr.event_name, lr.timestamp or lr.observed_timestamp, _plain(attrs),
                   _plain(resource.attributes) if resource is not None else {}, bool(_dropped(attrs)),
                   _body(lr.body) if shaped else None, shaped)


def _body(body: Any) -> Any:
    """A log record's body as plain values (the SDK keeps what the caller gave: maps, sequences)."""
    if isinstance(body, Mapping):
        return {str(k): _body(v) for k, v in body.items()}
    if isinstance(body, (list, tuple)):
        return [_body(v) for v in body]
    if isinstance(body, bytes):
        import base64

        return base64.b64encode(body).decode()
    return body


def _split(attributes: Mapping[str, Any], fields: dict[str, Any]) -> tuple[dict[str, Any], Any]:
    """Put the ``ownership.*`` attributes into ``fields`` (canonical names); return the other
    attributes and the ``ownership.event`` value (None when absent)."""
    other: dict[str, Any] = {}
    kind = None
    for k, v in attributes.items():
        field = OWNERSHIP_ATTRIBUTES.get(k)
        if field is not None:
            fields[field] = v
        elif k == _EVENT_ATTR:
            kind = v
        else:
            other[k] = v
    return other, kind


def _kind_name(v: Any) -> Any:
    return v[len(PREFIX):] if isinstance(v, str) and v.startswith(PREFIX) else v


def _plain(mapping: Any) -> Mapping[str, Any]:
    """The dict inside the SDK's ``BoundedAttributes`` (its mapping methods take Python-level
    calls per key); any other mapping as it is."""
    if mapping is None:
        return {}
    inner = getattr(mapping, "_dict", None)
    return inner if isinstance(inner, dict) else mapping


def _dropped(mapping: Any) -> int:
    return getattr(mapping, "dropped", 0) or 0


def span_records(span: "ReadableSpan") -> list[dict[str, Any]]:
    """``map_span`` for an SDK span.

    Reads the SDK's containers directly where it can (``_attributes``, ``_events``, as the
    SDK's own exporters do through ``ReadableSpan``'s properties, minus the copies) because this
    runs once per audited span.
    """
    ctx = span.context
    trace_id = format(ctx.trace_id, "032x") if ctx is not None else "0" * 32
    span_id = format(ctx.span_id, "016x") if ctx is not None else "0" * 16
    raw_attrs = getattr(span, "_attributes", None)
    raw_events = getattr(span, "_events", None)
    if raw_events is None:
        raw_events = span.events
    events = [(ev.name, ev.timestamp, _plain(getattr(ev, "_attributes", None)),
               _dropped(getattr(ev, "_attributes", None))) for ev in raw_events]
    capped = bool(_dropped(raw_attrs) or getattr(raw_events, "dropped", 0))
    resource = span.resource
    return map_span(trace_id, span_id, span.name, span.start_time, _plain(raw_attrs), events,
                    _plain(resource.attributes) if resource is not None else {}, capped)


