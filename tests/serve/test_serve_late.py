"""Live alerts re-evaluate a key when late evidence arrives (issue 44, item 8): a takeover that
reaches a real receiver seconds after the commits it makes stale (past the 1 s reorder window)
still alerts them, and so does one that arrives after a sender flooded 105k other keys (more than
the detector follows)."""

from __future__ import annotations

import time

import pytest

from .serve_kit import Served, request
from .test_serve_restart import alerts, wait_for

KEY = "ledger/export/2026-07-26"
BEFORE = [{"kind": "lease_acquired", "workflow_key": KEY, "epoch": 17, "seq": 1, "worker": "alpha"},
          {"kind": "effect_committed", "workflow_key": KEY, "epoch": 17, "seq": 3, "worker": "alpha",
           "effect_key": "pay-1", "sink": "payments"}]
LATE = [{"kind": "lease_acquired", "workflow_key": KEY, "epoch": 18, "seq": 2, "worker": "beta"}]


@pytest.mark.slow
def test_a_takeover_two_seconds_late_still_alerts_the_commit_it_makes_stale(tmp_path):
    with Served(tmp_path, tmp_path / "late.duckdb", "--decoders", "0") as server:
        assert server.post(request(BEFORE, 1), role="worker")[0] == 200
        time.sleep(2.0)  # the commit is decided (not stale) a second later; the takeover comes after
        assert alerts(server) == {}
        assert server.post(request(LATE, 2), role="worker")[0] == 200
        wait_for(server, KEY, "stale_commit")
        findings = server.json("/findings")
        assert [(f["grade"], f["seq"], f["transition_seq"]) for f in findings] == [("stale_commit", 3, 2)]
        # Sent again (a Collector's retry), the takeover re-evaluates the key and alerts nothing new.
        assert server.post(request(LATE, 2), role="worker")[0] == 200
        time.sleep(2.0)
        server.json("/findings")
    assert alerts(server) == {(KEY, "stale_commit"): 1}


@pytest.mark.slow
def test_a_late_takeover_after_a_flood_of_105k_other_keys_still_alerts(tmp_path):
    with Served(tmp_path, tmp_path / "flood.duckdb", "--decoders", "0") as server:
        assert server.post(request(BEFORE, 1), role="worker")[0] == 200
        started = time.monotonic()
        per = 7_500
        for n in range(14):  # 105,000 other keys, one acquisition each
            flood = [{"kind": "lease_acquired", "workflow_key": f"flood/{n}/{i}", "epoch": 1, "seq": 1,
                      "worker": "w"} for i in range(per)]
            assert server.post(request(flood, 10 + n), role="worker")[0] == 200
        health = server.json("/healthz")
        flooded = time.monotonic() - started
        assert server.post(request(LATE, 2), role="worker")[0] == 200
        wait_for(server, KEY, "stale_commit", timeout=60)
        print(f"105k keys flooded in {flooded:.1f} s; alerted {time.monotonic() - started:.1f} s after the flood began; "
              f"healthz {health}")
    assert alerts(server) == {(KEY, "stale_commit"): 1}


def test_revisiting_reports_what_late_evidence_makes_certain_once_and_stays_bounded():
    from auditor.detect.live.revisit import Revisiting
    from auditor.otel.convert import event_from_record

    d = Revisiting(max_keys=10, max_events=40)
    assert [f for e in BEFORE for f in d.feed(event_from_record(e))] == []
    for i in range(25):  # more keys than the detector follows, fewer events than the history keeps
        d.feed(event_from_record(dict(LATE[0], workflow_key=f"other/{i}", epoch=1, seq=1)))
    assert d.evicted_keys > 0 and KEY not in d._keys  # noqa: SLF001 - the detector forgot it
    found = d.feed(event_from_record(LATE[0]))
    assert [(f.grade.value, f.seq, f.transition_seq) for f in found] == [("stale_commit", 3, 2)]
    assert d.feed(event_from_record(LATE[0])) == [] and d.revisited == 2  # a retry: nothing twice
    for i in range(40):  # past max_events: the least recently fed keys' histories go first
        d.feed(event_from_record(dict(LATE[0], workflow_key=f"more/{i}", epoch=1, seq=1)))
    assert d._kept <= 40 and KEY not in d._history and d.forgotten > 0  # noqa: SLF001
