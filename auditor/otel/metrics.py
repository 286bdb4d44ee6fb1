"""The live audit's OTel instruments: findings by grade, reclaims, stale and late events, drops,
unmapped records, evicted keys, persistence failures, and the queue's size."""

from __future__ import annotations

import weakref
from typing import Any

from ..model import Finding, Grade

METER_NAME = "auditor.otel"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("split-brain-auditor")
    except PackageNotFoundError:
        return "0+unknown"


#: The counters ``Metrics.counts`` adds to, in its argument order: (name, unit, description).
_COUNTERS = [
    ("auditor.reclaimed_acquisitions", "{acquisition}", "Lease acquisitions that took a workflow key from a lower epoch"),
    ("auditor.stale_events", "{event}", "Progress and effect events produced under a displaced epoch"),
    ("auditor.dropped_spans", "{span}", "Items with ownership evidence dropped: queue full"),
    ("auditor.unmapped_records", "{record}", "Ownership records that could not become events (the store quarantines them)"),
    ("auditor.late_events", "{event}", "Events that reached the detector after a later seq of their key"),
    ("auditor.evicted_keys", "{key}", "Workflow keys forgotten to bound memory (max_workflow_keys)"),
    ("auditor.persistence_failures", "{record}", "Records the DuckDB store could not take"),
]


class Metrics:
    """The instruments on ``meter_provider``, else the global MeterProvider (a no-op until the
    application sets one), on the meter ``auditor.otel`` with the package's version."""

    def __init__(self, meter_provider: Any = None, owner: Any = None) -> None:
        if meter_provider is None:
            from opentelemetry.metrics import get_meter_provider

            meter_provider = get_meter_provider()
        meter = meter_provider.get_meter(METER_NAME, _version())
        counter = meter.create_counter
        self._findings = counter("auditor.findings", unit="{finding}", description="Split-brain findings, by grade")
        self._counters = [counter(name, unit=unit, description=text) for name, unit, text in _COUNTERS]
        self._by_grade = {g: {"ownership.grade": g.value} for g in Grade}
        if owner is not None:
            ref = weakref.ref(owner)

            def queue_size(_options: Any) -> list[Any]:
                from opentelemetry.metrics import Observation

                o = ref()
                return [] if o is None else [Observation(len(o._queue))]  # noqa: SLF001

            meter.create_observable_gauge("auditor.queue_size", [queue_size], unit="{item}",
                                          description="Items waiting for the audit worker")

    def finding(self, f: Finding) -> None:
        self._findings.add(1, self._by_grade[f.grade])

    def counts(self, *deltas: int) -> None:
        """Add the increases of the counters, in the order they are declared."""
        for instrument, delta in zip(self._counters, deltas):
            if delta:
                instrument.add(delta)
