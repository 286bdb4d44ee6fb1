"""The console door in real subprocesses: exit codes, exact Error lines, --expect, --db round trips."""

from __future__ import annotations

import json

from ..conftest import FIXTURES, run_cli

SEED = str(FIXTURES / "seed_split_brain.jsonl")
EXPECTED = str(FIXTURES / "seed_split_brain.expected.json")


def test_audit_seed_exits_1_and_prints_the_incident():
    p = run_cli("audit", SEED)
    out = p.stdout.decode()
    assert p.returncode == 1, p.stderr
    assert out.splitlines()[0].startswith("split-brain audit: FAIL")
    assert ("epoch 18 (beta) was acquired at seq 5; epoch 17 (alpha) then committed "
            "release-index/2026-07-26 at seq 8: a displaced owner changed the outside world.") in out
    assert "input: 16 lines read = 16 events + 0 duplicates + 0 quarantined" in out


def test_expect_pass_and_fail(tmp_path):
    p = run_cli("audit", SEED, "--expect", EXPECTED)
    assert p.returncode == 0
    assert "PASS: all 4 expected findings found, nothing else" in p.stdout.decode()
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"findings": [["stale_activity", "ledger/export/2026-07-26", 6],
                                              ["stale_commit", "ledger/export/2026-07-26", 10]]}))
    p = run_cli("audit", SEED, "--expect", str(wrong))
    out = p.stdout.decode()
    assert p.returncode == 1
    assert "FAIL: findings differ from" in out
    assert "  missing:    stale_commit ledger/export/2026-07-26 seq 10" in out
    assert "  unexpected: stale_attempt ledger/export/2026-07-26 seq 7" in out


def test_json_to_stdout_is_deterministic_and_summary_goes_to_stderr():
    a, b = run_cli("audit", SEED, "--json", "-"), run_cli("audit", SEED, "--json", "-")
    assert a.stdout == b.stdout
    doc = json.loads(a.stdout)
    assert doc["schema"] == "split-brain-audit/3" and doc["verdict"] == "fail"
    assert [(f["grade"], f["seq"]) for f in doc["findings"]] == [
        ("stale_activity", 6), ("stale_attempt", 7), ("stale_commit", 8), ("double_commit", 9)]
    assert doc["summary"]["clean_handovers"] == 1
    assert b"split-brain audit: FAIL" in a.stderr


def test_fail_on_and_clean_input_exit_0():
    assert run_cli("audit", SEED, "--fail-on", "double_commit").returncode == 1
    assert run_cli("audit", str(FIXTURES / "clean_handover.jsonl")).returncode == 0
    assert run_cli("audit", str(FIXTURES / "rejected_attempt.jsonl")).returncode == 0


def test_errors_exit_2_with_one_error_line(tmp_path):
    p = run_cli("audit", str(tmp_path / "missing.jsonl"))
    assert p.returncode == 2
    assert p.stderr.decode().strip() == f"Error: {tmp_path / 'missing.jsonl'}: no such file or directory; check the path"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    p = run_cli("audit", str(empty))
    assert (p.returncode, p.stderr.decode().strip()) == (
        2, "Error: no event found in the input; check the path and the format")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"seq": 1, "workflow_key": "k", "kind": "progress", "epoch": "seventeen"}\n')
    p = run_cli("audit", str(bad))
    assert (p.returncode, p.stderr.decode().strip().splitlines()[0]) == (
        2, f'Error: every line was quarantined (1 of 1); first: {bad}:1: "epoch" is "seventeen", '
           "expected an integer in int64 range")
    p = run_cli("audit", SEED, "--fail-on", "catastrophe")
    assert p.returncode == 2 and b"catastrophe" in p.stderr
    assert b"Traceback" not in p.stderr


def test_stdin():
    with open(SEED, "rb") as f:
        p = run_cli("audit", "-", "--expect", EXPECTED, input=f.read())
    assert p.returncode == 0 and b"PASS" in p.stdout


def test_ingest_is_idempotent_and_report_rereads_the_store(tmp_path):
    db = str(tmp_path / "audit.duckdb")
    lines = open(SEED).read().splitlines(keepends=True)
    part1, part2 = tmp_path / "part1.jsonl", tmp_path / "part2.jsonl"
    part1.write_text("".join(lines[:7]))
    part2.write_text("".join(lines[7:]))
    p = run_cli("ingest", str(part1), "--db", db)
    assert p.returncode == 0, p.stderr
    assert f"{part1}: 7 lines read = 7 events + 0 duplicates + 0 quarantined" in p.stdout.decode()
    p = run_cli("ingest", str(part1), "--db", db)
    assert f"{part1}: already ingested, nothing added" in p.stdout.decode()
    assert run_cli("report", "--db", db, "--fail-on", "double_commit").returncode == 0
    assert run_cli("ingest", str(part2), "--db", db).returncode == 0
    p = run_cli("report", "--db", db, "--json", "-")
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    assert doc["input"]["events"] == 16 and len(doc["findings"]) == 4
    direct = json.loads(run_cli("audit", SEED, "--json", "-").stdout)
    assert [f["id"] for f in doc["findings"]] == [f["id"] for f in direct["findings"]]
    p = run_cli("report", "--db", str(tmp_path / "nope.duckdb"))
    assert p.returncode == 2 and p.stderr.decode().startswith("Error: ")


def test_python_dash_m_and_help():
    p = run_cli("--help")
    assert p.returncode == 0 and b"audit" in p.stdout and b"report" in p.stdout


def test_simulate_then_audit_passes_its_own_ground_truth(tmp_path):
    log, truth = tmp_path / "sim.jsonl", tmp_path / "sim.expected.json"
    p = run_cli("simulate", "--runs", "40", "--seed", "3", "--mode", "unfenced", "--out", str(log),
                "--expect-out", str(truth))
    assert p.returncode == 0, p.stderr
    assert "injected interleavings: commit_before_checkpoint 10, slow_model_call 10, late_ack 10, " \
           "late_checkpoint 10" in p.stdout.decode()
    p = run_cli("audit", str(log), "--expect", str(truth))
    assert p.returncode == 0 and b"PASS" in p.stdout
    p = run_cli("simulate", "--mode", "sloppy", "--out", str(log))
    assert p.returncode == 2 and b"sloppy" in p.stderr
