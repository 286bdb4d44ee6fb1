"""Issue 45: with --expect, the header's verdict (the audit's) and the footer's (the comparison's)
must not contradict each other: both say plainly which one the exit code reports."""

from __future__ import annotations

import subprocess
import sys

from ..conftest import FIXTURES, ROOT

SEED = str(FIXTURES / "seed_split_brain.jsonl")
EXPECTED = str(FIXTURES / "seed_split_brain.expected.json")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auditor", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_a_failing_audit_that_matches_its_expectation_says_the_exit_code_is_the_comparisons():
    p = _run("audit", SEED, "--expect", EXPECTED)
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and p.stderr == ""
    assert lines[0] == ("split-brain audit: FAIL  (1 incident, 3 findings at or above stale_attempt); "
                        f"the exit code reports --expect {EXPECTED}, below")
    assert lines[-2:] == [f"--expect {EXPECTED} decides the exit code (0), not the audit's FAIL above:",
                          "PASS: all 4 expected findings found, nothing else"]


def test_a_differing_expectation_names_its_exit_code(tmp_path):
    wrong = tmp_path / "none.json"
    wrong.write_text('{"findings": []}')
    p = _run("audit", SEED, "--expect", str(wrong))
    lines = p.stdout.splitlines()
    assert p.returncode == 1
    i = lines.index(f"--expect {wrong} decides the exit code (1):")  # the audit's FAIL agrees
    assert lines[i + 1:i + 3] == [f"FAIL: findings differ from {wrong}",
                                  "  unexpected: stale_activity ledger/export/2026-07-26 seq 6"]


def test_a_pass_that_the_expectation_fails_says_so():
    p = _run("audit", str(FIXTURES / "clean_handover.jsonl"), "--expect", EXPECTED)
    lines = p.stdout.splitlines()
    assert p.returncode == 1
    assert lines[0].startswith("split-brain audit: PASS  (0 incidents") and lines[0].endswith(
        f"; the exit code reports --expect {EXPECTED}, below")
    assert f"--expect {EXPECTED} decides the exit code (1), not the audit's PASS above:" in lines


def test_without_expect_nothing_changes():
    p = _run("audit", SEED)
    assert p.stdout.splitlines()[0] == "split-brain audit: FAIL  (1 incident, 3 findings at or above stale_attempt)"
    assert "--expect" not in p.stdout
