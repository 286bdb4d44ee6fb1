"""The OpenTelemetry door (SPEC section 6), one module per concern.

``mapping`` (span and log record -> canonical records, shared with the OTLP reader), ``convert`` (records ->
events, the live door's one checked converter), ``sampler``, ``core`` (the live audit shared by
every live door), ``processor`` (``AuditSpanProcessor``), ``logs`` (``AuditLogRecordProcessor``),
``ownership`` (attribute names and helpers to instrument a worker) and ``metrics``. The doors
and the sampler need the OpenTelemetry SDK and are imported on first use, so the OTLP file reader
can use the mapping without them.
"""

from __future__ import annotations

from typing import Any

from ..core.instants import rfc3339
from ..ingest.otel_mapping import OWNERSHIP_ATTRIBUTES, map_span, span_records

__all__ = ["AuditSpanProcessor", "AuditLogRecordProcessor", "LiveAudit", "AuditAllSampler", "map_span", "span_records", "span_events", "event_from_record",
           "MappingError", "OWNERSHIP_ATTRIBUTES", "rfc3339"]

_LAZY = {"AuditSpanProcessor": "processor", "AuditLogRecordProcessor": "logs", "FindingCallback": "core", "LiveAudit": "core", "AuditAllSampler": "sampler",
         "span_events": "convert", "event_from_record": "convert", "MappingError": "convert"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'auditor.otel' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
