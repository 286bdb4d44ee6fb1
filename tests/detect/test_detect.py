"""SPEC section 3 beyond the rule table (``test_rules.py``, both engines): owners, incidents, confidence."""

from __future__ import annotations

from pathlib import Path

import pytest

from auditor.core.model import Confidence, Grade, Outcome

from ..conftest import ev, history, triples

def test_transition_and_current_owner(audit_events):
    r = audit_events(history("1 acq 1 a", "2 acq 2 b", "3 acq 3 c", "4 prog 1 a"))
    (f,) = r.findings
    assert (f.transition_seq, f.current_epoch, f.current_worker, f.epoch, f.worker) == (2, 3, "c", 1, "a")


def test_a_double_commits_transition_never_comes_after_it(audit_events):
    r = audit_events(history("1 acq 0 a", "4 acq 1 b", "3 com 0 a x", "2 com 1 b x"))
    (f,) = r.findings
    assert (f.grade, f.seq, f.epochs, f.transition_seq) == (Grade.DOUBLE_COMMIT, 3, (0, 1), None)


def test_rejected_attempt_carries_its_receipt(audit_events):
    r = audit_events(history("1 acq 1 a", "2 acq 2 b", "3 att 1 a x", "5 rej 1 a x"))
    (f,) = r.findings
    assert (f.grade, f.seq, f.receipt_seq, f.outcome) == (Grade.REJECTED_ATTEMPT, 3, 5, Outcome.REJECTED)
    assert r.verdict == "pass" and r.exit_code == 0  # a fence that works stays below --fail-on


def test_unstable_effect_key(audit_events):
    events = [ev("1 acq 1 a"), ev("2 com 1 a pay:run:e1", step_id="s3"), ev("3 acq 2 b"),
              ev("4 com 2 b pay:run:e2", step_id="s3")]
    r = audit_events(events)
    (f,) = r.findings
    assert (f.grade, f.seq, f.unstable_effect_key, f.epochs) == (Grade.DOUBLE_COMMIT, 4, True, (1, 2))
    assert "unstable effect key" in r.incidents[0].witness


def test_double_commit_joins_the_incident_of_its_lowest_epoch(audit_events):
    r = audit_events(history("1 acq 1 a", "2 acq 2 b", "3 com 2 b x", "4 com 1 a x", "5 prog 1 a"))
    assert len(r.incidents) == 1
    i = r.incidents[0]
    assert (i.displaced.epoch, i.severity, i.grades) == (1, Grade.DOUBLE_COMMIT,
                                                         {"stale_commit": 1, "double_commit": 1,
                                                          "stale_activity": 1})


def test_incidents_per_displaced_epoch(audit_events):
    r = audit_events(history("1 acq 1 a", "2 acq 2 b", "3 acq 3 c", "4 prog 1 a", "5 prog 2 b"))
    assert [(i.displaced.epoch, i.displaced.worker, i.severity) for i in r.incidents] == [
        (1, "a", Grade.STALE_ACTIVITY), (2, "b", Grade.STALE_ACTIVITY)]


def test_verified_outcome_follows(audit_events):
    r = audit_events(history("1 acq 1 a", "2 acq 2 b", "3 com 1 a x", "4 ver v x"))
    i = r.incidents[0]
    assert (i.verification, i.effects[0].verified, i.effects[0].verified_seq) == ("verified", True, 4)


def test_verification_before_the_commit_does_not_count(audit_events):
    r = audit_events(history("1 acq 1 a", "2 acq 2 b", "3 ver v x", "4 com 1 a x"))
    assert r.incidents[0].verification == "unverified"


def test_worker_reported_commit_is_medium_confidence(audit_events):
    events = [ev("1 acq 1 a"), ev("2 acq 2 b"), ev("3 com 1 a x", reporter="worker")]
    assert audit_events(events).incidents[0].confidence is Confidence.MEDIUM
    events[2]["reporter"] = "sink"
    assert audit_events(events, name="b.jsonl").incidents[0].confidence is Confidence.HIGH


def test_missing_seq_falls_back_to_observation_order_with_low_confidence(audit_events):
    events = [{k: v for k, v in e.items() if k != "seq"}
              for e in history("1 acq 1 a", "2 acq 2 b", "3 com 1 a x")]
    r = audit_events(events)
    assert r.ordering == "observed"
    # seq is never invented: null, with the observation position and the line to find it by
    assert [(f.grade.value, f.seq, f.position, Path(f.file).name, f.line) for f in r.findings] == [
        ("stale_commit", None, 3, "events.jsonl", 3)]
    assert r.incidents[0].confidence is Confidence.LOW
    assert "at position 3 (no seq)" in r.incidents[0].witness


def test_fail_on_threshold(audit_events):
    events = history("1 acq 1 a", "2 acq 2 b", "3 prog 1 a")
    assert audit_events(events).exit_code == 0
    assert audit_events(events, fail_on="stale_activity").exit_code == 1


def test_lean_reads_lower_the_memory_limit_but_never_raise_it(monkeypatch):
    """detect.lean runs a read under a lower DuckDB limit (the finding rows under 256 MB); an
    AUDITOR_MEMORY_LIMIT already below that stays, and the usual limit comes back after."""
    import auditor.store as store
    from auditor.detect.batch import lean

    def limit(con):
        return con.execute("SELECT current_setting('memory_limit')").fetchone()[0]

    with store.Store(None) as s:
        usual = limit(s.con)
        assert lean(s, limit, "256MB") == "244.1 MiB"
        assert limit(s.con) == usual
    monkeypatch.setenv("AUDITOR_MEMORY_LIMIT", "100MB")
    with store.Store(None) as s:
        assert lean(s, limit, "256MB") == limit(s.con) == "95.3 MiB"
    assert store.size_bytes("1.5 GiB") == 1.5 * 2**30 and store.size_bytes("800MB") == 800e6
    assert store.size_bytes("80%") == float("inf")


def test_ties_on_seq_and_event_id_resolve_in_feed_order():
    """Two acquisitions of one epoch at one seq: the acquirer is the first in feed order (seq,
    event_id, obs), whatever order the rows reach the aggregate in. DuckDB's arg_min keeps the
    first row it meets among equal keys, so the adverse row is put first here."""
    import duckdb

    from auditor.detect.batch import SQL

    con = duckdb.connect()
    con.execute("ATTACH ':memory:' AS auditor_detect")  # detect.sql's scratch database
    con.execute("CREATE TEMP TABLE finding_keys AS SELECT 7::UBIGINT AS k, 'wf' AS workflow_key")
    con.execute("CREATE TEMP TABLE acq (k UBIGINT, s BIGINT, epoch BIGINT, worker VARCHAR, ts_utc TIMESTAMPTZ, "
                "event_id VARCHAR, obs BIGINT, prev_max BIGINT)")
    con.execute("INSERT INTO acq VALUES (7, 3, 2, 'w-late-id', NULL, 'e2', 3, 1), "
                "(7, 3, 2, 'w-same-id-later-line', NULL, 'e1', 5, 1), (7, 3, 2, 'w-first', NULL, 'e1', 4, 1)")
    con.execute(SQL["acquirers"])
    assert con.execute(SQL["read_acquirers"]).fetchall() == [("wf", 2, "w-first")]


def test_rows_sharing_seq_and_event_id_keep_file_order(tmp_path):
    """An event_id conflict at one seq: the store's frames and the timeline list the rows in file
    order (obs), run after run, not in whatever order the sort met them."""
    from auditor import audit

    from ..conftest import write_jsonl

    rows = [ev("1 acq 1 w1"), *({**ev(f"2 prog 1 w{n}"), "event_id": "same"} for n in range(9, 1, -1))]
    log = write_jsonl(tmp_path / "tie.jsonl", rows)
    with audit([log]) as result:
        assert result.events_frame()["worker"].to_list() == ["w1", *(f"w{n}" for n in range(9, 1, -1))]
        assert [e.worker for e in result.store.events_of("k")] == ["w1", *(f"w{n}" for n in range(9, 1, -1))]
        from auditor.detect.batch.timeline import excerpts

        (timeline,) = excerpts(result.store, ["k"], [], 100).values()
        assert [t.event.worker for t in timeline.events] == ["w1", *(f"w{n}" for n in range(9, 1, -1))]
