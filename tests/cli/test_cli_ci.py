"""The console door for CI and for the operator at 02:00, in real subprocesses: the incomplete
verdict, JUnit and Markdown outputs, filters, arguments checked before any work, and the words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from ..conftest import FIXTURES, ROOT, run_cli

SEED = str(FIXTURES / "seed_split_brain.jsonl")
EXPECTED = str(FIXTURES / "seed_split_brain.expected.json")
GRADES = ("stale_activity, rejected_attempt, compensated, stale_attempt, unauthorized_attempt, stale_commit, "
          "unauthorized_commit, double_commit")


def out(p) -> list[str]:
    return p.stdout.decode().splitlines()


# The incomplete verdict.


def test_lost_lines_make_the_verdict_incomplete_and_are_said_first(lossy):
    p = run_cli("audit", str(lossy))
    assert p.returncode == 3, p.stderr
    assert out(p)[:4] == [
        "split-brain audit: INCOMPLETE  (no finding at or above stale_attempt, but 1 line lost: "
        "a pass cannot be claimed)",
        "lost: 1 quarantined line, 0 event_id conflicts (more than --allow-quarantined 0):",
        f'  {lossy}:10: "epoch" is "seventeen", expected an integer in int64 range',
        "input: 10 lines read = 9 events + 0 duplicates + 1 quarantined; 1 file; ordering authoritative",
    ]


def test_allow_quarantined_accepts_that_many_lost_lines(lossy):
    p = run_cli("audit", str(lossy), "--allow-quarantined", "1")
    assert p.returncode == 0
    assert out(p)[:2] == [
        "split-brain audit: PASS  (2 incidents, 0 findings at or above stale_attempt)",
        "lost: 1 quarantined line, 0 event_id conflicts (within --allow-quarantined 1):",
    ]


def test_expect_with_lost_lines_is_never_pass(lossy, tmp_path):
    expected = str(FIXTURES / "rejected_attempt.expected.json")
    p = run_cli("audit", str(lossy), "--expect", expected, "--quiet")
    assert (p.returncode, p.stdout, p.stderr) == (3, b"", b"")
    p = run_cli("audit", str(lossy), "--expect", expected)
    assert out(p)[-4:] == [
        "lost: 1 quarantined line, 0 event_id conflicts (more than --allow-quarantined 0):",
        f'  {lossy}:10: "epoch" is "seventeen", expected an integer in int64 range',
        f"--expect {expected} decides the exit code (3):",
        "INCOMPLETE: all 2 expected findings found, nothing else, but 1 line lost: a pass cannot be claimed",
    ]
    wrong = tmp_path / "wrong.json"
    wrong.write_text('{"findings": [["rejected_attempt", "payments/capture/inv-7", 3]]}')
    p = run_cli("audit", str(lossy), "--expect", str(wrong))
    assert p.returncode == 1
    assert out(p)[-2:] == [f"FAIL: findings differ from {wrong}",
                           "  unexpected: rejected_attempt payments/capture/inv-8 seq 4"]
    p = run_cli("audit", str(lossy), "--expect", expected, "--allow-quarantined", "1")
    assert p.returncode == 0 and out(p)[-1] == "PASS: all 2 expected findings found, nothing else"


# JUnit and Markdown.


def test_report_has_expect_junit_and_markdown(tmp_path):
    db, xml, md = tmp_path / "a.duckdb", tmp_path / "a.xml", tmp_path / "a.md"
    assert run_cli("ingest", SEED, "--db", str(db), "-q").returncode == 0
    p = run_cli("report", "--db", str(db), "--expect", EXPECTED, "--junit", str(xml), "--markdown", str(md))
    assert p.returncode == 0, p.stderr
    assert out(p)[-1] == "PASS: all 4 expected findings found, nothing else"
    assert ET.parse(xml).getroot().get("failures") == "1"
    assert md.read_text().startswith("# Split-brain audit: FAIL\n")


# Filters: detection over everything, reporting of the scope.


def test_key_globs_and_keys_from(tmp_path):
    p = run_cli("audit", SEED, "--key", "reports/*", "--key", "checkout/*")
    assert p.returncode == 0
    assert out(p)[:5] == [
        "split-brain audit: PASS  (0 incidents, 0 findings at or above stale_attempt)",
        "input: 16 lines read = 16 events + 0 duplicates + 0 quarantined; 1 file; ordering authoritative",
        "scope: keys reports/*, checkout/* (detection ran over every event; only what is in scope is reported)",
        "workflows: 2, acquisitions 3, handovers 1 (1 clean)",
        "findings: none",
    ]
    keys = tmp_path / "keys.txt"
    keys.write_text("# the ledger only\nledger/export/*\n\n")
    p = run_cli("audit", SEED, "--keys-from", str(keys), "--json", "-")
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and doc["scope"] == {"keys": ["ledger/export/*"], "since": None, "until": None}
    assert [w["workflow_key"] for w in doc["workflows"]] == ["ledger/export/2026-07-26"]


@pytest.mark.parametrize("since, until, seqs", [
    ("7", None, [7, 8, 9]),  # the takeover at seq 5 is before the window: 7 and 8 are still stale
    ("6", "7", [6, 7]),
    ("2026-07-26T02:08:00Z", None, [8, 9]),
    (None, "2026-07-26T02:06:30+00:00", [6]),
])
def test_since_until_by_seq_or_ts(since, until, seqs):
    args = ["--since", since] if since else []
    args += ["--until", until] if until else []
    doc = json.loads(run_cli("audit", SEED, *args, "--json", "-").stdout)
    assert [f["seq"] for f in doc["findings"]] == seqs
    assert doc["scope"] == {"keys": [], "since": since, "until": until}


def test_python_api_takes_the_same_scope_and_allowance(lossy):
    from auditor import Comparison, Scope, Verdict, audit, compare_expected

    result = audit([SEED], scope=Scope.parse(since="8"))
    assert [(f.grade.value, f.seq) for f in result.findings] == [("stale_commit", 8), ("double_commit", 9)]
    lost = audit([lossy])
    assert (lost.verdict, lost.exit_code) == (Verdict.INCOMPLETE, 3)
    assert audit([lossy], allow_quarantined=1).verdict is Verdict.PASS
    assert compare_expected(lost, [("rejected_attempt", "payments/capture/inv-7", 3)]) == Comparison(
        source="the expected findings", expected=1, missing=(),
        unexpected=(("rejected_attempt", "payments/capture/inv-8", 4),), lost=1, allow_quarantined=0)


# Arguments: checked before any work, one Error line each.


@pytest.mark.parametrize("args, error", [
    (["--fail-on", "foo"], f"Error: --fail-on 'foo' is not a grade; use one of {GRADES}"),
    (["--format", "xml"], "Error: --format 'xml' is not a format; use one of auto, jsonl, csv, parquet, logfmt, otlp"),
    (["--since", "yesterday"], "Error: --since 'yesterday' is neither a seq (an integer) nor an RFC 3339 "
                               "time (e.g. 2026-07-26T10:00:00Z)"),
    (["--since", "9", "--until", "3"], "Error: --since 9 is after --until 3"),
    (["--expect", "{tmp}/nope.json"], "Error: {tmp}/nope.json: cannot read the expected findings "
                                      "(No such file or directory)"),
    (["--keys-from", "{tmp}/nope.txt"], "Error: --keys-from {tmp}/nope.txt: cannot read it (No such file "
                                        "or directory)"),
    (["--html", "{tmp}/missing/r.html"], "Error: --html {tmp}/missing/r.html: the directory {tmp}/missing "
                                         "does not exist; create it first"),
    (["--markdown", "{tmp}/missing/r.md"], "Error: --markdown {tmp}/missing/r.md: the directory "
                                           "{tmp}/missing does not exist; create it first"),
    (["--junit", SEED], f"Error: --junit {SEED} is also an input; write the output somewhere else"),
    (["--json", "{tmp}/x", "--html", "{tmp}/x"], "Error: --html {tmp}/x is also the --json file; give "
                                                 "each its own file"),
])
def test_bad_arguments_stop_before_any_work(tmp_path, args, error):
    db = tmp_path / "store.duckdb"
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    p = run_cli("audit", SEED, "--db", str(db), *args)
    assert (p.returncode, p.stderr.decode().strip(), p.stdout) == (2, error.replace("{tmp}", str(tmp_path)), b"")
    assert not db.exists()  # nothing was read or stored


def test_a_bad_expect_file_says_the_format(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"findings": [["stale_commit", "k"]]}')
    p = run_cli("report", "--db", str(tmp_path / "none.duckdb"), "--expect", str(bad))
    assert (p.returncode, p.stderr.decode().strip()) == (2, (
        f'Error: {bad}: cannot read the expected findings (each finding is [grade, workflow_key, seq], '
        'not ["stale_commit", "k"]); expected {"findings": [["stale_activity", "workflow/key", 6], ...]}'))


# CI conventions.


def test_version_help_and_quiet():
    from importlib.metadata import version

    for flag in ("--version", "-V"):
        p = run_cli(flag)
        assert (p.returncode, p.stdout.decode()) == (0, f"auditor {version('split-brain-auditor')}\n")
    p = run_cli("audit", "-h")
    help_text = p.stdout.decode()
    assert p.returncode == 0 and help_text.startswith("Usage: auditor audit [OPTIONS] PATH...\n")
    assert "{paths}" not in help_text and "<list[str]>" not in help_text and "--fail-on GRADE" in help_text
    p = run_cli("audit", SEED, "--quiet")
    assert (p.returncode, p.stdout, p.stderr) == (1, b"", b"")


def test_shell_completion_offers_grades():
    env = {**os.environ, "_AUDITOR_COMPLETE": "complete_bash", "COMP_WORDS": "auditor audit --fail-on stale_c",
           "COMP_CWORD": "3"}
    p = subprocess.run([sys.executable, "-m", "auditor"], env=env, cwd=ROOT, capture_output=True, timeout=60)
    assert (p.returncode, p.stdout.decode().split()) == (0, ["stale_commit"])
    assert b"--show-completion" in run_cli("--help").stdout


# The words.


def test_ingest_words(tmp_path):
    p = run_cli("ingest", SEED, "--db", str(tmp_path / "s.duckdb"))
    assert out(p)[-1] == f"{tmp_path / 's.duckdb'}: 16 events from 1 file"


def test_simulate_checks_its_mode_and_output_directory_first(tmp_path):
    p = run_cli("simulate", "--mode", "sloppy", "--out", str(tmp_path / "x.jsonl"))
    assert (p.returncode, p.stderr.decode().strip()) == (
        2, "Error: --mode 'sloppy' is not a mode; use one of fenced, unfenced, key-includes-epoch")
    p = run_cli("simulate", "--out", str(tmp_path / "no" / "x.jsonl"))
    assert (p.returncode, p.stderr.decode().strip()) == (
        2, f"Error: --out {tmp_path / 'no' / 'x.jsonl'}: the directory {tmp_path / 'no'} does not exist; "
           "create it first")


def test_a_key_that_matches_nothing_is_an_error_not_a_pass():
    p = run_cli("audit", SEED, "--key", "ledger/exprot/*")
    assert (p.returncode, p.stderr.decode().strip()) == (2, (
        "Error: no workflow key matches ledger/exprot/*; the input has 3 workflow keys (e.g. "
        "checkout/sync/cart-881, ledger/export/2026-07-26, reports/index/2026-07-26)"))


def test_event_id_conflicts_count_against_the_verdict_whatever_the_scope():
    import dataclasses

    from auditor import Scope, Verdict, audit
    from auditor.core.model import Diagnostic, DiagnosticKind
    from auditor.explain.result import narrow

    clean = audit([str(FIXTURES / "clean_handover.jsonl")])
    conflict = Diagnostic("d-1", DiagnosticKind.EVENT_ID_CONFLICT, "elsewhere", 4, 1, "one id, two contents")
    result = dataclasses.replace(clean, diagnostics=[conflict])
    assert (result.lost, result.verdict) == (1, Verdict.INCOMPLETE)
    key = clean.workflows[0].workflow_key
    narrowed = narrow(result, Scope.parse(keys=[key], since="1000"))
    assert (narrowed.diagnostics, narrowed.verdict) == ([conflict], Verdict.INCOMPLETE)
