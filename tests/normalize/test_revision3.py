"""SPEC revision 3: evidence is never lost over form, invented, or decided by file order.

Each class of the revision has a fixture (run through every engine by test_fixtures.py,
test_live_detector.py and test_spark.py); here are the exact values each one must give.
"""

from __future__ import annotations

import json

import pytest

from auditor import audit
from auditor.detect.live.detector import detect_events
from auditor.detect.batch.timeline import iter_events
from auditor.render.json import render_json
from auditor.render.markdown import render_markdown

from ..conftest import FIXTURES, run_cli, vocabulary_of, write_jsonl


def document(path, *args) -> tuple[int, dict]:
    m = vocabulary_of(path)
    done = run_cli("audit", str(path), "--json", "-", *args, *(["--map", str(m)] if m else []))
    return done.returncode, json.loads(done.stdout)


def test_one_seqless_line_never_turns_a_stale_commit_into_a_pass():
    """The false PASS of revision 2: a buffered stale commit (seq 8 written before the takeover at
    seq 5) and one line without seq. The key stays in seq order; the line is unplaced."""
    code, doc = document(FIXTURES / "seqless_line_keeps_seq_order.jsonl")
    assert (code, doc["verdict"], doc["ordering"]) == (1, "fail", "authoritative")
    assert doc["schema"] == "split-brain-audit/3"
    assert (doc["input"]["events"], doc["input"]["unplaced"]) == (4, 1)
    (f,) = doc["findings"]
    assert (f["grade"], f["seq"], f["position"], f["transition_seq"], f["transition_position"]) == (
        "stale_commit", 8, 2, 5, 3)
    # an unplaced progress is no lost evidence at the default --fail-on, but is at stale_activity
    assert doc["evidence_lost"]["unplaced"] == 0
    code, doc = document(FIXTURES / "seqless_line_keeps_seq_order.jsonl", "--fail-on", "stale_activity")
    assert (code, doc["evidence_lost"]["unplaced"]) == (1, 1)


def test_the_seed_with_a_seqless_line_keeps_its_witness():
    code, doc = document(FIXTURES / "seed_with_a_seqless_progress_line.jsonl")
    _, seed = document(FIXTURES / "seed_split_brain.jsonl")
    assert code == 1
    assert [f["id"] for f in doc["findings"]] == [f["id"] for f in seed["findings"]]
    assert doc["incidents"][0]["witness"] == seed["incidents"][0]["witness"]
    assert doc["incidents"][0]["witness"].startswith("epoch 18 (beta) was acquired at seq 5;")
    assert doc["input"]["unplaced_first"] == [{"file": str(FIXTURES / "seed_with_a_seqless_progress_line.jsonl"),
                                                "line": 17, "workflow_key": "ledger/export/2026-07-26",
                                                "kind": "progress"}]


def test_seqless_heartbeats_beside_revisions_cost_nothing():
    code, doc = document(FIXTURES / "seqless_heartbeats_beside_revisions.jsonl")
    assert (code, doc["verdict"], doc["input"]["unplaced"], doc["evidence_lost"]["unplaced"]) == (0, "pass", 3, 0)


def test_an_unplaced_acquisition_or_commit_is_lost_evidence():
    path = FIXTURES / "unplaced_commit_is_lost_evidence.jsonl"
    code, doc = document(path)
    assert (code, doc["verdict"], doc["evidence_lost"]["unplaced"]) == (3, "incomplete", 2)
    assert doc["findings"] == []  # never judged: the second epoch's commit has no place
    code, doc = document(path, "--allow-quarantined", "2")  # revision 3.1: never accepts an unplaced event
    assert (code, doc["verdict"]) == (3, "incomplete")
    code, doc = document(path, "--allow-unplaced", "2")
    assert (code, doc["verdict"], doc["evidence_lost"]["allow_unplaced"]) == (0, "pass", 2)
    done = run_cli("audit", str(path))
    assert f"{path}:3: lease_acquired of pay/inv-7 has no seq in a key ordered by seq" in done.stdout.decode()


def test_a_store_keeps_deciding_order_over_every_event(tmp_path):
    """Ordering is decided over every event stored for the key: a later ingest that gives an
    observed key its first seq makes its earlier seq-less events unplaced."""
    db = tmp_path / "s.duckdb"
    a = write_jsonl(tmp_path / "a.jsonl", [{"workflow_key": "k", "kind": "lease_acquired", "epoch": 1},
                                           {"workflow_key": "k", "kind": "lease_acquired", "epoch": 2},
                                           {"workflow_key": "k", "kind": "progress", "epoch": 1}])
    assert run_cli("ingest", str(a), "--db", str(db)).returncode == 0
    doc = json.loads(run_cli("report", "--db", str(db), "--json", "-", "--fail-on", "stale_activity").stdout)
    assert [(f["grade"], f["seq"], f["position"]) for f in doc["findings"]] == [("stale_activity", None, 3)]
    b = write_jsonl(tmp_path / "b.jsonl", [{"seq": 10, "workflow_key": "k", "kind": "progress", "epoch": 2}])
    assert run_cli("ingest", str(b), "--db", str(db)).returncode == 0
    done = run_cli("report", "--db", str(db), "--json", "-")
    doc = json.loads(done.stdout)
    assert (done.returncode, doc["findings"], doc["input"]["unplaced"], doc["evidence_lost"]["unplaced"]) == (
        3, [], 3, 2)
    assert [e for e in doc["workflows"]] == [{"workflow_key": "k", "events": 4, "acquisitions": 2, "handovers": 0,
                                              "clean_handovers": 0, "findings": 0, "severity": None,
                                              "ordering": "authoritative"}]


def test_descriptive_objects_never_cost_a_double_commit():
    """Revision 2 quarantined these lines, and --allow-quarantined 3 then said PASS."""
    path = FIXTURES / "descriptive_objects_keep_the_event.jsonl"
    for extra in ((), ("--allow-quarantined", "3")):
        code, doc = document(path, *extra)
        assert (code, doc["verdict"], doc["input"]["quarantined"]) == (1, "fail", 0)
    assert [(f["grade"], f["seq"], f["worker"], f["reporter"], f["step_id"]) for f in doc["findings"]] == [
        ("stale_commit", 3, "unknown", None, None), ("double_commit", 4, "w2", "sink", None)]
    malformed = [(d["detail"].split('"')[1], d["file"], d["line"], d["numbers"]) for d in doc["diagnostics"]]
    assert malformed == [("reporter", str(path), 3, {"lines": 1, "lost": 0}),
                         ("step_id", str(path), 3, {"lines": 1, "lost": 0}),
                         ("worker", str(path), 3, {"lines": 1, "lost": 0}),
                         ("ts", str(path), 4, {"lines": 1, "lost": 0})]
    text = path.read_text()
    assert '"pid": 4242' in text and "4242" not in json.dumps(doc)  # never stored as text


def test_two_spellings_that_disagree_are_ambiguous_whatever_the_vocabulary_order(tmp_path):
    path = FIXTURES / "mapped_spellings_disagree.jsonl"
    swapped = tmp_path / "swapped.map.toml"
    swapped.write_text('[fields]\nlease_token = "epoch"\nfence = "epoch"\n')
    results = []
    for vocabulary in (vocabulary_of(path), swapped):
        with audit([path], vocabulary=vocabulary) as r:
            results.append(([(f.grade.value, f.seq) for f in r.findings], [q.line for q in r.input.quarantine]))
    assert results[0] == results[1] == ([("stale_attempt", 5)], [3, 4])


def test_a_log_without_seq_never_shows_an_invented_seq():
    path = FIXTURES / "no_seq_positions_never_seqs.jsonl"
    code, doc = document(path, "--fail-on", "stale_activity")
    assert (code, doc["ordering"]) == (1, "observed")
    rej, act = doc["findings"]
    assert (rej["grade"], rej["seq"], rej["position"], rej["transition_seq"], rej["transition_position"],
            rej["receipt_seq"], rej["receipt_position"]) == ("rejected_attempt", None, 4, None, 3, None, 5)
    assert (act["grade"], act["seq"], act["position"]) == ("stale_activity", None, 6)
    (inc,) = doc["incidents"]
    assert (inc["transition_seq"], inc["transition_position"], inc["window_first_seq"], inc["window_first_position"],
            inc["window_last_seq"], inc["window_last_position"], inc["confidence"]) == (None, 3, None, 4, None, 6, "low")
    assert inc["witness"] == ("epoch 18 (beta) was acquired at position 3; epoch 17 (alpha) then attempted "
                              "release-index/2026-07-26 at position 4 (no seq): the sink rejected it at position 5: "
                              "the fence held.")
    with audit([path]) as r:
        shown = run_cli("audit", str(path)).stdout.decode() + render_markdown(r)
    assert "takeover at position 3" in shown and "position 4-6" in shown
    assert "seq 3" not in shown and "seq 4" not in shown and "seq 5" not in shown


def test_authority_fields_never_quarantine_and_a_revocation_without_id_revokes_all():
    code, doc = document(FIXTURES / "authority_fields_never_quarantine.jsonl")
    assert (code, doc["input"]["quarantined"]) == (1, 0)
    a, b = doc["findings"]
    assert (a["workflow_key"], a["grade"], a["reasons"], a["authority_id"], a["since_seq"]) == (
        "refund/a", "unauthorized_commit", ["revoked"], None, 4)
    assert (b["workflow_key"], b["reasons"], b["authority_id"], b["since_seq"]) == ("refund/b", ["revoked"], "mandate-7", 4)
    assert doc["incidents"][0]["witness"].startswith("the key's unnamed mandate was revoked at seq 4;")


def test_a_revalidation_without_a_readable_decision_decides_nothing():
    code, doc = document(FIXTURES / "revalidation_without_decision.jsonl")
    assert (code, doc["verdict"], doc["evidence_lost"]["malformed"]) == (3, "incomplete", 2)
    (f,) = doc["findings"]
    assert (f["grade"], f["reasons"]) == ("rejected_attempt", ["unrevalidated_resume"])  # never a continue


def test_outcome_verified_and_compensation_name_an_effect():
    code, doc = document(FIXTURES / "effect_name_required.jsonl")
    assert (code, doc["verdict"], doc["input"]["quarantined"]) == (3, "incomplete", 2)


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.jsonl")))
def test_every_event_has_a_position_and_no_seq_is_invented(name):
    path = FIXTURES / name
    with audit([path], vocabulary=vocabulary_of(path)) as r:
        doc = json.loads(render_json(r))
        positions = [e.position for e in r.store.iter_events()]
        assert None not in positions and len(set(positions)) == len(positions)
        observed = {w["workflow_key"] for w in doc["workflows"] if w["ordering"] == "observed"}
        live = detect_events(iter_events(r.store))
    assert [f.to_dict() for f in live] == doc["findings"]
    for f in doc["findings"]:
        assert f["position"] is not None
        if f["workflow_key"] in observed:
            assert (f["seq"], f["transition_seq"], f["receipt_seq"], f["since_seq"]) == (None, None, None, None)
    for i in doc["incidents"]:
        assert i["window_first_position"] is not None and i["window_last_position"] is not None
        if i["workflow_key"] in observed:
            assert (i["transition_seq"], i["window_first_seq"], i["window_last_seq"]) == (None, None, None)
            assert " seq " not in i["witness"].replace("(no seq)", "")


def test_lease_health_never_shows_an_invented_seq(tmp_path):
    """Lease health's diagnostics and takeovers carry seq only where the key is ordered by seq,
    and always the global position of the event they point at."""
    lines = (FIXTURES / "lease_timing_35s_vs_90s.jsonl").read_text().splitlines()
    noseq = write_jsonl(tmp_path / "noseq.jsonl", [{k: v for k, v in json.loads(x).items() if k != "seq"}
                                                   for x in lines])
    with audit([noseq]) as r, audit([FIXTURES / "lease_timing_35s_vs_90s.jsonl"]) as s:
        for result, observed in ((r, True), (s, False)):
            lease = [d for d in result.diagnostics if d.kind.value in ("lease_timing_risk", "late_extension")]
            assert lease and all(d.position is not None for d in lease)
            assert all((d.seq is None) == observed for d in lease)
            takeovers = [t for k in result.lease_health.keys for t in k.takeovers]
            assert all((t.seq is None) == observed and t.position is not None for t in takeovers)
        assert [d.position for d in r.diagnostics] == [d.position for d in s.diagnostics]
