"""The acceptance scenario of SPEC section 5, asserted field by field."""

from __future__ import annotations

import pytest

from auditor import audit
from auditor.core.model import Confidence, Grade, Kind, Outcome

from ..conftest import FIXTURES

SEED = FIXTURES / "seed_split_brain.jsonl"
LEDGER = "ledger/export/2026-07-26"


def test_seed_findings_are_exactly_the_four_planted():
    r = audit([SEED])
    assert [(f.grade, f.workflow_key, f.seq, f.epoch, f.worker, f.current_epoch, f.current_worker,
             f.transition_seq, f.effect_key, f.outcome) for f in r.findings] == [
        (Grade.STALE_ACTIVITY, LEDGER, 6, 17, "alpha", 18, "beta", 5, None, None),
        (Grade.STALE_ATTEMPT, LEDGER, 7, 17, "alpha", 18, "beta", 5, "release-index/2026-07-26",
         Outcome.COMMITTED),
        (Grade.STALE_COMMIT, LEDGER, 8, 17, "alpha", 18, "beta", 5, "release-index/2026-07-26",
         Outcome.COMMITTED),
        (Grade.DOUBLE_COMMIT, LEDGER, 9, 18, "beta", 18, "beta", 5, "release-index/2026-07-26",
         Outcome.COMMITTED),
    ]
    assert r.findings[3].epochs == (17, 18)
    assert r.verdict == "fail" and r.exit_code == 1


def test_seed_incident():
    r = audit([SEED])
    assert len(r.incidents) == 1
    i = r.incidents[0]
    assert (i.workflow_key, i.severity, i.displaced.worker, i.displaced.epoch, i.current.worker,
            i.current.epoch, i.transition_seq) == (LEDGER, Grade.DOUBLE_COMMIT, "alpha", 17, "beta", 18, 5)
    assert (i.first_stale.seq, i.first_stale.kind, i.last_stale.seq, i.last_stale.kind) == (
        6, Kind.PROGRESS, 8, Kind.EFFECT_COMMITTED)
    assert (i.window_first_seq, i.window_last_seq, i.window_seconds) == (6, 8, 180.0)
    assert i.effect_keys == ("release-index/2026-07-26",)
    assert (i.sink_outcome, i.verification, i.confidence) == (Outcome.COMMITTED, "unverified", Confidence.HIGH)
    assert i.freshness_seconds == 480.0  # seq 8 at 02:08, newest event (seq 16) at 02:16
    assert i.witness.startswith(
        "epoch 18 (beta) was acquired at seq 5; epoch 17 (alpha) then committed "
        "release-index/2026-07-26 at seq 8: a displaced owner changed the outside world.")
    assert "the effect happened twice" in i.witness
    assert i.grades == {"stale_activity": 1, "stale_attempt": 1, "stale_commit": 1, "double_commit": 1}
    assert set(i.finding_ids) == {f.id for f in r.findings}
    assert all(f.incident_id == i.id for f in r.findings)


def test_seed_summary_counts_the_clean_handover():
    r = audit([SEED])
    assert r.summary() == {
        "workflows": 3, "acquisitions": 5, "handovers": 2, "clean_handovers": 1,
        "findings": {"stale_activity": 1, "stale_attempt": 1, "stale_commit": 1, "double_commit": 1}}
    by_key = {w.workflow_key: w for w in r.workflows}
    assert by_key["reports/index/2026-07-26"].clean_handovers == 1
    assert by_key["reports/index/2026-07-26"].findings == 0
    assert by_key["checkout/sync/cart-881"].handovers == 0
    assert r.ordering == "authoritative"
    assert (r.input.lines_read, r.input.events, r.input.duplicates, r.input.quarantined) == (16, 16, 0, 0)


def test_ids_are_stable_across_runs():
    a, b = audit([SEED]), audit([SEED])
    assert [f.id for f in a.findings] == [f.id for f in b.findings]
    assert [i.id for i in a.incidents] == [i.id for i in b.incidents]
    assert len({f.id for f in a.findings}) == 4


def test_frames_for_notebooks():
    r = audit([SEED])
    events = r.events_frame()
    assert events.height == 16
    assert events["seq"].to_list()[:3] == [4, 13, 14]  # sorted by key: checkout/... first
    frame = r.findings_frame()
    assert frame["grade"].to_list() == ["stale_activity", "stale_attempt", "stale_commit", "double_commit"]
    assert [e.seq for e in r.timeline(LEDGER)] == [1, 3, 5, 6, 7, 8, 9]


def test_audit_restores_the_garbage_collector(monkeypatch):
    """analyze() pauses the cyclic GC while it builds objects; a notebook's setting survives it."""
    import gc

    import auditor.explain.stream

    assert gc.isenabled()
    assert len(audit([SEED]).findings) == 4
    assert gc.isenabled()
    gc.disable()
    try:
        audit([SEED])
        assert not gc.isenabled()
    finally:
        gc.enable()

    def boom(kf):
        assert not gc.isenabled()  # paused inside
        raise RuntimeError("explain failed")

    monkeypatch.setattr(auditor.explain.stream, "key_incidents", boom)
    with pytest.raises(RuntimeError, match="^explain failed$"):
        audit([SEED])
    assert gc.isenabled()


def test_result_closes_its_store_and_keeps_its_data():
    from auditor import ResultClosed, audit

    with audit(FIXTURES / "seed_split_brain.jsonl") as r:
        assert len(r.events_frame()) == 16 and r.timeline(LEDGER)[0].seq == 1
    r.close()  # idempotent
    assert len(r.findings) == 4 and r.to_dict()["findings"][0]["line"] == 6
    for read in (r.events_frame, r.quarantine_frame, lambda: r.timeline(LEDGER)):
        with pytest.raises(ResultClosed):
            read()


def test_timelines_read_under_a_limit_too_low_for_them_are_read_again(monkeypatch):
    import auditor.detect.batch
    from auditor.detect.batch import timeline
    from auditor.explain.incidents import MAX_TIMELINE_EVENTS, drawn_keys

    with audit([SEED]) as r:
        keys = drawn_keys(r)
        limit = r.store.con.execute("SELECT current_setting('memory_limit')").fetchall()
        monkeypatch.setattr(auditor.detect.batch, "LEAN_MEMORY", "1MB")  # the query runs out of memory under it
        again = timeline.excerpts(r.store, keys, r.findings, MAX_TIMELINE_EVENTS)
        assert again == r.timelines and set(again) == {LEDGER, "reports/index/2026-07-26"}
        assert r.store.con.execute("SELECT current_setting('memory_limit')").fetchall() == limit
