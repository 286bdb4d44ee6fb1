"""Invariants over random histories: accounting always holds, and line order never matters."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditor import audit

KINDS = ["lease_acquired", "progress", "effect_attempted", "effect_committed", "outcome_verified"]


@st.composite
def histories(draw, max_events: int = 30):
    """Events with unique seqs per key, a few keys, small epochs and effect keys."""
    n = draw(st.integers(1, max_events))
    events = []
    seqs = draw(st.lists(st.integers(1, 200), min_size=n, max_size=n, unique=True))
    for seq in seqs:
        kind = draw(st.sampled_from(KINDS))
        e = {"seq": seq, "workflow_key": draw(st.sampled_from(["a", "b"])), "kind": kind,
             "worker": draw(st.sampled_from(["w1", "w2", "w3"]))}
        if kind != "outcome_verified":
            e["epoch"] = draw(st.integers(0, 4))
        if kind in ("effect_attempted", "effect_committed", "outcome_verified"):
            e["effect_key"] = draw(st.sampled_from(["x", "y"]))
            e["step_id"] = draw(st.sampled_from(["s1", "s2"]))
        if kind == "effect_attempted":
            e["sink_result"] = draw(st.sampled_from([None, "rejected", "accepted", "unknown"]))
        events.append({k: v for k, v in e.items() if v is not None})
    return events


def _audit_lines(lines: list[str]):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "h.jsonl"
        path.write_text("".join(line + "\n" for line in lines))
        return audit([path], fail_on="double_commit")


def _view(result):
    return ([(f.grade.value, f.workflow_key, f.seq, f.outcome, f.receipt_seq, f.epochs, f.id,
              f.incident_id) for f in result.findings],
            [(i.id, i.severity, i.witness) for i in result.incidents],
            [(d.kind, d.workflow_key, d.seq) for d in result.diagnostics])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.randoms(use_true_random=False))
def test_shuffling_lines_never_changes_findings(events, rnd):
    lines = [json.dumps(e) for e in events]
    shuffled = lines[:]
    rnd.shuffle(shuffled)
    assert _view(_audit_lines(lines)) == _view(_audit_lines(shuffled))


JUNK = st.sampled_from([
    "", "   ", "not json", "[1]", '{"seq": "x"}', '{"kind": "progress"}', "\x00\x01",
    '{"seq": 1, "workflow_key": "k", "kind": "progress", "epoch": -3}',
    '{"seq": 1, "workflow_key": "k", "kind": "progress", "epoch": 1e400}',
])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.lists(JUNK, max_size=8), st.integers(0, 3), st.randoms(use_true_random=False))
def test_accounting_invariant(events, junk, dup_count, rnd):
    lines = [json.dumps(e) for e in events] + junk
    lines += [rnd.choice(lines) for _ in range(dup_count)] if lines else []
    rnd.shuffle(lines)
    r = _audit_lines(lines)
    inp = r.input
    assert inp.lines_read == inp.events + inp.duplicates + inp.quarantined
    assert inp.lines_read == sum(1 for line in lines if line.strip(" \t\r\n"))
    stored = r.store.con.execute("SELECT count(*) FROM events").fetchone()[0]
    assert stored == inp.events
