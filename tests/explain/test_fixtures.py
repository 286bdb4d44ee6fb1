"""Every scenario log in fixtures/ against its expected findings and diagnostics, whole lists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..conftest import FIXTURES, audited

CASES = sorted(FIXTURES.glob("*.expected.json"))


def _log_of(expected):
    stem = expected.name[: -len(".expected.json")]
    matches = [p for p in FIXTURES.iterdir() if p.name.startswith(stem + ".") and p != expected
               and not p.name.endswith((".expected.json", ".map.toml"))]
    assert len(matches) == 1, f"{expected.name}: expected one log beside it, found {matches}"
    return matches[0]



def _sorted(rows):
    return sorted((tuple(r) for r in rows), key=lambda t: (t[1], t[2] if t[2] is not None else -1, t[0]))


@pytest.mark.parametrize("expected", CASES, ids=[c.name.split(".")[0] for c in CASES])
def test_fixture_findings(expected):
    want = json.loads(expected.read_text())
    log = _log_of(expected)
    result = audited(log).result
    found = _sorted((f.grade.value, f.workflow_key, f.seq) for f in result.findings)
    assert found == _sorted(want["findings"])
    if "diagnostics" in want:
        diags = _sorted((d.kind.value, d.workflow_key, d.seq) for d in result.diagnostics)
        assert diags == _sorted(want["diagnostics"])
    if "quarantine" in want:
        assert [[q.line, q.reason] for q in result.input.quarantine] == want["quarantine"]
    if "evidence_lost" in want:  # SPEC rev 3.1: every cause counted, the blocking ones first (file by name)
        lost = result.evidence_lost()
        lost["first"] = [{**e, "file": Path(e["file"]).name} for e in lost["first"]]
        assert lost == want["evidence_lost"]
    if "lease_health" in want:  # SPEC section 7: every metric of every group and key, whole
        assert result.lease_health.to_dict() == want["lease_health"]


def test_every_rule_has_a_fixture():
    names = {c.name.split(".")[0] for c in CASES}
    assert {"seed_split_brain", "clean_handover", "buffered_late_arrival", "rejected_attempt",
            "stale_attempt_unknown_outcome", "zombie_reexecution_double_commit",
            "same_epoch_idempotent_retry", "epoch_regression", "unacquired_epoch",
            "ordering_conflict", "job_log_aliases", "lease_timing_35s_vs_90s", "w1_w2_pause_expired_lease",
            "lease_boundary_early_reclaim"} <= names
