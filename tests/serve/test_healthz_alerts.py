"""Issue 45: /healthz said "alerts": 1 while stderr printed 4 alerts. One incident whose grade rises
finding by finding alerts four times (stale_activity, stale_attempt, stale_commit, double_commit):
"alerts" counts those four, "incidents_alerted" the one incident."""

from __future__ import annotations

import json
import time

import pytest

from ..conftest import FIXTURES
from .serve_kit import Served, request
from .test_serve_restart import ALERT

pytestmark = pytest.mark.slow
KEY = "ledger/export/2026-07-26"


def test_healthz_counts_every_alert_it_printed(tmp_path):
    events = [{k: v for k, v in json.loads(line).items() if k != "attrs"}
              for line in (FIXTURES / "seed_split_brain.jsonl").read_text().splitlines() if KEY in line]
    served = Served(tmp_path, tmp_path / "alerts.duckdb", "--decoders", "0").start()
    try:
        assert served.post(request(events))[0] == 200
        deadline = time.monotonic() + 60
        while len(ALERT.findall(served.log.read_text())) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        printed = ALERT.findall(served.log.read_text())
        health = json.loads(served.get("/healthz")[1])
    finally:
        served.proc.terminate()
        served.proc.wait(timeout=60)
    assert printed == [("stale_activity", KEY), ("stale_attempt", KEY), ("stale_commit", KEY), ("double_commit", KEY)]
    assert (health["alerts"], health["incidents_alerted"]) == (4, 1)
