"""Instrumenting a worker: the ``ownership.*`` attribute names (SPEC section 6) and a few calls
that record one piece of evidence each.

Evidence goes out as an OpenTelemetry log record named ``ownership.<kind>`` (the Events API's
shape; OTEP 4430 moves events from span events to log records), so no trace sampler can drop it
and no span event limit can push an early commit out. Pass ``span=`` to record a span event on that
span instead (SPEC section 6's older form). Both are audited the same way, live or from files.

    from auditor.otel.ownership import Lease

    lease = Lease("tenant-a/export/2026-07-26", epoch=18, worker="beta")
    lease.acquired(seq=5)
    lease.progress(seq=6)
    lease.committed("release-index/2026-07-26", seq=8, sink="index", reporter="sink")
"""

from __future__ import annotations

from typing import Any

from ..ingest.otel_mapping import PREFIX

WORKFLOW_KEY = "ownership.workflow_key"
EPOCH = "ownership.epoch"
WORKER = "ownership.worker"
EVENT = "ownership.event"
SEQ = "ownership.seq"
EFFECT_KEY = "ownership.effect_key"
SINK = "ownership.sink"
SINK_RESULT = "ownership.sink_result"
REPORTER = "ownership.reporter"
STEP_ID = "ownership.step_id"
LEASE_UNTIL = "ownership.lease_until"
HEARTBEAT = "ownership.heartbeat"
REASON = "ownership.reason"

__all__ = ["WORKFLOW_KEY", "EPOCH", "WORKER", "EVENT", "SEQ", "EFFECT_KEY", "SINK", "SINK_RESULT", "REPORTER",
           "STEP_ID", "LEASE_UNTIL", "HEARTBEAT", "REASON", "attributes", "record", "record_progress",
           "record_effect", "Lease"]

_FIELDS = {"workflow_key": WORKFLOW_KEY, "epoch": EPOCH, "worker": WORKER, "seq": SEQ, "effect_key": EFFECT_KEY,
           "sink": SINK, "sink_result": SINK_RESULT, "reporter": REPORTER, "step_id": STEP_ID,
           "lease_until": LEASE_UNTIL, "heartbeat": HEARTBEAT, "reason": REASON}


def attributes(workflow_key: str, epoch: int | None = None, *, attrs: dict[str, Any] | None = None,
               **fields: Any) -> dict[str, Any]:
    """The ``ownership.*`` attributes of one piece of evidence; None values are left out.
    ``fields`` are canonical field names (``seq``, ``worker``, ``effect_key``, ``lease_until`` as
    RFC 3339 text, ``heartbeat``...); ``attrs`` are other attributes kept beside them (lease
    health's dimensions: ``{"tool": "browser"}``)."""
    out = dict(attrs or ())
    out[WORKFLOW_KEY] = workflow_key
    if epoch is not None:
        out[EPOCH] = epoch
    for name, value in fields.items():
        if value is not None:
            out[_FIELDS[name]] = value  # KeyError names a field the contract does not have
    return out


_LOGGER = None


def _default_logger():
    global _LOGGER
    if _LOGGER is None:
        from opentelemetry._logs import get_logger

        from .metrics import _version

        _LOGGER = get_logger("auditor.ownership", _version())
    return _LOGGER


def record(kind: str, workflow_key: str, epoch: int | None = None, *, span: Any = None, logger: Any = None,
           attrs: dict[str, Any] | None = None, **fields: Any) -> None:
    """Record one ``kind`` of evidence (``lease_acquired``, ``progress``, ``effect_attempted``,
    ``effect_committed``, ``outcome_verified``): a log record on ``logger`` (default: the global
    LoggerProvider's ``auditor.ownership`` logger), or a span event on ``span`` when given.
    ``attrs`` are kept beside the ``ownership.*`` attributes. Never blocks on I/O: the SDK's
    processors batch."""
    evidence = attributes(workflow_key, epoch, attrs=attrs, **fields)
    if span is not None:
        span.add_event(PREFIX + kind, evidence)
        return
    (logger or _default_logger()).emit(event_name=PREFIX + kind, attributes=evidence)


def record_progress(span: Any, workflow_key: str, epoch: int, **fields: Any) -> None:
    """``record("progress", ...)`` on ``span`` (None: as a log record)."""
    record("progress", workflow_key, epoch, span=span, **fields)


def record_effect(span: Any, workflow_key: str, epoch: int, effect_key: str, *, committed: bool = True,
                  **fields: Any) -> None:
    """An ``effect_committed`` (or, with ``committed=False``, an ``effect_attempted``: pass
    ``sink_result="rejected"`` for a fence's refusal) on ``span`` (None: as a log record)."""
    record("effect_committed" if committed else "effect_attempted", workflow_key, epoch, span=span,
           effect_key=effect_key, **fields)


class Lease:
    """One owner's evidence for one workflow key: the key, epoch and worker given once, and the
    ``attrs`` every event carries (lease health's dimensions, e.g. ``{"tool": "browser"}``).

    Each method records one event as a log record (or on ``span``); ``seq`` is the authoritative
    order (the coordination store's revision, the sink's sequence), never a worker clock.
    """

    def __init__(self, workflow_key: str, epoch: int, worker: str | None = None, *, span: Any = None,
                 logger: Any = None, attrs: dict[str, Any] | None = None) -> None:
        self.workflow_key, self.epoch, self.worker, self.span, self.logger = workflow_key, epoch, worker, span, logger
        self.attrs = attrs

    def _record(self, kind: str, **fields: Any) -> None:
        record(kind, self.workflow_key, self.epoch, span=self.span, logger=self.logger, worker=self.worker,
               attrs=self.attrs, **fields)

    def acquired(self, seq: int | None = None, **fields: Any) -> None:
        """The claim; pass ``lease_until`` (RFC 3339) for the expiry the coordinator granted."""
        self._record("lease_acquired", seq=seq, **fields)

    def progress(self, seq: int | None = None, **fields: Any) -> None:
        self._record("progress", seq=seq, **fields)

    def heartbeat(self, seq: int | None = None, *, ok: bool = True, lease_until: str | None = None,
                  reason: str | None = None, **fields: Any) -> None:
        """A heartbeat: ``ok`` with the extended ``lease_until``, or lost (``ok=False``) with its
        ``reason`` (``zero_rows``: the lease was no longer ours; ``timeout``)."""
        self._record("progress", seq=seq, heartbeat="ok" if ok else "lost", lease_until=lease_until,
                     reason=reason, **fields)

    def attempted(self, effect_key: str, seq: int | None = None, **fields: Any) -> None:
        self._record("effect_attempted", effect_key=effect_key, seq=seq, **fields)

    def committed(self, effect_key: str, seq: int | None = None, **fields: Any) -> None:
        self._record("effect_committed", effect_key=effect_key, seq=seq, **fields)

    def verified(self, effect_key: str, seq: int | None = None, **fields: Any) -> None:
        self._record("outcome_verified", effect_key=effect_key, seq=seq, **fields)
