"""The incremental detector: every SPEC section 3 rule as a whole-list table, and pinned to the batch
detector (the SQL one) by a property test over random histories in authoritative order."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditor import audit
from auditor.detect.live.detector import LiveDetector, detect_events
from auditor.detect.batch.timeline import iter_events
from auditor.core.model import Outcome

from ..helpers import event
from ..conftest import FIXTURES, ev, examples, vocabulary_of, write_jsonl




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


def test_one_event_id_on_two_different_events_is_no_duplicate(tmp_path):
    """Two events sharing an event_id at one seq but not their content are two events (the batch
    audit keeps and audits both, and reports the event_id_conflict): the live detector used to
    drop the second as a duplicate, and with it a stale commit."""
    hist = [ev("1 acq 1 a"), ev("2 acq 2 b"), ev("3 prog 2 b", event_id="x"), ev("3 com 1 a pay", event_id="x")]
    path = write_jsonl(tmp_path / "h.jsonl", hist)
    with audit([path]) as batch:
        assert [(f.grade.value, f.seq) for f in batch.findings] == [("stale_commit", 3)]
        det = LiveDetector()
        found = [f for n, d in enumerate(hist, 1) for f in det.feed(event(d, str(path), n))] + det.finish()
        assert [f.to_dict() for f in found] == [f.to_dict() for f in batch.findings]
    assert det.duplicates == 0


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
    assert detect_events(iter_events(result.store)) == result.findings


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
    # seq should be unique per workflow key (SPEC section 2); the small seq range makes two
    # different events on one (key, seq) common: ordering conflicts, which both engines must judge
    # alike too. Except two commits on one (key, seq): the live detector reports a double commit
    # when the first of them arrives and cannot amend it when the second changes its evidence
    # (LiveDetector's docstring).
    commits, kept = set(), []
    for d in out:
        if d["kind"] == "effect_committed":
            if (d["workflow_key"], d["seq"]) in commits:
                continue
            commits.add((d["workflow_key"], d["seq"]))
        kept.append(d)
    return kept


def _key(f):
    return (f.grade.value, f.workflow_key, f.seq)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(histories(), st.randoms(use_true_random=False))
@pytest.mark.slow
def test_live_agrees_with_batch(tmp_path_factory, hist, rnd):
    shuffled = list(hist)
    rnd.shuffle(shuffled)  # file order must not matter to the batch detector
    path = write_jsonl(tmp_path_factory.mktemp("h") / "h.jsonl", shuffled)
    batch = audit([path])
    line = {d["event_id"]: n for n, d in enumerate(shuffled, 1)}
    events = sorted((event(d, str(path), line[d["event_id"]]) for d in hist),
                    key=lambda e: (e.workflow_key, e.seq, e.event_id))
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


@pytest.mark.parametrize("first", ["commit", "rejection"])
def test_a_commit_and_a_rejection_at_one_seq_resolve_alike_in_every_file_order(tmp_path, first):
    """An ordering conflict found by the property above: a stale attempt, then a commit and a
    rejection of its effect key at one later seq. The first of the two in (seq, event_id) order
    resolves the attempt, as the live detector is fed them; the other is a finding of its own when
    it is a rejection. The batch answer took whichever the ASOF join met first (it changed with the
    file's order) and counted a rejection at the resolving seq as the receipt even when the commit
    had resolved the attempt."""
    ids = {"commit": "e1", "rejection": "e2"} if first == "commit" else {"commit": "e2", "rejection": "e1"}
    hist = [ev("1 acq 1 a", event_id="a1"), ev("2 acq 2 b", event_id="a2"), ev("3 att 1 a x", event_id="t1"),
            ev("4 com 1 a x", event_id=ids["commit"]), ev("4 rej 1 a x", event_id=ids["rejection"])]
    expected = ([("stale_attempt", "k", 3, "committed"), ("rejected_attempt", "k", 4, "rejected"),
                 ("stale_commit", "k", 4, "committed")] if first == "commit" else
                [("rejected_attempt", "k", 3, "rejected"), ("stale_commit", "k", 4, "committed")])
    live = LiveDetector()
    events = sorted((event(d) for d in hist), key=lambda e: (e.seq, e.event_id))
    found = [f for e in events for f in live.feed(e)] + live.finish()
    found.sort(key=lambda f: (f.seq, f.grade.rank))
    assert [(f.grade.value, f.workflow_key, f.seq, f.outcome.value) for f in found] == expected
    for n, order in enumerate((hist, hist[::-1], hist[2:] + hist[:2])):
        batch = audit([write_jsonl(tmp_path / f"h{n}.jsonl", order)])
        assert [(f.grade.value, f.workflow_key, f.seq, f.outcome.value) for f in batch.findings] == expected


def test_two_attempts_at_one_seq_show_the_one_reported_first(tmp_path):
    """Two stale attempts share seq 3 (an ordering conflict): x is resolved by a commit at seq 4,
    y never is. Both grade stale_attempt, so they are one finding, and it is x's: the live
    detector reports x at seq 4, before the end of the log settles y. The batch answer showed
    whichever attempt came first in the file."""
    hist = [ev("1 acq 1 a", event_id="a1"), ev("2 acq 2 b", event_id="a2"),
            ev("3 att 1 a x", event_id="t9"), ev("3 att 1 a y", event_id="t1"), ev("4 com 1 a x", event_id="c1")]
    expected = [("stale_attempt", 3, "x", "committed"), ("stale_commit", 4, "x", "committed")]
    live = LiveDetector()
    found = [f for e in sorted((event(d) for d in hist), key=lambda e: (e.seq, e.event_id)) for f in live.feed(e)]
    found += live.finish()
    assert sorted((f.grade.value, f.seq, f.effect_key, f.outcome.value) for f in found) == expected
    for n, order in enumerate((hist, hist[::-1], hist[3:] + hist[:3])):
        batch = audit([write_jsonl(tmp_path / f"h{n}.jsonl", order)])
        assert [(f.grade.value, f.seq, f.effect_key, f.outcome.value) for f in batch.findings] == expected
