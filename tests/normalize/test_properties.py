"""Invariants over random histories: accounting always holds, and line order never matters."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditor import audit

from ..conftest import examples

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


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.randoms(use_true_random=False))
@pytest.mark.slow
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


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.lists(JUNK, max_size=8), st.integers(0, 3), st.randoms(use_true_random=False))
@pytest.mark.slow
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


# SPEC rev 2, "real logs are messy": the same history written messily loses no event the rules keep.

def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p.title() for p in rest)


@st.composite
def messy_lines(draw, events):
    """Each event written as a team might: case and camelCase names, empty descriptive fields,
    a member repeated with the same value, unknown descriptive values, number-typed keys."""
    lines = []
    for e in events:
        members = []
        for k, v in e.items():
            name = draw(st.sampled_from([k, k.upper(), _camel(k), k.title()]))
            if k == "sink_result" and v == "unknown":
                v = draw(st.sampled_from(["unknown", "timeout", "UNKNOWN"]))
            if k in ("seq", "epoch"):
                v = draw(st.sampled_from([v, str(v), f"+{v}", f" {v} "]))
            members.append((name, v))
            if draw(st.integers(0, 5)) == 0:
                members.append((name, v))  # the same member twice, one value: not ambiguous
        for extra in draw(st.lists(st.sampled_from(["sink", "step_id", "reporter", "sink_result", "ts",
                                                    "event_id", "job_id"]), max_size=3, unique=True)):
            if extra not in e:
                members.append((extra, draw(st.sampled_from(["", "  "]))))
        if draw(st.booleans()):
            members.append(("reporter", draw(st.sampled_from(["scheduler", "Cron", ""]))))
        draw(st.randoms(use_true_random=False)).shuffle(members)
        lines.append("{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in members) + "}")
    return lines


def _clean(events):
    """What a messy writer must not change: unknown sink_result values count as unknown."""
    return [{k: v for k, v in e.items() if k != "reporter"} for e in events]


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
@pytest.mark.slow
def test_messy_writing_loses_no_event(data):
    events = _clean(data.draw(histories()))
    messy = data.draw(messy_lines(events))
    clean = _audit_lines([json.dumps(e) for e in events])
    r = _audit_lines(messy)
    inp = r.input
    assert inp.lines_read == inp.events + inp.duplicates + inp.quarantined
    assert (inp.lines_read, inp.quarantined) == (len(messy), 0), [q.reason for q in inp.quarantine]
    assert inp.events == clean.input.events
    assert [(f.grade.value, f.workflow_key, f.seq) for f in r.findings] == \
        [(f.grade.value, f.workflow_key, f.seq) for f in clean.findings]


@settings(max_examples=examples(17), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.lists(st.sampled_from([
    '{"seq": 1, "workflow_key": "k", "kind": "progress", "epoch": 1, "epoch": 2}',
    '{"seq": 1, "workflow_key": "k", "kind": "progress", "Epoch": 1, "epoch": 2}',
    '{"seq": 1, "workflow_key": {"prompt": "p"}, "kind": "progress", "epoch": 1}',
    '{"seq": 1, "workflow_key": "", "kind": "progress", "epoch": 1}',
    '{"seq": 1, "workflow_key": "k", "kind": "result_committed", "epoch": 1}',
    '{"seq": "\u0661", "workflow_key": "k", "kind": "progress", "epoch": 1}']), max_size=6))
@pytest.mark.slow
def test_accounting_holds_with_refused_messy_lines(events, refused):
    lines = [json.dumps(e) for e in events] + refused
    r = _audit_lines(lines)
    inp = r.input
    assert inp.lines_read == inp.events + inp.duplicates + inp.quarantined == len(lines)
    assert inp.quarantined == len(refused)
