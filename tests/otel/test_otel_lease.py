"""Lease health live (SPEC section 7): the span and log record processors export auditor.lease.remaining,
auditor.heartbeat.age and the counters of expired leases, failed extensions and reclaims, with the
dimensions as attributes; measured with the real OTel SDK (TracerProvider, LoggerProvider,
InMemoryMetricReader) and compared with the batch audit of the same events."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from auditor import audit
from auditor.normalize.reference import normalize
from auditor.otel import AuditLogRecordProcessor, AuditSpanProcessor
from auditor.otel.ownership import Lease
from auditor.simulate import LeaseTiming, simulate
from auditor.normalize.vocabulary import vocabulary_of

from ..conftest import FIXTURES
from .otel_kit import SEED, triples

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
W1W2 = FIXTURES / "w1_w2_pause_expired_lease.jsonl"
SEED000 = FIXTURES / "lease_timing_35s_vs_90s.jsonl"
LEASE_METRICS = ("auditor.lease.remaining", "auditor.heartbeat.age", "auditor.lease.expired",
                 "auditor.lease.extension_failures", "auditor.lease.reclaims")


def canonical(path: Path, vocabulary=None) -> list[dict]:
    """The lines of a log as canonical records (aliases resolved), in file order."""
    voc = vocabulary_of(vocabulary)
    return [normalize(json.loads(line).items(), voc) for line in path.read_text().splitlines() if line.strip()]


def evidence(rec: dict) -> tuple[str, dict, int | None]:
    """A canonical record as (event name, OTel attributes, time in ns): ``ownership.*`` for the
    contract's fields, the record's attrs beside them (the dimensions)."""
    attrs = {f"ownership.{k}": v for k, v in rec.items()
             if k not in ("kind", "attrs", "ts", "event_id") and v is not None}
    attrs.update(rec.get("attrs") or {})
    if rec.get("ts") is None:
        return "ownership." + rec["kind"], attrs, None
    when = datetime.fromisoformat(rec["ts"].replace("Z", "+00:00"))
    # Whole microseconds, exactly: a float's 1e9 * timestamp() can land a nanosecond under a
    # millisecond, which the store (and the live watch) would then count in the millisecond before.
    return "ownership." + rec["kind"], attrs, (when - EPOCH) // timedelta(microseconds=1) * 1000


def live(door: str, records, **kw):
    """Send ``records`` through one live door of the real SDK (``log records``: one log record
    each; ``spans``: one span each, carrying ``ownership.event``, starting at the event's ts), or
    call ``records(logger)`` to record them itself; return the processor, after shutdown, and its
    lease-health data points."""
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    if door == "log records":
        processor = AuditLogRecordProcessor(meter_provider=meters, **kw)
        provider = LoggerProvider()
        provider.add_log_record_processor(processor)
        logger = provider.get_logger("worker")

        def emit(name, attrs, t):
            logger.emit(event_name=name, attributes=attrs, timestamp=t)
    else:
        processor = AuditSpanProcessor(meter_provider=meters, **kw)
        provider = TracerProvider()
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("worker")

        def emit(name, attrs, t):
            tracer.start_span("job step", attributes={**attrs, "ownership.event": name}, start_time=t).end(end_time=t)
    if callable(records):
        records(logger)
    else:
        for rec in records:
            emit(*evidence(rec))
    provider.shutdown()
    return processor, points(reader)


def points(reader) -> dict:
    """Every lease-health data point: ``(metric, attributes) -> value`` for a counter, ``(count,
    sum, min, max)`` for a histogram."""
    out = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                if m.name not in LEASE_METRICS:
                    continue
                for p in m.data.data_points:
                    key = (m.name, tuple(sorted(p.attributes.items())))
                    out[key] = p.value if hasattr(p, "value") else (p.count, p.sum, p.min, p.max)
    return out


def point(metric: str, at: str | None = None, **dims: str) -> tuple:
    """The key of one data point in ``points``: the metric and its sorted attributes."""
    attrs = dict(dims, **({"auditor.measured_at": at} if at else {}))
    return metric, tuple(sorted(attrs.items()))


W1W2_POINTS = {
    # W1 extended three times with 60 s left (seqs 2, 4; W2 at seq 6); at the takeover W1's lease
    # had run out 15 s before (recorded as 0: no lease left).
    point("auditor.lease.remaining", "extension", tool="http"): (3, 180.0, 60.0, 60.0),
    point("auditor.lease.remaining", "takeover", tool="http"): (1, 0.0, 0.0, 0.0),
    # W1's heartbeat attempts: two successful ones 30 s apart, then the refused one 140 s later
    # (revision 3: a lost heartbeat is a late attempt, and its gap counts); its last successful
    # one was 105 s old at the takeover.
    point("auditor.heartbeat.age", "heartbeat", tool="http"): (2, 170.0, 30.0, 140.0),
    point("auditor.heartbeat.age", "takeover", tool="http"): (1, 105.0, 105.0, 105.0),
    point("auditor.lease.expired", tool="http"): 1,
    point("auditor.lease.extension_failures", tool="http"): 1,
    point("auditor.lease.reclaims", tool="http"): 1,
}


@pytest.mark.parametrize("door", ["log records", "spans"])
def test_w1_w2_pause_live_metrics(door):
    processor, got = live(door, canonical(W1W2))
    assert got == W1W2_POINTS
    assert triples(processor.findings) == [("stale_activity", "8f1b2c7e", 7), ("rejected_attempt", "8f1b2c7e", 8)]
    # The same figures as the batch report of the file.
    with audit(W1W2) as batch:
        (key,) = batch.lease_health.keys
    m = key.metrics
    assert (m.expired_leases, m.extension_failures, m.reclaims, m.heartbeat_age_at_takeover_max,
            m.remaining_at_extension_min, m.heartbeat_interval_max) == (1, 1, 1, 105.0, 60.0, 140.0)


def test_lease_by_chooses_the_attributes():
    _, got = live("log records", canonical(SEED000), lease_by=("model",))
    assert set(got) == {point(m, at, model=model) for m, at in (("auditor.lease.remaining", "extension"),
                                                                 ("auditor.heartbeat.age", "heartbeat"))
                        for model in ("m-large", "m-small")}
    # Seed 000's heartbeats: 30 s, 50 s (late by the 20 s of jitter), 30 s, for each of the four jobs.
    assert got[point("auditor.heartbeat.age", "heartbeat", model="m-large")] == (6, 220.0, 30.0, 50.0)
    # 35 s leases extended every 30 s leave 5 s, and none after the late heartbeat (15 s overdue).
    assert got[point("auditor.lease.remaining", "extension", model="m-large")] == (8, 30.0, 0.0, 5.0)
    assert got[point("auditor.lease.remaining", "extension", model="m-small")] == (8, 440.0, 40.0, 60.0)


def test_events_without_lease_fields_pay_nothing():
    processor, got = live("spans", [dict(normalize(e.items()), attrs={"tool": "http"}) for e in SEED])
    assert len(processor.findings) == 4
    assert (dict(processor.lease.keys), got) == ({}, {})  # no key followed, no lease point


def test_live_lease_metrics_agree_with_the_batch_figures_of_a_simulated_run(tmp_path):
    sim = simulate(30, 7, "fenced", LeaseTiming(35_000, 30_000, 20_000))
    log = tmp_path / "lease35.jsonl"
    sim.write(log)
    processor, got = live("log records", canonical(log))
    assert sorted(triples(processor.findings)) == sorted(sim.truth)
    with audit(log) as batch:
        groups = batch.lease_health.groups
    assert sum(g.metrics.expired_leases for g in groups) == sim.revoked_live > 0
    for g in groups:
        dims, m = dict(g.group), g.metrics
        assert (got.get(point("auditor.lease.expired", **dims), 0), got.get(point("auditor.lease.reclaims", **dims), 0),
                got.get(point("auditor.lease.extension_failures", **dims), 0)) == (
            m.expired_leases, m.reclaims, m.extension_failures), g.label
        count, _, low, high = got[point("auditor.heartbeat.age", "heartbeat", **dims)]
        assert (count, round(low, 3), round(high, 3)) == (
            m.heartbeat_gaps, min(g.gaps), m.heartbeat_interval_max), g.label
        _, _, _, oldest = got[point("auditor.heartbeat.age", "takeover", **dims)]
        assert round(oldest, 3) == m.heartbeat_age_at_takeover_max, g.label
        _, _, least, _ = got[point("auditor.lease.remaining", "extension", **dims)]
        assert round(least, 3) == max(0.0, m.remaining_at_extension_min), g.label


def test_ownership_helpers_record_lease_evidence_with_dimensions():
    def pause_test(logger):
        dims = {"tool": "browser", "provider": "acme"}
        w1, w2 = Lease("job-1", 42, "W1", logger=logger, attrs=dims), Lease("job-1", 43, "W2", logger=logger, attrs=dims)
        w1.acquired(seq=1, lease_until="2026-07-23T21:14:30Z")
        w1.heartbeat(seq=2, lease_until="2026-07-23T21:15:00Z")
        w2.acquired(seq=3, lease_until="2026-07-23T21:16:45Z")
        w1.heartbeat(seq=4, ok=False, reason="zero_rows")

    processor, got = live("log records", pause_test)
    # The records carry no timestamp of their own, so they are stamped now: long after these leases.
    assert {(metric, dict(attrs).get("auditor.measured_at")) for metric, attrs in got} == {
        ("auditor.lease.remaining", "extension"), ("auditor.lease.remaining", "takeover"),
        ("auditor.heartbeat.age", "takeover"), ("auditor.heartbeat.age", "heartbeat"),  # the refused one's gap
        ("auditor.lease.extension_failures", None),
        ("auditor.lease.reclaims", None), ("auditor.lease.expired", None)}
    for metric in ("auditor.lease.extension_failures", "auditor.lease.reclaims", "auditor.lease.expired"):
        assert got[point(metric, tool="browser", provider="acme")] == 1
    assert got[point("auditor.lease.remaining", "takeover", tool="browser", provider="acme")][1] == 0.0
    assert triples(processor.findings) == [("stale_activity", "job-1", 4)]


def test_followed_keys_are_bounded():
    records = []
    for n in range(3):
        records += [{"seq": 1, "workflow_key": f"k{n}", "kind": "lease_acquired", "epoch": 1,
                     "ts": "2026-07-26T10:00:00Z", "lease_until": "2026-07-26T10:00:30Z"}]
    processor, _ = live("log records", [normalize(r.items()) for r in records], max_workflow_keys=2)
    assert (list(processor.lease.keys), processor.lease.evicted_keys) == (["k1", "k2"], 1)
