"""The span processor's OTel instruments: findings by grade, reclaims, stale events, drops."""

from __future__ import annotations

from ..model import Finding, Grade

class Metrics:
    """The processor's instruments on the given MeterProvider."""

    def __init__(self, meter_provider) -> None:
        meter = meter_provider.get_meter("auditor.otel")
        self._findings = meter.create_counter(
            "auditor.findings", unit="{finding}", description="Split-brain findings, by grade")
        self._reclaims = meter.create_counter(
            "auditor.reclaimed_acquisitions", unit="{acquisition}",
            description="Lease acquisitions that took a workflow key from a lower epoch")
        self._stale = meter.create_counter(
            "auditor.stale_events", unit="{event}",
            description="Progress and effect events produced under a displaced epoch")
        self._dropped = meter.create_counter(
            "auditor.dropped_spans", unit="{span}", description="Ownership spans dropped: queue full")
        self._by_grade = {g: {"ownership.grade": g.value} for g in Grade}

    def finding(self, f: Finding) -> None:
        self._findings.add(1, self._by_grade[f.grade])

    def counts(self, reclaims: int, stale: int, dropped: int) -> None:
        if reclaims:
            self._reclaims.add(reclaims)
        if stale:
            self._stale.add(stale)
        if dropped:
            self._dropped.add(dropped)
