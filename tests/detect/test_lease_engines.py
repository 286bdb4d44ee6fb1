"""Lease health pinned across engines (SPEC section 7, revision 3), as detection is by the rule table.

One table of cases, each a log in arrival order and what lease health must say about it. Every case
runs through the batch engine (``health.sql`` + ``health.py``), the live one (``health_live.LeaseWatch``
fed as the span processor releases events, and the real log record processor with its reorder
window) and the Spark engine (``local[2]``), and each engine's figures are compared whole with the
case's. The batch engine's figures are also checked against ``lease_rules`` itself (the attempts and
their gaps by ts, the median, ``R*H+J``, the late-extension grouping), so the SQL cannot drift from
the one definition both Python engines use.

What each engine gives: per dimension group, the heartbeat gaps, the heartbeat ages and leases left
at takeovers, the least lease left at an extension and the counts of expired leases, reclaims and
failed extensions (all three engines); ``H``, ``J``, ``L``, ``R*H+J``, the verdict of the rule and the
diagnostics (batch and Spark; live exports histograms and counters, not verdicts).
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from auditor import audit
from auditor.rules import lease as lease_rules
from auditor.detect.lease.facts import LeaseHealth
from auditor.detect.lease.live import HEARTBEAT, MEASURED_AT, TAKEOVER, LeaseWatch, Measurement
from auditor.normalize.reference import normalize
from auditor.otel import AuditLogRecordProcessor
from auditor.otel.convert import event_from_record

from ..conftest import write_jsonl

T0 = datetime(2026, 7, 26, 10, 0, tzinfo=timezone.utc)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
ALL = ("batch", "live", "spark")


def at(s: float) -> str:
    """``s`` seconds after T0 as RFC 3339 (to the millisecond)."""
    t = T0 + timedelta(seconds=s)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{t.microsecond // 1000:03d}Z"


def e(seq: int | None, kind: str, epoch: int, t: float, *, until: float | None = None, beat: str | None = None,
      key: str = "k", tool: str = "t", **more: Any) -> dict:
    """One event: ``seq`` None for an unplaced one; times in seconds after T0."""
    kinds = {"acq": "lease_acquired", "hb": "progress", "att": "effect_attempted"}
    out = {"seq": seq, "workflow_key": key, "kind": kinds[kind], "epoch": epoch, "worker": f"w{epoch}",
           "ts": at(t), "attrs": {"tool": tool}}
    if seq is None:
        del out["seq"]
    if until is not None:
        out["lease_until"] = at(until)
    if beat is not None:
        out["heartbeat"] = beat
    return out | more


def hb(seq, epoch, t, until=None, beat="ok", **kw):
    return e(seq, "hb", epoch, t, until=until, beat=beat, **kw)


@dataclasses.dataclass(frozen=True)
class Seen:
    """What every engine gives for one group: seconds, sorted lists."""

    gaps: tuple[float, ...]
    takeover_ages: tuple[float, ...] = ()
    takeover_left: tuple[float, ...] = ()
    extension_left_min: float | None = None
    expired: int = 0
    reclaims: int = 0
    failures: int = 0


@dataclasses.dataclass(frozen=True)
class Judged:
    """What the batch and Spark engines judge for one group."""

    h: float | None
    j: float | None
    lease_min: float | None
    threshold: float | None
    at_risk: bool


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    events: list[dict]
    seen: dict[str, Seen]
    judged: dict[str, Judged]
    diagnostics: list[tuple]
    engines: tuple[str, ...] = ALL
    live_seen: dict[str, Seen] | None = None  # where live differs, by design (each case says why)


def late(key, seq, epoch, h, leases, extensions, least, worst):
    return ("late_extension", key, seq, epoch,
            {"leases": leases, "extensions": extensions, "least_left_s": least, "H": h,
             "worst": [{"workflow_key": k, "epoch": p, "worker": f"w{p}", "seq": s, "extensions": n,
                        "least_left_s": x} for k, p, s, n, x in worst]})


# The 35 s lease of seed 000, heartbeats every 30 s, then one 50 s late: the lease ran out at
# 125 s, the coordinator reclaimed it at 130 s, and the late heartbeat was refused (heartbeat=lost).
# Over successful heartbeats only there are two gaps (30, 30): too few to judge, and no jitter.
# Over attempts: 30, 30, 50 -> H 30, J 20, R*H+J 50 >= L 35: at risk. Each extension had 5 s left:
# one late_extension for the group.
LOST_IS_AN_ATTEMPT = [
    e(1, "acq", 1, 0, until=35), hb(2, 1, 30, until=65), hb(3, 1, 60, until=95), hb(4, 1, 90, until=125),
    e(5, "acq", 2, 130, until=165), hb(6, 1, 140, beat="lost"),
]
LOST_SEEN = {"tool=t": Seen(gaps=(30.0, 30.0, 50.0), takeover_ages=(40.0,), takeover_left=(-5.0,),
                            extension_left_min=5.0, expired=1, reclaims=1, failures=1)}
LOST_JUDGED = {"tool=t": Judged(30.0, 20.0, 35.0, 50.0, True)}
LOST_DIAGNOSTICS = [
    ("lease_timing_risk", "k", 1, 1, {"L": 35.0, "R": 1, "H": 30.0, "J": 20.0, "threshold": 50.0, "gaps": 3}),
    late("k", 2, 1, 30.0, 1, 3, 5.0, [("k", 1, 2, 3, 5.0)]),
]

# Two groups, four leases, late extensions in three of them: one late_extension per group, with
# its worst leases least time left first (ties by key, then epoch).
def _job(key, tool, first_seq, until_step, lefts):
    """An acquisition at 0 with a lease of ``until_step``, and one heartbeat per entry of ``lefts``
    that extends the lease, ``left`` seconds before the previous lease ran out."""
    out, until, t = [e(first_seq, "acq", 1, 0, until=until_step, key=key, tool=tool)], until_step, 0.0
    for n, left in enumerate(lefts, 1):
        t = until - left
        out.append(hb(first_seq + n, 1, t, until=t + until_step, key=key, tool=tool))
        until = t + until_step
    return out


GROUPED = (_job("a/1", "a", 1, 40, [5, 25, 30]) + _job("a/2", "a", 1, 40, [5, 2, 30])
           + _job("b/1", "b", 1, 40, [30, 30, 30]) + _job("b/2", "b", 1, 40, [30, 1, 30]))

# Unplaced heartbeats (no seq) beside a coordinator's seq'd acquisitions (SPEC section 4, revision
# 3): lease health reads their ts. Epoch 1's worker heartbeats at 30, 60 and 90 s (each extending
# 35 s); epoch 2 takes over at 100 s, when epoch 1's lease still ran to 125 s: a takeover before
# expiry, the last heartbeat 10 s old. Epoch 1's refused heartbeat at 115 s is an attempt too.
MIXED = [
    e(1, "acq", 1, 0, until=35), hb(None, 1, 30, until=65), hb(None, 1, 60, until=95), hb(None, 1, 90, until=125),
    e(2, "acq", 2, 100, until=135), hb(None, 1, 115, beat="lost"),
]
MIXED_SEEN = {"tool=t": Seen(gaps=(25.0, 30.0, 30.0), takeover_ages=(10.0,), takeover_left=(25.0,),
                             extension_left_min=5.0, reclaims=1, failures=1)}
MIXED_JUDGED = {"tool=t": Judged(30.0, 0.0, 35.0, 30.0, False)}
MIXED_DIAGNOSTICS = [
    late("k", None, 1, 30.0, 1, 3, 5.0, [("k", 1, None, 3, 5.0)]),
    ("takeover_before_expiry", "k", 2, 1, {"remaining_s": 25.0, "current_epoch": 2}),
]

CASES = [
    Case("a lost heartbeat is an attempt", LOST_IS_AN_ATTEMPT, LOST_SEEN, LOST_JUDGED, LOST_DIAGNOSTICS),
    # The same log arriving out of order (the sink's and the coordinator's lines interleaved late):
    # seq and ts decide, never the file.
    Case("out-of-order arrival", [LOST_IS_AN_ATTEMPT[i] for i in (4, 2, 5, 0, 3, 1)], LOST_SEEN, LOST_JUDGED,
         LOST_DIAGNOSTICS),
    # Group a: gaps 15, 10 (a/1) and 38, 10 (a/2): H 12.5; late: a/1's 5 s, a/2's 5 and 2 s. Group
    # b: gaps 10, 10, 39, 10: H 10; late: b/2's 1 s. The worst lease first, then by key.
    Case("late extensions once per group", GROUPED,
         {"tool=a": Seen(gaps=(10.0, 10.0, 15.0, 38.0), extension_left_min=2.0),
          "tool=b": Seen(gaps=(10.0, 10.0, 10.0, 39.0), extension_left_min=1.0)},
         {"tool=a": Judged(12.5, 25.5, 40.0, 38.0, False), "tool=b": Judged(10.0, 29.0, 40.0, 39.0, False)},
         [late("a/2", 3, 1, 12.5, 2, 3, 2.0, [("a/2", 1, 3, 2, 2.0), ("a/1", 1, 2, 1, 5.0)]),
          late("b/2", 3, 1, 10.0, 1, 1, 1.0, [("b/2", 1, 3, 1, 1.0)])]),
    Case("unplaced heartbeats beside seq'd acquisitions", MIXED, MIXED_SEEN, MIXED_JUDGED, MIXED_DIAGNOSTICS),
    # The heartbeat at 90 s written after the takeover line: by ts it still came before the
    # takeover. Observation order (today's for such a key) would say the lease had expired and the
    # last heartbeat was 40 s old. Live measures a takeover when it is fed, so a heartbeat that
    # arrives after it cannot change that measurement: batch and Spark only.
    Case("unplaced heartbeat written after the takeover", [MIXED[i] for i in (0, 1, 2, 4, 3, 5)], MIXED_SEEN,
         MIXED_JUDGED, MIXED_DIAGNOSTICS, engines=("batch", "spark")),
    # One gap is no heartbeat interval: extensions with 10 s left of a 50 s "H" are not called late
    # (like the rule, late_extension is judged from 3 gaps on).
    Case("too few gaps to call an extension late",
         [e(1, "acq", 1, 0, until=60), hb(2, 1, 50, until=110), hb(3, 1, 100, until=160)],
         {"tool=t": Seen(gaps=(50.0,), extension_left_min=10.0)},
         {"tool=t": Judged(50.0, 0.0, 60.0, 50.0, False)}, []),
    # Two reporters' clocks: the heartbeat with seq 3 says 50 s, seq 4 says 40 s. Gaps are by ts
    # (20, 10, 20); live, fed in seq order, measures an attempt against the one before it in time
    # among those it has seen and cannot take back a gap already exported (30, then 20, 20).
    Case("seq order and ts order disagree",
         [e(1, "acq", 1, 0, until=60), hb(2, 1, 20, until=80), hb(3, 1, 50, until=110), hb(4, 1, 40, until=100),
          hb(5, 1, 70, until=130)],
         {"tool=t": Seen(gaps=(10.0, 20.0, 20.0), extension_left_min=40.0)},
         {"tool=t": Judged(20.0, 0.0, 60.0, 20.0, False)}, [],
         live_seen={"tool=t": Seen(gaps=(20.0, 20.0, 30.0), extension_left_min=30.0)}),
    # SPEC revision 3.1: an unplaced attempt (no seq in a key ordered by seq) is judged by its ts.
    # Epoch 1's lease runs to 65 s; its attempt at 20 s is within it, the one at 80 s is 15 s
    # past it: effect_after_lease_expiry with a null seq (it points at its position, never a seq).
    Case("unplaced attempt after the lease expired",
         [e(1, "acq", 1, 0, until=35), e(None, "att", 1, 20, effect_key="c/6"), hb(2, 1, 30, until=65),
          e(None, "att", 1, 80, effect_key="c/7"), e(3, "acq", 2, 90, until=125)],
         {"tool=t": Seen(gaps=(), takeover_ages=(60.0,), takeover_left=(-25.0,), extension_left_min=5.0,
                         expired=1, reclaims=1)},
         {"tool=t": Judged(None, None, 35.0, None, False)},
         [("effect_after_lease_expiry", "k", None, 1, {"after_expiry_s": 15.0})]),
]
IDS = [c.name for c in CASES]


# The engines.


def seen_of(health: LeaseHealth) -> dict[str, Seen]:
    takeovers: dict[str, list] = {}
    for k in health.keys:
        takeovers.setdefault(_label(k.group), []).extend(k.takeovers)
    out = {}
    for g in health.groups:
        m, ts = g.metrics, takeovers.get(g.label, [])
        out[g.label] = Seen(tuple(sorted(g.gaps)), tuple(sorted(g.takeover_ages)),
                            tuple(sorted(t.remaining_s for t in ts if t.remaining_s is not None)),
                            m.remaining_at_extension_min, m.expired_leases, m.reclaims, m.extension_failures)
    return out


def judged_of(health: LeaseHealth) -> dict[str, Judged]:
    return {g.label: Judged(g.metrics.heartbeat_interval_median, g.metrics.heartbeat_jitter, g.metrics.lease_min,
                            g.threshold, g.at_risk) for g in health.groups}


def diagnostics_of(result) -> list[tuple]:
    """The diagnostics as the table states them: places, not the global positions the store adds
    (SPEC rev 3: provenance, pinned in test_revision3.py)."""
    return [(d.kind.value, d.workflow_key, d.seq, d.epoch, _placeless(d.numbers)) for d in result.diagnostics]


def _placeless(numbers: dict | None) -> dict | None:
    if not numbers or "worst" not in numbers:
        return numbers
    return {**numbers, "worst": [{k: v for k, v in w.items() if k != "position"} for w in numbers["worst"]]}


def _label(group) -> str:
    from auditor.detect.lease.facts import label

    return label(group)


def seen_live(measurements: list[Measurement]) -> dict[str, Seen]:
    """The live measurements as the same figures, per group (the ``tool`` dimension)."""
    by: dict[str, dict[str, list]] = {}
    for metric, value, attrs in measurements:
        label = _label(tuple((k, v) for k, v in attrs.items() if k != MEASURED_AT))
        where = attrs.get(MEASURED_AT)
        by.setdefault(label, {}).setdefault(f"{metric}@{where}", []).append(round(value, 3))
    out = {}
    for label, m in by.items():
        out[label] = Seen(tuple(sorted(m.get(f"heartbeat_age@{HEARTBEAT}", []))),
                          tuple(sorted(m.get(f"heartbeat_age@{TAKEOVER}", []))),
                          tuple(sorted(m.get(f"remaining@{TAKEOVER}", []))),
                          min(m.get("remaining@extension", []), default=None),
                          len(m.get("expired@None", [])), len(m.get("reclaim@None", [])),
                          len(m.get("extension_failure@None", [])))
    return out


def released(events: list[dict]) -> list[dict]:
    """The order the span processor feeds a log in: its reorder window puts each key's placed
    events (with seq) back in seq order; an unplaced one goes where it arrived."""
    placed = iter(sorted((x for x in events if "seq" in x), key=lambda x: (x["workflow_key"], x["seq"])))
    return [next(placed) if "seq" in x else x for x in events]


def live_feed(events: list[dict]) -> list[Measurement]:
    """``LeaseWatch`` fed ``events`` in the processor's release order (an unplaced event has seq None)."""
    watch = LeaseWatch(("tool",))
    out: list[Measurement] = []
    for rec in released(events):
        event = event_from_record(normalize(rec.items()), seq=0)
        if "seq" not in rec:
            event = dataclasses.replace(event, seq=None)
        if LeaseWatch.evidence(event):
            watch.track(event.workflow_key)
        out += watch.feed(event)
    return out


def live_processor(events: list[dict]) -> dict:
    """The real log record processor, records emitted in arrival order: its histograms and
    counters, ``(metric, at, tool) -> (count, sum, min, max)`` or a count."""
    reader = InMemoryMetricReader()
    processor = AuditLogRecordProcessor(meter_provider=MeterProvider(metric_readers=[reader]), lease_by=("tool",))
    provider = LoggerProvider()
    provider.add_log_record_processor(processor)
    logger = provider.get_logger("worker")
    for rec in events:
        attrs = {f"ownership.{k}": v for k, v in rec.items() if k not in ("kind", "attrs", "ts")}
        t = datetime.fromisoformat(rec["ts"].replace("Z", "+00:00"))
        logger.emit(event_name="ownership." + rec["kind"], attributes={**attrs, **rec["attrs"]},
                    timestamp=(t - EPOCH) // timedelta(microseconds=1) * 1000)
    provider.shutdown()
    out = {}
    for rm in reader.get_metrics_data().resource_metrics:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                for p in m.data.data_points:
                    a = dict(p.attributes)
                    if "tool" not in a:
                        continue
                    key = (m.name, a.get(MEASURED_AT), "tool=" + a["tool"])
                    out[key] = p.value if hasattr(p, "value") else (p.count, round(p.sum, 3), p.min, p.max)
    return out


def histograms(seen: dict[str, Seen]) -> dict:
    """What the processor's instruments hold for these figures (a lease already gone is 0 s)."""
    out = {}
    for label, s in seen.items():
        for name, where, values in (("auditor.heartbeat.age", HEARTBEAT, s.gaps),
                                    ("auditor.heartbeat.age", TAKEOVER, s.takeover_ages),
                                    ("auditor.lease.remaining", TAKEOVER, tuple(max(0.0, v) for v in s.takeover_left))):
            if values:
                out[(name, where, label)] = (len(values), round(sum(values), 3), min(values), max(values))
        for name, n in (("auditor.lease.expired", s.expired), ("auditor.lease.reclaims", s.reclaims),
                        ("auditor.lease.extension_failures", s.failures)):
            if n:
                out[(name, None, label)] = n
    return out


def _without_extensions(points: dict) -> dict:
    return {k: v for k, v in points.items() if not (k[0] == "auditor.lease.remaining" and k[1] == "extension")}


# The definitions the SQL must agree with, applied to the case's own events.


def gaps_by_rule(events: list[dict]) -> dict[str, list[int]]:
    """Per group, the gaps ``lease_rules`` defines: attempts of one (key, epoch), by ts (ms)."""
    times: dict[tuple, list[int]] = {}
    for x in events:
        if lease_rules.is_attempt(x.get("heartbeat")):
            t = datetime.fromisoformat(x["ts"].replace("Z", "+00:00"))
            times.setdefault(("tool=" + x["attrs"]["tool"], x["workflow_key"], x["epoch"]), []).append(
                (t - EPOCH) // timedelta(milliseconds=1))
    out: dict[str, list[int]] = {}
    for (label, *_), ts in times.items():
        out.setdefault(label, []).extend(lease_rules.heartbeat_gaps(ts))
    return out


def _ms(text: str) -> int:
    return (datetime.fromisoformat(text.replace("Z", "+00:00")) - EPOCH) // timedelta(milliseconds=1)


def late_by_rule(events: list[dict], h_of: dict[str, float], gaps_of: dict[str, int]) -> dict[str, tuple]:
    """Per group, ``lease_rules``' late extensions of these events, as the diagnostic's numbers:
    each extension against the previous grant of its (key, epoch) by ts (``lease_rules.is_late``,
    with the group's H and gaps), summed per lease and group (``lease_rules.late_extensions``)."""
    grants: dict[tuple, list[dict]] = {}
    for x in events:
        if "lease_until" in x:
            grants.setdefault(("tool=" + x["attrs"]["tool"], x["workflow_key"], x["epoch"]), []).append(x)
    leases: dict[str, list] = {}
    for (label, key, epoch), xs in grants.items():
        xs = sorted(xs, key=lambda x: _ms(x["ts"]))
        left = [(_ms(prev["lease_until"]) - _ms(x["ts"]), x) for prev, x in zip(xs, xs[1:])
                if x["kind"] != "lease_acquired"]
        late = [(ms, x) for ms, x in left if lease_rules.is_late(ms, h_of[label], gaps_of[label])]
        if late:
            ms, x = min(late, key=lambda lx: lx[0])
            leases.setdefault(label, []).append(
                lease_rules.LateLease(key, epoch, x["worker"], x.get("seq"), len(late), ms))
    out = {}
    for label, found in leases.items():
        s = lease_rules.late_extensions(found)
        out[label] = (s.leases, s.extensions, s.least_left / 1000,
                      [(x.workflow_key, x.epoch, x.position, x.extensions, x.least_left / 1000) for x in s.worst])
    return out


# The tests.


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_batch(case, tmp_path):
    with audit(write_jsonl(tmp_path / "lease.jsonl", case.events), by=["tool"]) as result:
        health = result.lease_health
        assert (seen_of(health), judged_of(health), diagnostics_of(result)) == (
            case.seen, case.judged, case.diagnostics)
    # The SQL agrees with lease_rules on these events: the gaps, H, J, R*H+J and the rule.
    rule_gaps = gaps_by_rule(case.events)
    for g in health.groups:
        gaps = sorted(rule_gaps.get(g.label, []))
        assert [round(x * 1000) for x in g.gaps] == gaps
        h = lease_rules.median(gaps)
        j = lease_rules.jitter(h, max(gaps, default=None))
        assert g.metrics.heartbeat_interval_median == (None if h is None else h / 1000)
        assert g.metrics.heartbeat_jitter == (None if j is None else j / 1000)
        limit = lease_rules.threshold(1, h, j)
        assert g.threshold == (None if limit is None else limit / 1000)
        lease_ms = None if g.metrics.lease_min is None else round(g.metrics.lease_min * 1000)
        assert g.at_risk == lease_rules.at_risk(len(gaps), lease_ms, limit)
    # ... and on which extensions are late, and how they are summed per group.
    h_of = {g.label: round(g.metrics.heartbeat_interval_median * 1000) if g.metrics.heartbeat_interval_median
            is not None else None for g in health.groups}
    gaps_of = {g.label: g.metrics.heartbeat_gaps for g in health.groups}
    late = {}
    for d in result.diagnostics:
        if d.kind.value == "late_extension":
            n = d.numbers
            late[_label(tuple(d.group.items()))] = (
                n["leases"], n["extensions"], n["least_left_s"],
                [(w["workflow_key"], w["epoch"], w["seq"], w["extensions"], w["least_left_s"]) for w in n["worst"]])
    assert late == late_by_rule(case.events, h_of, gaps_of)


LIVE = [c for c in CASES if "live" in c.engines]


@pytest.mark.parametrize("case", LIVE, ids=[c.name for c in LIVE])
def test_live(case):
    assert seen_live(live_feed(case.events)) == (case.live_seen or case.seen)


@pytest.mark.parametrize("case", [c for c in CASES if "live" in c.engines and c.live_seen is None
                                  and all("seq" in x for x in c.events)],
                         ids=lambda c: c.name)
def test_live_through_the_processor(case):
    """The real processor, records in arrival order: its reorder window restores seq order, so
    out-of-order arrival measures what the batch report measures."""
    assert _without_extensions(live_processor(case.events)) == histograms(case.seen)


@pytest.mark.slow
def test_spark(tmp_path, spark_session):
    """Every case on the Spark engine gives the single-node lease health and diagnostics."""
    from auditor.spark import audit as spark_audit

    spark = spark_session

    def both(n_case):
        n, case = n_case
        log = write_jsonl(tmp_path / f"case{n}.jsonl", case.events)
        with spark_audit([log], spark=spark, by=["tool"]) as result:
            got = (seen_of(result.lease_health), judged_of(result.lease_health), diagnostics_of(result),
                   json.loads(json.dumps(result.lease_health.to_dict())))
        with audit([log], by=["tool"]) as result:
            doc = json.loads(json.dumps(result.lease_health.to_dict()))
        return case.name, got, (case.seen, case.judged, case.diagnostics, doc)

    # The session takes jobs from several threads: most of a small audit's time is Spark's latency.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        done = list(pool.map(both, enumerate(c for c in CASES if "spark" in c.engines)))
    got = {name: g for name, g, _ in done}
    want = {name: w for name, _, w in done}
    assert got == want
