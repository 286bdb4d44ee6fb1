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

from .mapping import map_log, map_span


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


def _attributes(kvs: Iterable[Any]) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


def trace_records(body: bytes) -> list[dict[str, Any]]:
    """The canonical records of one protobuf ``ExportTraceServiceRequest``; raises
    ``google.protobuf.message.DecodeError`` on a body that is not one."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    out: list[dict[str, Any]] = []
    for rs in ExportTraceServiceRequest.FromString(body).resource_spans:
        resource = _attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                events = [(ev.name, ev.time_unix_nano or None, _attributes(ev.attributes), ev.dropped_attributes_count)
                          for ev in span.events]
                out += map_span(span.trace_id.hex().rjust(32, "0"), span.span_id.hex().rjust(16, "0"), span.name,
                                span.start_time_unix_nano or None, _attributes(span.attributes), events, resource,
                                bool(span.dropped_attributes_count or span.dropped_events_count))
    return out


def log_records(body: bytes) -> list[dict[str, Any]]:
    """The canonical records of one protobuf ``ExportLogsServiceRequest``."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    out: list[dict[str, Any]] = []
    for rl in ExportLogsServiceRequest.FromString(body).resource_logs:
        resource = _attributes(rl.resource.attributes)
        for sl in rl.scope_logs:
            for log in sl.log_records:
                rec = map_log(log.event_name or None, log.time_unix_nano or log.observed_time_unix_nano or None,
                              _attributes(log.attributes), resource, bool(log.dropped_attributes_count))
                if rec is not None:
                    out.append(rec)
    return out
