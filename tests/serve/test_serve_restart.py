"""One audit across restarts (issue 36): a receiver restarted mid-incident (SIGTERM, then kill -9)
rebuilds its detector and the alerts it raised from the store: each incident alerts once, a
replay never alerts again, and a finding whose grade changed (a stale attempt alerted before the
restart, then resolved as rejected) alerts once more."""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest

from auditor.serve import Receiver, ServeConfig
from .serve_kit import Served, request

A, B, C = "tenant-a/export", "tenant-b/export", "tenant-c/export"
TAKEOVER = [{"kind": "lease_acquired", "epoch": 1, "seq": 1, "worker": "old"},
            {"kind": "lease_acquired", "epoch": 2, "seq": 2, "worker": "new"}]


def on(key: str, events: list[dict]) -> list[dict]:
    return [dict(e, workflow_key=key) for e in events]


A1 = on(A, TAKEOVER + [{"kind": "effect_committed", "epoch": 1, "seq": 3, "worker": "old", "effect_key": "x"}])
A2 = on(A, [{"kind": "effect_committed", "epoch": 1, "seq": 4, "worker": "old", "effect_key": "z"}])
B1 = on(B, TAKEOVER + [{"kind": "effect_committed", "epoch": 1, "seq": 3, "worker": "old", "effect_key": "x"}])
C1 = on(C, TAKEOVER + [{"kind": "effect_attempted", "epoch": 1, "seq": 3, "worker": "old", "effect_key": "q"}])
C2 = on(C, [{"kind": "effect_attempted", "epoch": 1, "seq": 4, "worker": "old", "effect_key": "q",
             "sink_result": "rejected", "reporter": "sink"}])
ALERT = re.compile(r"^split-brain (\w+) on (\S+) at ", re.MULTILINE)


def alerts(*servers: Served) -> Counter:
    return Counter((key, grade) for s in servers for grade, key in ALERT.findall(s.log.read_text()))


def wait_for(server: Served, key: str, grade: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while (key, grade) not in alerts(server):
        assert time.monotonic() < deadline, f"no {grade} alert on {key}: {server.log.read_text()[-1500:]}"
        time.sleep(0.1)
    server.json("/findings")  # waits until the store holds what was acknowledged, the alert included


@pytest.mark.slow
def test_a_restart_mid_incident_gives_one_alert_per_incident(tmp_path):
    db = tmp_path / "restart.duckdb"
    first = Served(tmp_path, db, "--decoders", "0").start()
    assert first.post(request(A1, 1))[0] == 200
    assert first.post(request(C1, 3))[0] == 200
    wait_for(first, A, "stale_commit")
    assert first.stop() == 0  # the open stale attempt on C is alerted at shutdown
    assert alerts(first) == Counter({(A, "stale_commit"): 1, (C, "stale_attempt"): 1})

    second = Served(tmp_path, db, "--decoders", "0").start()
    assert second.post(request(A1, 1))[0] == 200      # a replay of acknowledged evidence
    assert second.post(request(A2, 11))[0] == 200     # more of A's incident, same grade
    assert second.post(request(B1, 2))[0] == 200      # an incident first seen after the restart
    assert second.post(request(C2, 13))[0] == 200     # C's attempt resolved: rejected, a near miss
    wait_for(second, B, "stale_commit")
    wait_for(second, C, "rejected_attempt")
    second.kill()  # kill -9 this time

    third = Served(tmp_path, db, "--decoders", "0").start()
    for trace, events in ((1, A1), (11, A2), (2, B1), (3, C1), (13, C2)):
        assert third.post(request(events, trace))[0] == 200  # everything again, as a Collector retries
    time.sleep(1.5)  # past the reorder window: the live audit has seen it all
    assert third.stop() == 0
    assert alerts(second) == Counter({(B, "stale_commit"): 1, (C, "rejected_attempt"): 1})
    assert alerts(third) == Counter()
    assert alerts(first, second, third) == Counter({(A, "stale_commit"): 1, (B, "stale_commit"): 1,
                                                    (C, "stale_attempt"): 1, (C, "rejected_attempt"): 1})


def test_a_restart_over_keys_with_and_without_seq_rebuilds_the_detector(tmp_path):
    """A key with a seq-less event beside its seqs, and a key with no seq at all: the restarted
    receiver feeds both to its detector and numbers the second one on from its last position."""
    db = tmp_path / "mixed.duckdb"
    events = on(A, TAKEOVER + [{"kind": "progress", "epoch": 1, "worker": "old"}]) + on(
        B, [{"kind": "lease_acquired", "epoch": 1, "worker": "w"}, {"kind": "progress", "epoch": 1, "worker": "w"}])
    first = Receiver(ServeConfig(db=db))
    try:
        assert first.accept("traces", request(events, 1), "application/x-protobuf", "")[0] == 200
    finally:
        first.close()
    again = Receiver(ServeConfig(db=db))
    try:
        assert B in again.audit._observed and A not in again.audit._observed  # noqa: SLF001
        assert set(again.audit.detector._keys) == {A, B}  # noqa: SLF001
    finally:
        again.close()
