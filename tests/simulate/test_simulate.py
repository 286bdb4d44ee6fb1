"""The preemption simulator: deterministic, every injection happens, the fence holds, and the auditor
finds exactly the simulation's ground truth (the acceptance test of issue 7)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from datetime import datetime
from pathlib import Path

import pytest

from auditor.core.model import Grade, Kind, Reporter, SinkResult
from auditor.simulate import (
    CHARGE_CENTS,
    DANGEROUS,
    Injection,
    LeaseTiming,
    Mode,
    SimulateError,
    generate_log,
    run_cli,
    simulate,
)
from auditor.simulate.world import World
from auditor.simulate.parts import Run

FIXTURES = Path(__file__).resolve().parent.parent.parent / "fixtures"
MODES = [m.value for m in Mode]
RUNS, SEED = 200, 7


@pytest.fixture(scope="module")
def sims():
    return {m: simulate(RUNS, SEED, m) for m in MODES}


# The truth bookkeeping, replayed over hand-written logs: it must follow SPEC section 3 on its own,
# before the auditor is compared with it.


def replay_truth(events: list[dict]) -> list[tuple[str, str, int]]:
    world = World(0, [])
    runs: dict[str, Run] = {}
    for ev in sorted(events, key=lambda e: e["seq"]):
        wk = ev["workflow_key"]
        run = runs.setdefault(wk, Run(len(runs), wk, wk, Mode.FENCED, None, 0))
        kind = Kind(ev["kind"])
        if kind is Kind.LEASE_ACQUIRED:
            run.epoch = max(run.epoch, ev["epoch"])
        world.seq = ev["seq"] - 1
        sink_result = SinkResult(ev["sink_result"]) if ev.get("sink_result") else None
        world.record(run, 0, kind, ev.get("epoch"), ev.get("worker", "unknown"),
                      Reporter(ev.get("reporter", "worker")), ev.get("step_id"), ev.get("effect_key"),
                      ev.get("sink"), sink_result)
    world.runs = list(runs.values())
    world.run()
    return [(g.value, wk, s) for g, wk, s in world.truth]


def log(*rows: str) -> list[dict]:
    """``"3 acq 18"``, ``"5 progress 17"``, ``"6 attempt 17 k"``, ``"7 reject 17 k"``,
    ``"8 commit 17 k [step]"``: one event of workflow key ``w`` per row."""
    kinds = {"acq": "lease_acquired", "progress": "progress", "attempt": "effect_attempted",
             "reject": "effect_attempted", "commit": "effect_committed"}
    out = []
    for row in rows:
        seq, kind, epoch, *rest = row.split()
        ev = {"seq": int(seq), "workflow_key": "w", "kind": kinds[kind], "epoch": int(epoch)}
        if rest:
            ev["effect_key"] = rest[0]
            ev["step_id"] = rest[1] if len(rest) > 1 else rest[0]
        if kind == "reject":
            ev["sink_result"] = "rejected"
        out.append(ev)
    return out


TRUTH_CASES = [
    ("stale progress", log("1 acq 1", "2 acq 2", "3 progress 1"), [("stale_activity", 3)]),
    ("progress before the takeover", log("1 acq 1", "2 progress 1", "3 acq 2"), []),
    ("refused stale attempt is one finding at the attempt",
     log("1 acq 1", "2 acq 2", "3 attempt 1 k", "4 reject 1 k"), [("rejected_attempt", 3)]),
    ("sent before the takeover, refused after it",
     log("1 acq 1", "2 attempt 1 k", "3 acq 2", "4 reject 1 k"), [("rejected_attempt", 4)]),
    ("stale attempt resolved by a commit, first commit of the key",
     log("1 acq 1", "2 acq 2", "3 attempt 1 k", "4 commit 1 k"),
     [("stale_attempt", 3), ("stale_commit", 4)]),
    ("zombie commits after the new owner: stale and double at one seq",
     log("1 acq 1", "2 acq 2", "3 commit 2 k", "4 attempt 1 k", "5 commit 1 k"),
     [("stale_attempt", 4), ("stale_commit", 5), ("double_commit", 5)]),
    ("re-run after preemption is a double commit, not stale",
     log("1 acq 1", "2 commit 1 k", "3 acq 2", "4 commit 2 k"), [("double_commit", 4)]),
    ("same epoch twice is an idempotent retry",
     log("1 acq 1", "2 commit 1 k", "3 commit 1 k"), []),
    ("epoch leaked into the key: one step, two keys, two epochs",
     log("1 acq 1", "2 commit 1 k:e1 charge", "3 acq 2", "4 commit 2 k:e2 charge"),
     [("double_commit", 4)]),
    ("unanswered stale attempt", log("1 acq 1", "2 acq 2", "3 attempt 1 k"), [("stale_attempt", 3)]),
]


@pytest.mark.parametrize("events, expected", [c[1:] for c in TRUTH_CASES], ids=[c[0] for c in TRUTH_CASES])
def test_truth_bookkeeping_follows_the_spec(events, expected):
    assert replay_truth(events) == [(g, "w", s) for g, s in expected]


def test_truth_bookkeeping_reproduces_the_seed_scenario():
    events = [json.loads(line) for line in (FIXTURES / "seed_split_brain.jsonl").read_text().splitlines()]
    expected = json.loads((FIXTURES / "seed_split_brain.expected.json").read_text())["findings"]
    assert sorted(replay_truth(events)) == sorted(tuple(t) for t in expected)


# The simulation itself.


@pytest.mark.parametrize("mode", MODES)
def test_same_seed_same_log(mode, sims):
    again = simulate(RUNS, SEED, mode)
    assert (again.events, again.truth) == (sims[mode].events, sims[mode].truth)
    assert simulate(RUNS, SEED + 1, mode).events != sims[mode].events


def test_log_is_canonical_and_in_authoritative_order(sims):
    for sim in sims.values():
        seqs = [ev["seq"] for ev in sim.events]
        assert seqs == list(range(1, len(seqs) + 1))
        assert {ev["kind"] for ev in sim.events} <= {k.value for k in Kind}
        reporters = {(ev["kind"], ev.get("sink_result"), ev["reporter"]) for ev in sim.events}
        assert reporters <= {
            ("lease_acquired", None, "coordinator"), ("progress", None, "worker"),
            ("effect_attempted", None, "worker"), ("effect_attempted", "rejected", "sink"),
            ("effect_committed", None, "sink"), ("outcome_verified", None, "verifier"),
        }
        # ts is simulated time at the source: late arrivals disagree with seq order
        assert any(a["ts"] > b["ts"] for a, b in zip(sim.events, sim.events[1:]))


def _runs(sim) -> dict[str, list[dict]]:
    by_key: dict[str, list[dict]] = {}
    for ev in sim.events:
        by_key.setdefault(ev["workflow_key"], []).append(ev)
    return by_key


def _shows(injection: Injection, events: list[dict]) -> bool:
    """Whether one run's log shows the interleaving its injection is meant to produce."""
    grants = [ev for ev in events if ev["kind"] == "lease_acquired"]
    first, takeover = grants[0]["epoch"], grants[1]
    old = [ev for ev in events if ev.get("epoch") == first and ev["kind"] != "lease_acquired"]

    def of(kind, step, reporter=None):
        return [ev for ev in old if ev["kind"] == kind and ev.get("step_id") == step
                and (reporter is None or ev["reporter"] == reporter)]

    after = takeover["seq"]
    if injection is Injection.COMMIT_BEFORE_CHECKPOINT:
        return [ev["seq"] < after for ev in of("effect_committed", "charge")] == [True] and not of("progress", "charge")
    if injection is Injection.SLOW_MODEL_CALL:
        return all(ev["seq"] > after and ev["ts"] > takeover["ts"] for ev in of("progress", "plan"))
    if injection is Injection.LATE_ACK:
        sent = of("effect_attempted", "charge", "worker")
        answered = [ev for ev in old if ev["reporter"] == "sink" and ev.get("step_id") == "charge"]
        return [ev["seq"] < after for ev in sent] == [True] and [ev["seq"] > after for ev in answered] == [True]
    if injection is Injection.LATE_CHECKPOINT:
        late = of("progress", "charge")
        return [ev["seq"] > after and ev["ts"] < takeover["ts"] for ev in late] == [True]
    raise AssertionError(injection)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("injection", DANGEROUS, ids=[i.value for i in DANGEROUS])
def test_every_injection_point_occurs(mode, injection, sims):
    sim = sims[mode]
    runs = _runs(sim)
    hit = [wk for wk, inj in sim.injected.items() if inj == injection]
    assert len(hit) == RUNS // len(DANGEROUS)
    assert [wk for wk in hit if not _shows(injection, runs[wk])] == []


def test_fenced_gateway_holds(sims):
    sim = sims["fenced"]
    assert sum(sim.injections.values()) == RUNS
    assert set(sim.charges_per_run.values()) == {CHARGE_CENTS}
    assert len(sim.charges_per_run) == RUNS
    assert (sim.double_applies, sim.stale_commits, sim.stale_checkpoints_accepted) == (0, 0, 0)
    assert sim.rejected_attempts > 0
    counts = sim.truth_counts()
    assert set(counts) == {"stale_activity", "rejected_attempt"}
    assert counts["rejected_attempt"] == sim.rejected_attempts


@pytest.mark.parametrize("mode", ["unfenced", "key-includes-epoch"])
def test_unsafe_gateways_double_apply(mode, sims):
    sim = sims[mode]
    counts = sim.truth_counts()
    assert sim.double_applies > 0
    assert counts["double_commit"] == sim.double_applies
    assert counts.get("stale_commit", 0) == sim.stale_commits
    assert sum(sim.charges_per_run.values()) > RUNS * CHARGE_CENTS


def test_key_includes_epoch_double_commits_are_all_unstable_keys(sims):
    sim = sims["key-includes-epoch"]
    doubles = {(wk, seq) for g, wk, seq in sim.truth if g == "double_commit"}
    by_seq = {(ev["workflow_key"], ev["seq"]): ev for ev in sim.events}
    assert {by_seq[d]["effect_key"].rsplit(":", 1)[1][0] for d in doubles} == {"e"}
    assert sim.stale_commits == 0


def test_bad_options_say_what_is_expected():
    with pytest.raises(SimulateError, match="mode is 'fence', expected one of fenced, unfenced, key-includes-epoch"):
        simulate(10, 0, "fence")
    with pytest.raises(SimulateError, match="runs is 0, expected at least 1"):
        simulate(0)


def test_run_cli_writes_log_and_expectation(tmp_path):
    out, exp = tmp_path / "sim.jsonl.gz", tmp_path / "sim.expected.json"
    text = run_cli(8, 3, "fenced", out, exp)
    sim = simulate(8, 3, "fenced")
    with gzip.open(out, "rt") as f:
        assert [json.loads(line) for line in f] == sim.events
    assert json.loads(exp.read_text()) == {"findings": [list(t) for t in sim.truth]}
    assert text.splitlines()[1:] == [
        "injected interleavings: commit_before_checkpoint 2, slow_model_call 2, late_ack 2, late_checkpoint 2",
        "bank: net charge per run $50.00 x8",
        "sinks: double applies 0, stale commits 0, rejected attempts 6, replays of a stable key 4",
        "checkpoint store: stale checkpoints accepted 0",
        f"ground truth: stale_activity 4, rejected_attempt 6 -> {exp}",
    ]


# Committed fixtures are regenerated exactly: a change to the simulator shows up as a fixture diff.

FIXTURE_SIMS = {f"sim_{m.replace('-', '_')}_small": (24, 11, m) for m in MODES}


@pytest.mark.parametrize("name", sorted(FIXTURE_SIMS))
def test_committed_fixtures_are_the_simulator_output(name, tmp_path):
    sim = simulate(*FIXTURE_SIMS[name])
    sim.write(tmp_path / "log.jsonl")
    sim.write_expected(tmp_path / "exp.json")
    assert (tmp_path / "log.jsonl").read_text() == (FIXTURES / f"{name}.jsonl").read_text()
    assert (tmp_path / "exp.json").read_text() == (FIXTURES / f"{name}.expected.json").read_text()


# The scale generator.


@pytest.mark.parametrize("events, workflows", [(1, None), (37, None), (6000, None), (6000, 40), (6000, 3)])
def test_generate_log_writes_exactly_the_events_asked(tmp_path, events, workflows):
    path, exp = tmp_path / "big.jsonl", tmp_path / "big.expected.json"
    got = generate_log(path, events, seed=5, workflows=workflows, expected_path=exp)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    seqs = [r["seq"] for r in rows]
    assert (got.events, sorted(seqs)) == (events, list(range(1, events + 1)))
    assert got.workflows == len({r["workflow_key"] for r in rows})
    if workflows is not None:
        assert got.workflows <= workflows + 1  # + the filler that pads to the exact count
    truth = json.loads(exp.read_text())["findings"]
    assert dict(Counter(g for g, _, _ in truth)) == got.findings
    if events >= 6000:
        assert seqs != sorted(seqs)  # some neighbours swapped
        # every grade of SPEC section 3 (the generator simulates no mandates nor compensations)
        assert set(got.findings) == {g.value for g in Grade} - {"compensated", "unauthorized_attempt",
                                                                 "unauthorized_commit"}
        assert got.runs > 100


def test_generate_log_rejects_nonsense():
    with pytest.raises(SimulateError, match="events is 0, expected at least 1"):
        generate_log("/nonexistent/x.jsonl", 0)


# The acceptance test: the real auditor against the simulation's own ground truth.


def _precision_recall(found: set, truth: set) -> tuple[float, float]:
    hit = len(found & truth)
    return (hit / len(found) if found else 1.0, hit / len(truth) if truth else 1.0)


@pytest.mark.parametrize("mode", MODES)
def test_auditor_finds_exactly_the_simulated_truth(mode, sims, tmp_path):
    from auditor import audit

    sim = sims[mode]
    path = tmp_path / f"{mode}.jsonl"
    sim.write(path)
    result = audit([path])
    found, truth = result.expected_triples(), set(sim.truth)
    assert (sorted(found - truth), sorted(truth - found)) == ([], [])
    assert _precision_recall(found, truth) == (1.0, 1.0)
    assert result.diagnostics == []
    doubles = [f for f in result.findings if f.grade is Grade.DOUBLE_COMMIT]
    if mode == "fenced":
        assert result.verdict == "pass"  # only rejected attempts and stale activity: the fence held
        assert {t for t in found if t[0] == "rejected_attempt"} == {t for t in truth if t[0] == "rejected_attempt"}
        assert len([t for t in found if t[0] == "rejected_attempt"]) == sim.rejected_attempts
    else:
        assert result.verdict == "fail"
        assert len(doubles) == sim.double_applies > 0
        assert {f.unstable_effect_key for f in doubles} == {mode == "key-includes-epoch"}


@pytest.mark.parametrize("workflows", [None, 25])
def test_auditor_finds_exactly_the_generated_truth(workflows, tmp_path):
    from auditor import audit

    path, exp = tmp_path / "big.jsonl", tmp_path / "big.expected.json"
    generate_log(path, 8000, seed=9, workflows=workflows, expected_path=exp)
    truth = {tuple(t) for t in json.loads(exp.read_text())["findings"]}
    found = audit([path]).expected_triples()
    assert (sorted(found - truth), sorted(truth - found)) == ([], [])


@pytest.mark.parametrize("mode", ["fenced", "unfenced"])
@pytest.mark.parametrize("mandates", ["checked", "unchecked"])
def test_mandates_auditor_and_live_find_exactly_the_simulated_truth(mode, mandates, tmp_path):
    """SPEC section 8 in the simulator: mandates expire or are revoked during preemptions; half the
    runs resume without revalidating. The gateway that checks the authority token lets no
    unauthorized effect through (its refusals are rejected attempts); the one that does not lets
    them commit. Both engines report exactly the simulation's own bookkept truth."""
    from auditor import audit
    from auditor.detect.live.detector import detect_events
    from auditor.detect.batch.timeline import iter_events

    sim = simulate(120, seed=3, mode=mode, mandates=mandates)
    path = tmp_path / "m.jsonl"
    sim.write(path)
    with audit([path], fail_on="double_commit") as result:
        found, truth = result.expected_triples(), set(sim.truth)
        assert result.input.quarantined == 0
        assert (sorted(found - truth), sorted(truth - found)) == ([], [])
        live = detect_events(iter_events(result.store))
        assert [f.to_dict() for f in live] == [f.to_dict() for f in result.findings]
    grades = Counter(g for g, _, _ in truth)
    if mandates == "checked":
        assert sim.unauthorized_applies == 0 and sim.mandate_refusals > 0
        assert grades["unauthorized_commit"] == grades["unauthorized_attempt"] == 0
    else:
        assert sim.mandate_refusals == 0
        assert grades["unauthorized_commit"] == sim.unauthorized_applies > 0


def test_simulate_cli_mandates(tmp_path):
    from ..conftest import run_cli

    out, exp = tmp_path / "m.jsonl", tmp_path / "m.expected.json"
    p = run_cli("simulate", "--runs", "40", "--mandates", "unchecked", "--out", str(out), "--expect-out", str(exp))
    assert p.returncode == 0, p.stderr
    assert "mandates (unchecked): effects applied without a valid mandate" in p.stdout.decode()
    audited = run_cli("audit", str(out), "--expect", str(exp))
    assert audited.returncode == 0, audited.stdout.decode()[-400:]
    bad = run_cli("simulate", "--mandates", "sometimes", "--out", str(out))
    assert (bad.returncode, bad.stderr.decode().strip()) == (
        2, "Error: --mandates: mandates 'sometimes' is not one of none, checked, unchecked")


# Heartbeat-driven leases (seed 000): a lease too short for its heartbeat rhythm revokes workers that
# are still running; a safe one does not. The auditor's lease health sees the same revocations.

SHORT, SAFE = LeaseTiming(35_000, 30_000, 20_000), LeaseTiming(90_000, 30_000, 20_000)


@pytest.fixture(scope="module")
def lease_sims():
    return {"35 s": simulate(60, SEED, "fenced", SHORT), "90 s": simulate(60, SEED, "fenced", SAFE),
            "90 s, 30% lost": simulate(60, SEED, "fenced", LeaseTiming(90_000, 30_000, 20_000, 0.3))}


def _heartbeats(sim):
    return Counter((ev.get("heartbeat"), ev.get("reason")) for ev in sim.events if "heartbeat" in ev)


def test_a_short_lease_revokes_live_workers_and_a_safe_one_does_not(lease_sims):
    short, safe, lossy = lease_sims["35 s"], lease_sims["90 s"], lease_sims["90 s, 30% lost"]
    assert (short.revoked_live, safe.revoked_live, lossy.revoked_live) == (39, 0, 10)
    acquisitions = [sum(ev["kind"] == "lease_acquired" for ev in s.events) for s in (short, safe, lossy)]
    assert acquisitions == [60 + 39, 60, 60 + 10]  # one owner per run, plus one per revocation
    assert (short.injected, safe.injected) == ({}, {})  # nothing injected: the timing alone revokes
    # A heartbeat that comes after the lease ran out is refused (zero rows updated).
    assert _heartbeats(short) == {("ok", None): 319, ("lost", "zero_rows"): 39}
    assert _heartbeats(safe) == {("ok", None): 261}
    assert _heartbeats(lossy) == {("ok", None): 199, ("lost", "timeout"): 90, ("lost", "zero_rows"): 5}
    # Every grant and extension is lease_ms from its own ts.
    for sim, lease in ((short, SHORT), (safe, SAFE)):
        granted = {(datetime.fromisoformat(ev["lease_until"]) - datetime.fromisoformat(ev["ts"])).total_seconds()
                   for ev in sim.events if "lease_until" in ev}
        assert granted == {lease.lease_ms / 1000}
    assert (short.truth_counts(), safe.truth_counts()) == ({"stale_activity": 75, "rejected_attempt": 39}, {})
    assert short.double_applies == short.stale_commits == 0  # the fence held


def test_lease_timing_is_deterministic(lease_sims):
    assert simulate(60, SEED, "fenced", SHORT).events == lease_sims["35 s"].events


# Revision 3: H and J over heartbeat attempts (the refused ones too), so the 35 s lease, whose late
# heartbeats are refused, is at risk in every group; late extensions are one diagnostic per group.
@pytest.mark.parametrize("name, expired, reclaims, failures, diagnostics, at_risk", [
    ("35 s", 39, 25, 39, {"lease_timing_risk": 3, "late_extension": 3, "effect_after_lease_expiry": 39}, 3),
    ("90 s", 0, 0, 0, {}, 0),
    ("90 s, 30% lost", 10, 10, 95, {"late_extension": 3, "effect_after_lease_expiry": 11}, 0),
])
def test_lease_health_sees_the_simulated_revocations(lease_sims, tmp_path, name, expired, reclaims, failures,
                                                     diagnostics, at_risk):
    from auditor import audit

    sim = lease_sims[name]
    sim.write(tmp_path / "lease.jsonl")
    with audit(tmp_path / "lease.jsonl") as result:
        assert result.expected_triples() == set(sim.truth)
        groups = result.lease_health.groups
        assert sorted(g.label for g in groups) == ["tool=browser", "tool=code", "tool=search"]
        assert [sum(getattr(g.metrics, m) for g in groups) for m in ("expired_leases", "reclaims",
                                                                     "extension_failures")] == [
            expired, reclaims, failures]
        assert expired == sim.revoked_live  # every takeover was the sweep of an expired lease
        assert dict(Counter(d.kind.value for d in result.diagnostics)) == diagnostics
        assert sum(g.at_risk for g in groups) == at_risk
        assert all(g.metrics.lease_min == sim.lease.lease_ms / 1000 for g in groups)


def test_lease_options_on_the_command_line(tmp_path):
    from ..conftest import run_cli as cli

    lines = {}
    for lease in ("35", "90"):
        p = cli("simulate", "--runs", "60", "--seed", str(SEED), "--lease-s", lease, "--out", str(tmp_path / f"{lease}.jsonl"))
        assert p.returncode == 0, p.stderr
        lines[lease] = p.stdout.decode().splitlines()[1]
    assert lines == {
        "35": "leases: 35 s, heartbeat every 30 s + up to 20 s of delay, 0% of heartbeats lost; "
              "workers revoked while still running: 39",
        "90": "leases: 90 s, heartbeat every 30 s + up to 20 s of delay, 0% of heartbeats lost; "
              "workers revoked while still running: 0"}
    p = cli("simulate", "--lease-s", "0", "--out", str(tmp_path / "no.jsonl"))
    assert (p.returncode, p.stderr.decode().strip()) == (
        2, "Error: --lease-s/--heartbeat-s/--jitter-s/--missed-heartbeats: lease and heartbeat period must be "
           "positive, jitter 0 or more")
    p = cli("simulate", "--lease-s", "90", "--missed-heartbeats", "1", "--out", str(tmp_path / "no.jsonl"))
    assert (p.returncode, p.stderr.decode().strip()) == (
        2, "Error: --lease-s/--heartbeat-s/--jitter-s/--missed-heartbeats: missed heartbeat share is 1.0, "
           "expected 0 <= share < 1")
    assert not (tmp_path / "no.jsonl").exists()


# The figures docs/LEASE-HEALTH.md gives for these runs (revision 3: H and J over heartbeat attempts).
LEASE_FIGURES = {
    "35 s": [("tool=search", 88, 30.305, 18.121, 48.426, True), ("tool=browser", 90, 30.33, 16.297, 46.627, True),
             ("tool=code", 81, 30.258, 15.166, 45.424, True)],
    "90 s": [("tool=search", 65, 30.328, 18.81, 49.138, False), ("tool=code", 76, 30.29, 18.481, 48.771, False),
             ("tool=browser", 60, 30.26, 16.376, 46.636, False)],
    "90 s, 30% lost": [("tool=browser", 71, 30.253, 18.573, 48.826, False),
                       ("tool=search", 74, 30.347, 18.012, 48.359, False),
                       ("tool=code", 81, 30.36, 16.875, 47.235, False)],
}


@pytest.mark.parametrize("name", list(LEASE_FIGURES))
def test_lease_figures_of_the_docs(lease_sims, tmp_path, name):
    from auditor import audit

    lease_sims[name].write(tmp_path / "lease.jsonl")
    with audit(tmp_path / "lease.jsonl", by=["tool"]) as result:
        assert [(g.label, g.metrics.heartbeat_gaps, g.metrics.heartbeat_interval_median, g.metrics.heartbeat_jitter,
                 g.threshold, g.at_risk) for g in result.lease_health.groups] == LEASE_FIGURES[name]
