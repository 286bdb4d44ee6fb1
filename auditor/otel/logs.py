"""The log door: ``AuditLogRecordProcessor``, an OpenTelemetry log record processor.

Evidence recorded as log records (``event_name="ownership.<kind>"`` or an ``ownership.event``
attribute, the ``ownership.*`` attributes as on spans) is audited by the same core as spans
(``otel.core.LiveAudit``). No trace sampler drops a log record, so this door sees evidence from
spans that were never sampled. With a vocabulary that reads logs as teams write them (paths, a
field mapped onto kind, patterns, [ignore]), every log record is read: its body and attributes
as one log line (``otel_mapping.shaped_log``), each an event, ignored or quarantined.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk._logs import LogRecordProcessor

from .core import LiveAudit
from ..ingest.otel_mapping import _EVENT_ATTR, PREFIX, log_record

__all__ = ["AuditLogRecordProcessor"]


class AuditLogRecordProcessor(LiveAudit, LogRecordProcessor):
    """Audits ownership evidence in log records as they are emitted.

    Add it with ``logger_provider.add_log_record_processor``; everything ``LiveAudit`` says holds
    (one alert per incident, bounded memory, ``db``, ``vocabulary``). ``on_emit`` is O(1) and
    never raises into the caller.
    """

    def on_emit(self, log_record: Any) -> None:
        try:
            if self._shutdown:
                self.dropped_after_shutdown += 1
                return
            lr = log_record.log_record
            name = lr.event_name
            if not self._shaped and not (name and name.startswith(PREFIX)):
                attrs = lr.attributes
                if not attrs or _EVENT_ATTR not in attrs:
                    return
            self._enqueue(log_record)
        except Exception:  # noqa: BLE001 - a hook must never raise into the host
            self._once("on_emit", "auditor: on_emit failed; this log record is not audited", exc_info=True)

    def _records_of(self, item: Any) -> list[dict[str, Any]]:
        rec = log_record(item, self._shaped)
        return [] if rec is None else [rec]

