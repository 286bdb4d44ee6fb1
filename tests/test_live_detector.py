"""The incremental detector: every SPEC section 3 rule as a whole-list table, and pinned to the batch
detector (the SQL one) by a property test over random histories in authoritative order."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditor import audit
from auditor.detect.live import LiveDetector, detect_events
from auditor.model import Event, Outcome
from auditor.otel.convert import event_from_record

from .conftest import FIXTURES, ev, vocabulary_of, write_jsonl


def event(d: dict) -> Event:
    """A canonical dict as an ``Event``, through the live door's one converter (as the span
    processor reads it: e.g. ``epoch`` on ``outcome_verified`` is ignored)."""
    return event_from_record(d)


def live(*specs: str | dict) -> list[tuple]:
    """Findings of a one-key history, as ``(grade, seq, outcome, receipt_seq, epochs, unstable)``."""
    events = [event(ev(s) if isinstance(s, str) else s) for s in specs]
    events.sort(key=lambda e: e.seq)
    return [(f.grade.value, f.seq, f.outcome.value if f.outcome else None, f.receipt_seq,
             list(f.epochs), f.unstable_effect_key) for f in detect_events(events)]


def step(spec: str, step_id: str) -> dict:
    return ev(spec, step_id=step_id)


RULES = [
    ("clean handover is no finding",
     ["1 acq 5 g", "2 com 5 g part-1", "3 acq 6 e", "4 com 6 e part-2"], []),
    ("stale progress",
     ["1 acq 1 a", "2 acq 2 b", "3 prog 1 a"], [("stale_activity", 3, None, None, [], False)]),
    ("evidence below the displacing seq is not stale, whatever the file order",
     ["1 acq 1 a", "3 acq 2 b", "2 prog 1 a", "4 prog 2 b"], []),
    ("unresolved stale attempt: outcome unknown",
     ["1 acq 1 a", "2 acq 2 b", "3 att 1 a x"], [("stale_attempt", 3, "unknown", None, [], False)]),
    ("unresolved stale attempt the sink accepted: outcome committed",
     ["1 acq 1 a", "2 acq 2 b", ev("3 att 1 a x", sink_result="accepted")],
     [("stale_attempt", 3, "committed", None, [], False)]),
    ("one rejection resolves every earlier attempt of its triple: one finding per attempt",
     ["1 acq 1 a", "2 acq 2 b", "3 att 1 a x", "4 att 1 a x", "5 rej 1 a x"],
     [("rejected_attempt", 3, "rejected", 5, [], False), ("rejected_attempt", 4, "rejected", 5, [], False)]),
    ("a rejection of another effect key resolves nothing",
     ["1 acq 1 a", "2 acq 2 b", "3 att 1 a x", "4 rej 1 a y"],
     [("stale_attempt", 3, "unknown", None, [], False), ("rejected_attempt", 4, "rejected", 4, [], False)]),
    ("attempt before the takeover, refusal after it: the refusal is the finding",
     ["1 acq 1 a", "2 att 1 a x", "3 acq 2 b", "4 rej 1 a x"],
     [("rejected_attempt", 4, "rejected", 4, [], False)]),
    ("stale attempt resolved by a commit stays stale_attempt; the commit is a stale_commit",
     ["1 acq 1 a", "2 acq 2 b", "3 att 1 a x", "4 com 1 a x"],
     [("stale_attempt", 3, "committed", None, [], False), ("stale_commit", 4, "committed", None, [], False)]),
    ("a rejection after a commit resolves only the attempts after that commit",
     ["1 acq 1 a", "2 acq 2 b", "3 att 1 a x", "4 com 1 a x", "5 att 1 a x", "6 rej 1 a x"],
     [("stale_attempt", 3, "committed", None, [], False), ("stale_commit", 4, "committed", None, [], False),
      ("rejected_attempt", 5, "rejected", 6, [], False)]),
    ("double commit at each commit that adds an epoch, never at the first",
     ["1 acq 1 a", "2 com 1 a x", "3 acq 2 b", "4 com 2 b x", "5 acq 3 c", "6 com 3 c x"],
     [("double_commit", 4, "committed", None, [1, 2], False), ("double_commit", 6, "committed", None, [1, 2, 3], False)]),
    ("same epoch committing twice is an idempotent retry",
     ["1 acq 1 a", "2 com 1 a x", "3 com 1 a x"], []),
    ("a stale commit that also doubles: two findings at one seq",
     ["1 acq 1 a", "2 acq 2 b", "3 com 2 b x", "4 com 1 a x"],
     [("stale_commit", 4, "committed", None, [], False), ("double_commit", 4, "committed", None, [1, 2], False)]),
    ("one step committed under two epochs with different effect keys: unstable effect key",
     ["1 acq 1 a", step("2 com 1 a pay:1", "s"), "3 acq 2 b", step("4 com 2 b pay:2", "s")],
     [("double_commit", 4, "committed", None, [1, 2], True)]),
    ("both double-commit rules at one seq: reported once",
     ["1 acq 1 a", step("2 com 1 a pay:1", "s"), step("3 com 1 a pay:2", "t"), "4 acq 2 b",
      step("5 com 2 b pay:2", "s")],
     [("double_commit", 5, "committed", None, [1, 2], True)]),
    ("the same step and key under two epochs is the plain double commit",
     ["1 acq 1 a", step("2 com 1 a pay", "s"), "3 acq 2 b", step("4 com 2 b pay", "s")],
     [("double_commit", 4, "committed", None, [1, 2], False)]),
    ("an ordering conflict: a commit and an unrelated stale rejection share seq 4, each judged on its own",
     ["1 acq 1 a", "2 acq 2 b", "3 att 1 a x", ev("4 com 1 a x", event_id="m"), ev("4 rej 1 a y", event_id="n")],
     [("stale_attempt", 3, "committed", None, [], False), ("rejected_attempt", 4, "rejected", 4, [], False),
      ("stale_commit", 4, "committed", None, [], False)]),
    ("two stale progress events at one seq: one finding",
     ["1 acq 1 a", "2 acq 2 b", ev("3 prog 1 a", event_id="m"), ev("3 prog 1 c", event_id="n")],
     [("stale_activity", 3, None, None, [], False)]),
    ("outcome_verified is never a finding",
     ["1 acq 1 a", "2 acq 2 b", "3 ver a x"], []),
]


@pytest.mark.parametrize("specs, expected", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_rules(specs, expected):
    assert live(*specs) == expected


def test_finding_fields_seed():
    events = [event(json.loads(line)) for line in (FIXTURES / "seed_split_brain.jsonl").read_text().splitlines()]
    found = detect_events(sorted(events, key=lambda e: (e.workflow_key, e.seq)))
    assert [(f.grade.value, f.seq, f.epoch, f.worker, f.current_epoch, f.current_worker, f.transition_seq,
             f.effect_key, f.outcome, list(f.epochs)) for f in found] == [
        ("stale_activity", 6, 17, "alpha", 18, "beta", 5, None, None, []),
        ("stale_attempt", 7, 17, "alpha", 18, "beta", 5, "release-index/2026-07-26", Outcome.COMMITTED, []),
        ("stale_commit", 8, 17, "alpha", 18, "beta", 5, "release-index/2026-07-26", Outcome.COMMITTED, []),
        ("double_commit", 9, 18, "beta", 18, "beta", 5, "release-index/2026-07-26", Outcome.COMMITTED, [17, 18]),
    ]
    assert len({f.incident_id for f in found}) == 1


def test_feed_reports_when_certain():
    det = LiveDetector()
    got = [[(f.grade.value, f.seq) for f in det.feed(event(ev(s)))]
           for s in ["1 acq 1 a", "2 acq 2 b", "3 att 1 a x", "4 prog 1 a", "5 rej 1 a x", "6 att 1 a y"]]
    assert got == [[], [], [], [("stale_activity", 4)], [("rejected_attempt", 3)], []]
    assert [(f.grade.value, f.seq) for f in det.pending()] == [("stale_attempt", 6)]
    assert [(f.grade.value, f.seq, f.outcome.value) for f in det.finish()] == [("stale_attempt", 6, "unknown")]
    assert (det.events, det.stale_events, det.reclaims) == (6, 4, 1)


def test_diagnostics_and_counters():
    det = LiveDetector()
    for d in [ev("1 acq 3 a"), ev("2 acq 3 b"), ev("3 prog 7 c"), ev("4 com 3 a x", event_id="e4"),
              ev("4 com 3 a x", event_id="e4"), ev("5 com 3 a x"), ev("6 prog 3 a"), ev("6 prog 3 b")]:
        det.feed(event(d))
    det.finish()
    assert [(d.kind.value, d.seq, d.epoch) for d in det.diagnostics] == [
        ("epoch_regression", 2, 3), ("unacquired_epoch", 3, 7), ("ordering_conflict", 6, None)]
    assert (det.events, det.duplicates, det.idempotent_retries) == (7, 1, 1)


def test_fed_late_staleness_and_double_commit_follow_seq():
    # A long span ends late: seqs 6-8 of the displaced owner arrive after seq 9 of the new one.
    events = [event(json.loads(line)) for line in (FIXTURES / "seed_split_brain.jsonl").read_text().splitlines()]
    by_seq = {e.seq: e for e in events}
    det = LiveDetector()
    out = []
    for s in [1, 2, 3, 4, 5, 9, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16]:
        out += det.feed(by_seq[s])
    out += det.finish()
    assert sorted((f.grade.value, f.seq, list(f.epochs)) for f in out) == [
        ("double_commit", 9, [17, 18]), ("stale_activity", 6, []), ("stale_attempt", 7, []),
        ("stale_commit", 8, [])]
    assert det.late_events == 3


def test_late_acquisition_is_placed_by_seq():
    det = LiveDetector()
    for s in ["1 acq 1 a", "5 acq 3 c", "3 acq 2 b"]:
        det.feed(event(ev(s)))
    assert [(f.grade.value, f.seq, f.current_epoch, f.transition_seq) for f in det.feed(event(ev("4 prog 1 a")))] == [
        ("stale_activity", 4, 2, 3)]
    assert det.reclaims == 2


@pytest.mark.parametrize("log", sorted(p for p in FIXTURES.glob("*.jsonl") if not p.name.startswith("otlp_")),
                         ids=lambda p: p.stem)
def test_fixtures_agree_with_batch(log):
    result = audit([log], vocabulary=vocabulary_of(log))
    assert detect_events(result.store.iter_events()) == result.findings


# Random histories: a few keys, small epoch and effect-key alphabets so rules collide often.

KINDS = ["lease_acquired", "progress", "effect_attempted", "effect_committed", "outcome_verified"]


@st.composite
def histories(draw):
    n = draw(st.integers(1, 28))
    out = []
    for i in range(n):
        kind = draw(st.sampled_from(KINDS + ["lease_acquired", "effect_attempted", "effect_committed"]))
        d = {"seq": draw(st.integers(1, 60)), "workflow_key": draw(st.sampled_from(["k1", "k2"])),
             "kind": kind, "worker": draw(st.sampled_from(["a", "b", "c"])), "event_id": f"e{i:03d}",
             "reporter": draw(st.sampled_from([None, "sink", "worker", "coordinator"]))}
        if kind != "outcome_verified" or draw(st.booleans()):
            d["epoch"] = draw(st.integers(0, 4))
        if kind in ("effect_attempted", "effect_committed", "outcome_verified"):
            d["effect_key"] = draw(st.sampled_from(["x", "y"]))
            d["step_id"] = draw(st.sampled_from([None, "s1", "s2"]))
        if kind == "effect_attempted":
            d["sink_result"] = draw(st.sampled_from([None, "rejected", "rejected", "accepted", "unknown"]))
        out.append({k: v for k, v in d.items() if v is not None})
    # seq is unique per workflow key (SPEC section 2); conflicts have their own test
    seen, unique = set(), []
    for d in out:
        if (d["workflow_key"], d["seq"]) not in seen:
            seen.add((d["workflow_key"], d["seq"]))
            unique.append(d)
    return unique


def _key(f):
    return (f.grade.value, f.workflow_key, f.seq)


@settings(max_examples=int(__import__("os").environ.get("LIVE_EXAMPLES", "300")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(histories(), st.randoms(use_true_random=False))
def test_live_agrees_with_batch(tmp_path_factory, hist, rnd):
    shuffled = list(hist)
    rnd.shuffle(shuffled)  # file order must not matter to the batch detector
    path = write_jsonl(tmp_path_factory.mktemp("h") / "h.jsonl", shuffled)
    batch = audit([path])
    events = sorted((event(d) for d in hist), key=lambda e: (e.workflow_key, e.seq, e.event_id))
    det = LiveDetector()
    found = [f for e in events for f in det.feed(e)] + det.finish()
    found.sort(key=lambda f: (f.workflow_key, f.seq, f.grade.rank))
    assert [_key(f) for f in found] == [_key(f) for f in batch.findings]
    assert [f.to_dict() for f in found] == [f.to_dict() for f in batch.findings]
    assert det.diagnostics == batch.diagnostics


def test_bounded_keys_settle_what_they_forget():
    det = LiveDetector(max_keys=10)
    out = []
    for i in range(10):  # ten keys, each with a stale attempt still open
        for spec in ("1 acq 1 a", "2 acq 2 b", "3 att 1 a x"):
            out += det.feed(event(ev(spec, key=f"k{i}")))
    det.feed(event(ev("4 prog 2 b", key="k0")))  # k0 is fed again: k1 is now the least recent
    out += det.feed(event(ev("1 acq 1 a", key="new")))
    assert (out, det.evicted_keys) == ([], 1)
    assert [(f.grade.value, f.workflow_key, f.seq, f.outcome.value) for f in det.spilled] == [
        ("stale_attempt", "k1", 3, "unknown")]
    assert len(det.finish()) == 10  # the spilled one and the nine still open
