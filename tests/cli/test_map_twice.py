"""Issue 45: a second --map silently replaced the first. Now a run reads one vocabulary: a second,
different one is refused before any input is read, naming both files and the way to audit logs
that need different vocabularies (ingest each with its own into one --db, then report)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ..conftest import FIXTURES, ROOT

JOB, ECS = FIXTURES / "job_log_mapped_vocabulary", FIXTURES / "ecs_event_action_and_labels"


def _run(*args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auditor", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, **kw)


def _refusal(a, b) -> str:
    return (f"Error: --map is given 2 times ({a}, {b}); a run reads one vocabulary and never merges two. "
            "Put the entries in one file, or ingest each log with its own: auditor ingest LOG_A --db "
            "audit.duckdb --map A.toml; auditor ingest LOG_B --db audit.duckdb --map B.toml; auditor report "
            "--db audit.duckdb\n")


@pytest.mark.parametrize("command", [["audit", f"{JOB}.jsonl"], ["ingest", f"{JOB}.jsonl", "--db", "{db}"],
                                     ["report", "--db", "{db}"], ["serve", "--port", "0"]])
def test_a_second_vocabulary_is_refused_before_any_work(command, tmp_path):
    db = tmp_path / "store.duckdb"
    args = [a.replace("{db}", str(db)) for a in command]
    a, b = f"{JOB}.map.toml", f"{ECS}.map.toml"
    p = _run(*args, "--map", a, "--map", b)
    assert (p.returncode, p.stdout, p.stderr) == (2, "", _refusal(a, b))
    assert not db.exists()  # nothing was written


def test_the_same_file_twice_is_one_vocabulary():
    vocabulary = f"{JOB}.map.toml"
    p = _run("audit", f"{JOB}.jsonl", "--map", vocabulary, "--map", vocabulary, "--json", "-")
    assert p.returncode == 1 and json.loads(p.stdout)["input"]["quarantined"] == 0


def _triples(doc: dict) -> set:
    return {(f["grade"], f["workflow_key"], f["seq"]) for f in doc["findings"]}


def test_logs_that_need_different_vocabularies_are_ingested_one_by_one(tmp_path):
    """The documented way: the store's report is exactly the two audits' findings together."""
    db = tmp_path / "audit.duckdb"
    for log in (JOB, ECS):
        assert _run("ingest", f"{log}.jsonl", "--db", db, "--map", f"{log}.map.toml", "--quiet").returncode == 0
    report = _run("report", "--db", db, "--json", "-")
    both = json.loads(report.stdout)
    alone = [json.loads(_run("audit", f"{log}.jsonl", "--map", f"{log}.map.toml", "--json", "-").stdout)
             for log in (JOB, ECS)]
    assert report.returncode == 1 and both["input"]["quarantined"] == 0
    assert _triples(both) == _triples(alone[0]) | _triples(alone[1])
    assert len(_triples(both)) == 7 and all(_triples(a) for a in alone)
