"""OTLP protobuf export requests (what an ``otlphttp`` exporter POSTs) -> canonical records.

The same mapping as spans seen live and OTLP JSON files (``otel.mapping``), over the decoded
``ExportTraceServiceRequest`` / ``ExportLogsServiceRequest`` (``opentelemetry-proto``). Values
come out as the JSON reader gives them (bytes as base64 text, kvlists as dicts), so a span read
from any door is the same record with the same event id.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any

from ..ingest.otel_mapping import map_log, map_span, two_values


def _value(v: Any) -> Any:
    which = v.WhichOneof("value")
    if which == "string_value":
        return v.string_value
    if which == "int_value":
        return v.int_value
    if which == "bool_value":
        return v.bool_value
    if which == "double_value":
        return v.double_value
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    if which == "kvlist_value":
        return _attributes(v.kvlist_value.values)
    if which == "bytes_value":
        return base64.b64encode(v.bytes_value).decode()
    return None


class Ambiguous(ValueError):
    """An ``ownership.*`` attribute given twice with different values: the record is refused."""


def _attributes(kvs: Iterable[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in kvs:
        key, value = kv.key, _value(kv.value)
        if key in out and key.startswith("ownership.") and out[key] != value:
            value = two_values(key, out[key], value)  # a descriptive one: dropped, kept (rev 3.1)
            if value is None:
                raise Ambiguous(f'attribute "{key}" is given twice with different values; the record is '
                                "ambiguous, keep one of them")
        out[key] = value
    return out


def trace_records(body: bytes, reasons: list[str] | None = None) -> list[dict[str, Any]]:
    """The canonical records of one protobuf ``ExportTraceServiceRequest``; raises
    ``google.protobuf.message.DecodeError`` on a body that is not one. A span that cannot be read
    costs only itself: its reason goes to ``reasons``."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out: list[dict[str, Any]] = []
    nth = 0
    for rs in ExportTraceServiceRequest.FromString(body).resource_spans:
        try:
            resource = _attributes(rs.resource.attributes)
        except Ambiguous as e:
            resource = None
            bad = str(e)
        for ss in rs.scope_spans:
            for span in ss.spans:
                nth += 1
                try:
                    if resource is None:
                        raise Ambiguous(bad)
                    events = [(ev.name, ev.time_unix_nano or None, _attributes(ev.attributes),
                               ev.dropped_attributes_count) for ev in span.events]
                    attributes = _attributes(span.attributes)
                except Ambiguous as e:
                    if reasons is not None:
                        reasons.append(f"span {nth} of this request: {e}")
                    continue
                out += map_span(span.trace_id.hex().rjust(32, "0"), span.span_id.hex().rjust(16, "0"), span.name,
                                span.start_time_unix_nano or None, attributes, events, resource,
                                bool(span.dropped_attributes_count or span.dropped_events_count))
    return out


def log_records(body: bytes, reasons: list[str] | None = None, shaped: bool = False) -> list[dict[str, Any]]:
    """The canonical records of one protobuf ``ExportLogsServiceRequest`` (reasons as in
    ``trace_records``). ``shaped`` (``Vocabulary.shaped``: a ``--map`` that reads logs as teams
    write them) makes every other log record a record too, its body and attributes for the
    vocabulary to read (``otel_mapping.shaped_log``)."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    out: list[dict[str, Any]] = []
    nth = 0
    for rl in ExportLogsServiceRequest.FromString(body).resource_logs:
        try:
            resource = _attributes(rl.resource.attributes)
        except Ambiguous as e:
            resource = None
            bad = str(e)
        for sl in rl.scope_logs:
            for log in sl.log_records:
                nth += 1
                try:
                    if resource is None:
                        raise Ambiguous(bad)
                    attributes = _attributes(log.attributes)
                except Ambiguous as e:
                    if reasons is not None:
                        reasons.append(f"log record {nth} of this request: {e}")
                    continue
                rec = map_log(log.event_name or None, log.time_unix_nano or log.observed_time_unix_nano or None,
                              attributes, resource, bool(log.dropped_attributes_count),
                              _value(log.body) if shaped and log.HasField("body") else None, shaped)
                if rec is not None:
                    out.append(rec)
    return out
