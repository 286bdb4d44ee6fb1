"""SPEC revision 3.1 at the console door, in real subprocesses, and the Python API beside it:
``--allow-quarantined`` never accepts an unplaced event, ``--allow-unplaced N`` does (item 1 of
issue 42), and ``--expect`` compares multisets (item 2)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from auditor import Verdict, audit, compare_expected, report

from ..conftest import FIXTURES, run_cli

UNPLACED = str(FIXTURES / "unplaced_displaced_commit_needs_allow_unplaced.jsonl")
NULLS = str(FIXTURES / "expect_null_seqs_are_a_multiset.jsonl")
LOST_ITEM = (f"  {UNPLACED}:4: effect_committed of ledger/export has no seq in a key ordered by seq: unplaced, "
             "never judged; give it the seq of its revision")


def lines(p) -> list[str]:
    return p.stdout.decode().splitlines()


@pytest.mark.parametrize("options, code, verdict, head", [
    ([], 3, "INCOMPLETE", "lost: 0 quarantined lines, 0 event_id conflicts (within --allow-quarantined 0), "
                          "1 unplaced event (more than --allow-unplaced 0):"),
    (["--allow-quarantined", "5"], 3, "INCOMPLETE",
     "lost: 0 quarantined lines, 0 event_id conflicts (within --allow-quarantined 5), "
     "1 unplaced event (more than --allow-unplaced 0):"),
    (["--allow-unplaced", "1"], 0, "PASS",
     "lost: 0 quarantined lines, 0 event_id conflicts (within --allow-quarantined 0), "
     "1 unplaced event (within --allow-unplaced 1):"),
    (["--allow-unplaced", "1", "--allow-quarantined", "2"], 0, "PASS",
     "lost: 0 quarantined lines, 0 event_id conflicts (within --allow-quarantined 2), "
     "1 unplaced event (within --allow-unplaced 1):"),
])
def test_an_unplaced_displaced_commit_is_accepted_only_by_allow_unplaced(options, code, verdict, head):
    p = run_cli("audit", UNPLACED, *options)
    assert p.returncode == code, p.stderr
    out = lines(p)
    assert out[0].startswith(f"split-brain audit: {verdict}")
    assert out[1:3] == [head, LOST_ITEM]


def test_allow_quarantined_still_counts_lines_apart_from_unplaced_events(tmp_path):
    """A quarantined line beside the unplaced commit: each allowance covers its own cause."""
    path = tmp_path / "both.jsonl"
    path.write_text(open(UNPLACED).read() + '{"seq": 9, "workflow_key": "k", "kind": "progress", "epoch": "x"}\n')
    got = {opts: run_cli("audit", str(path), "-q", *opts.split()).returncode for opts in (
        "--allow-unplaced 1", "--allow-quarantined 1", "--allow-quarantined 2",
        "--allow-quarantined 1 --allow-unplaced 1")}
    assert got == {"--allow-unplaced 1": 3, "--allow-quarantined 1": 3, "--allow-quarantined 2": 3,
                   "--allow-quarantined 1 --allow-unplaced 1": 0}


def test_the_json_junit_and_markdown_name_both_allowances(tmp_path):
    doc, junit, md = tmp_path / "a.json", tmp_path / "a.xml", tmp_path / "a.md"
    p = run_cli("audit", UNPLACED, "--allow-quarantined", "5", "--json", str(doc), "--junit", str(junit),
                "--markdown", str(md))
    assert p.returncode == 3
    lost = json.loads(doc.read_text())["evidence_lost"]
    assert {k: v for k, v in lost.items() if k != "first"} == {
        "quarantined": 0, "event_id_conflicts": 0, "unplaced": 1, "malformed": 0, "allow_quarantined": 5,
        "allow_unplaced": 0}
    suite = ET.parse(junit).getroot().find("testsuite")
    props = {e.get("name"): e.get("value") for e in suite.iter("property")}
    assert (props["allow_quarantined"], props["allow_unplaced"], props["lost"]) == ("5", "0", "1")
    failure = suite.find("testcase[@name='evidence']/failure")
    assert failure.get("message") == ("1 line lost, 1 unplaced event, more than --allow-unplaced 0: "
                                      "a pass cannot be claimed")
    assert ("**Evidence lost**: 0 quarantined lines, 0 event_id conflicts (within --allow-quarantined 5), "
            "1 unplaced event (more than --allow-unplaced 0).") in md.read_text().splitlines()


def test_report_over_a_store_takes_allow_unplaced(tmp_path):
    db = str(tmp_path / "s.duckdb")
    assert run_cli("ingest", UNPLACED, "--db", db).returncode == 0
    assert run_cli("report", "--db", db, "-q", "--allow-quarantined", "3").returncode == 3
    assert run_cli("report", "--db", db, "-q", "--allow-unplaced", "1").returncode == 0
    with report(db, allow_unplaced=1) as r:
        assert (r.verdict, r.allow_unplaced, r.unplaced_lost) == (Verdict.PASS, 1, 1)


def test_the_python_api_keeps_the_allowances_apart():
    with audit(UNPLACED, allow_quarantined=5) as r:
        assert (r.verdict, r.exit_code, r.lost, r.lost_lines) == (Verdict.INCOMPLETE, 3, 1, 0)
    with audit(UNPLACED, allow_unplaced=1) as r:
        assert r.verdict is Verdict.PASS
        assert r.to_dict()["evidence_lost"]["allow_unplaced"] == 1
    with audit(UNPLACED, allow_unplaced=1) as r:  # --expect too: a match over an accepted unplaced event
        assert compare_expected(r, []).verdict is Verdict.PASS
    with audit(UNPLACED, allow_quarantined=5) as r:
        assert compare_expected(r, []).verdict is Verdict.INCOMPLETE


def test_a_document_without_unplaced_evidence_has_no_allow_unplaced_key():
    """Where revision 3.1 does not apply, the document keeps its bytes."""
    with audit(FIXTURES / "seed_split_brain.jsonl") as r:
        assert list(r.to_dict()["evidence_lost"]) == ["quarantined", "event_id_conflicts", "unplaced", "malformed",
                                                      "allow_quarantined", "first"]


# --expect compares multisets (SPEC section 4).

def test_expect_counts_findings_whose_seq_is_null(tmp_path):
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"findings": [["stale_activity", "agent/run-9", None]]}))
    p = run_cli("audit", NULLS, "--expect", str(one))
    assert p.returncode == 1
    assert lines(p)[-2:] == [f"FAIL: findings differ from {one}", "  unexpected: stale_activity agent/run-9 seq null"]
    three = tmp_path / "three.json"
    three.write_text(json.dumps({"findings": [["stale_activity", "agent/run-9", None]] * 3}))
    p = run_cli("audit", NULLS, "--expect", str(three))
    assert (p.returncode, lines(p)[-2:]) == (1, [f"FAIL: findings differ from {three}",
                                                 "  missing:    stale_activity agent/run-9 seq null"])
    two = FIXTURES / "expect_null_seqs_are_a_multiset.expected.json"
    p = run_cli("audit", NULLS, "--expect", str(two))
    assert (p.returncode, lines(p)[-1]) == (0, "PASS: all 2 expected findings found, nothing else")


def test_compare_expected_counts_rows_with_a_seq_too():
    with audit(FIXTURES / "seed_split_brain.jsonl") as r:
        twice = [("stale_commit", "ledger/export/2026-07-26", 8)] * 2
        cmp = compare_expected(r, twice)
        assert cmp.expected == 2
        assert ("stale_commit", "ledger/export/2026-07-26", 8) in cmp.missing
        assert len(cmp.unexpected) == 3


# Item 9: the HTML timeline of a key ordered by observation says position, never seq.

def test_the_timeline_of_an_observation_ordered_key_says_position():
    import re

    from auditor.render.html import render_html

    with audit(FIXTURES / "no_seq_positions_never_seqs.jsonl") as r:
        html = render_html(r)
    assert re.findall(r'class="axis-label"[^>]*>([^<]*)<', html) == ["position"]
    assert "events in observation order (no seq: by position)" in html
    assert "in authoritative order" not in html
    with audit(FIXTURES / "seed_split_brain.jsonl") as r:
        html = render_html(r)
    assert set(re.findall(r'class="axis-label"[^>]*>([^<]*)<', html)) == {"seq"}
    assert "in observation order" not in html


REJECTED = str(FIXTURES / "unplaced_rejection_named_first.jsonl")
CULPRIT = (f"{REJECTED}:27: effect_attempted of zk/leader has no seq in a key ordered by seq: unplaced, "
           "never judged; give it the seq of its revision")


def test_an_incomplete_verdict_names_its_culprit_first_in_every_renderer(tmp_path):
    """Item 7 of issue 42: 24 harmless seq-less progress lines, then one unplaced rejected attempt.
    The culprit is past the first 20 unplaced events, yet the JSON's first, the terminal, the
    Markdown and the HTML lead with it, and list no progress line."""
    doc, md, html = tmp_path / "a.json", tmp_path / "a.md", tmp_path / "a.html"
    p = run_cli("audit", REJECTED, "--json", str(doc), "--markdown", str(md), "--html", str(html))
    assert p.returncode == 3, p.stderr
    out = lines(p)
    assert out[1:3] == ["lost: 0 quarantined lines, 0 event_id conflicts (within --allow-quarantined 0), "
                        "1 unplaced event (more than --allow-unplaced 0):", "  " + CULPRIT]
    assert out[3].startswith("input: ")
    lost = json.loads(doc.read_text())["evidence_lost"]
    assert (lost["unplaced"], lost["first"]) == (1, [{"file": REJECTED, "line": 27, "reason": CULPRIT.split(": ", 1)[1]}])
    bullets = [ln for ln in md.read_text().splitlines() if ln.startswith("- ")]
    assert bullets[0] == "- " + CULPRIT.replace("_", "\\_")
    assert not any("progress" in b for b in bullets)
    page = html.read_text()
    table = page[page.index("<caption>Evidence lost"):page.index("</table>", page.index("<caption>Evidence lost"))]
    assert table.count("<tr><td>") == 1 and '<td class="num">27</td>' in table


def test_blocking_causes_lead_and_what_is_within_its_allowance_follows(tmp_path):
    """A quarantined line within --allow-quarantined 1 and the blocking unplaced attempt: the
    attempt leads evidence_lost.first; when both block, each cause's first line leads in order."""
    path = tmp_path / "both.jsonl"
    path.write_text(open(REJECTED).read() + '{"seq": 9, "workflow_key": "k", "kind": "progress", "epoch": "x"}\n')
    with audit([str(path)], allow_quarantined=1) as one, audit([str(path)]) as none:
        assert one.verdict is none.verdict is Verdict.INCOMPLETE
        assert [(e["line"], e["reason"].split(" ")[0]) for e in one.evidence_lost()["first"]] == [
            (27, "effect_attempted"), (29, none.input.quarantine[0].reason.split(" ")[0])]
        assert [e["line"] for e in none.evidence_lost()["first"]] == [29, 27]
    with audit([str(path)], allow_unplaced=1) as only_lines:  # the attempt is within its allowance
        assert [e["line"] for e in only_lines.evidence_lost()["first"]] == [29]
