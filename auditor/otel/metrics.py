"""The live audit's OTel instruments: findings by grade, reclaims, stale and late events, drops,
unmapped records, evicted keys, persistence failures, the queue's size, and lease health's
(SPEC section 7): ``auditor.lease.remaining`` and ``auditor.heartbeat.age`` in seconds, and the
counters of expired leases, failed extensions and reclaims, with the dimensions as attributes.
``auditor.heartbeat.age`` at a heartbeat is the gap to the epoch's previous attempt (revision 3:
a refused heartbeat is a late attempt, so its gap counts, as in the batch report's ``H``).

The two durations are Histograms, not Gauges: each is measured at an event (an extension, a
heartbeat, a takeover) from the event's own times, many jobs of one dimension group report between
two exports, and what an operator alerts on is the low tail ("extensions with under 5 s left"),
which a Gauge's last value throws away; a Histogram keeps the distribution, its count, and its min
and max. The SDK's Histogram refuses negative amounts, so a lease already gone is recorded as 0 s:
the bucket up to 0 means "no lease left" (the batch report keeps the exact overrun).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from ..core.model import Finding, Grade

if TYPE_CHECKING:
    from ..detect.lease.live import Measurement

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

#: Lease health's counters (SPEC section 7), by the measurement that adds to them.
_LEASE_COUNTERS = {
    "expired": ("auditor.lease.expired", "{lease}",
                "Takeovers of an owner whose last lease_until was at or before the takeover's ts"),
    "extension_failure": ("auditor.lease.extension_failures", "{heartbeat}",
                          "Lease extensions that failed (heartbeat=lost)"),
    "reclaim": ("auditor.lease.reclaims", "{acquisition}",
                "Acquisitions that displaced an owner which had shown evidence of its own"),
}
#: Bucket boundaries of the two lease durations, in seconds: heartbeat periods and lease lengths.
LEASE_BUCKETS = (0.0, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0, 120.0, 180.0, 300.0, 600.0,
                 1800.0, 3600.0)


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
        histogram = meter.create_histogram
        self._lease = {
            "remaining": histogram("auditor.lease.remaining", unit="s", explicit_bucket_boundaries_advisory=LEASE_BUCKETS,
                                   description="Lease left at each extension and takeover, from the events' "
                                               "own times (0: none left)"),
            "heartbeat_age": histogram("auditor.heartbeat.age", unit="s",
                                       explicit_bucket_boundaries_advisory=LEASE_BUCKETS,
                                       description="Time since the owner's previous heartbeat attempt at each "
                                                   "heartbeat attempt, ok or lost (the gaps H and J are "
                                                   "measured over), and age of its last successful heartbeat "
                                                   "at each takeover"),
        }
        self._lease.update({m: counter(name, unit=unit, description=text)
                            for m, (name, unit, text) in _LEASE_COUNTERS.items()})
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

    def lease(self, measurements: "list[Measurement]") -> None:
        """Record lease health's measurements (``detect.lease.live.LeaseWatch.feed``)."""
        for metric, value, attributes in measurements:
            instrument = self._lease[metric]
            if metric in ("remaining", "heartbeat_age"):
                instrument.record(max(0.0, value), attributes)
            else:
                instrument.add(value, attributes)

    def counts(self, *deltas: int) -> None:
        """Add the increases of the counters, in the order they are declared."""
        for instrument, delta in zip(self._counters, deltas):
            if delta:
                instrument.add(delta)
