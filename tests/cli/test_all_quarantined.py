"""Issue 45: "every line was quarantined" shows the reasons by count (not only the first) and the
next step: a vocabulary for --map, which 'auditor map' suggests. Real CLI, real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from auditor import NoEvents, audit

from ..conftest import ROOT


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auditor", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def _write(path, lines):
    path.write_text("".join((json.dumps(x) if isinstance(x, dict) else x) + "\n" for x in lines))
    return path


def test_the_reasons_come_by_count_with_the_next_step(tmp_path):
    log = _write(tmp_path / "team log.jsonl", [
        {"seq": 1, "workflow_key": "k", "kind": "claimed", "epoch": 1},
        {"seq": 2, "workflow_key": "k", "kind": "claimed", "epoch": 1},
        {"seq": 3, "workflow_key": "k", "kind": "done"},
        {"seq": 4, "kind": "progress", "epoch": 2},
        "not json",
        {"seq": 5, "workflow_key": "k", "kind": "claimed", "epoch": 2}])
    p = _run("audit", str(log))
    assert p.returncode == 2 and p.stdout == ""
    claimed = '"kind" is "claimed", not a kind the auditor knows; map it with --map FILE ([kinds] claimed = "lease_acquired")'
    assert p.stderr.splitlines() == [
        f"Error: every line was quarantined (6 of 6); first: {log}:1: {claimed}",
        "  reasons, most frequent first:",
        f"    3 lines: {claimed} (first {log}:1)",
        '    1 line: "kind" is "done", not a kind the auditor knows; map it with --map FILE ([kinds] done = '
        f'"progress") (first {log}:3)',
        '    1 line: "workflow_key" is missing; add the unit that must have one effect owner (or job_id / run_id) '
        f"(first {log}:4)",
        f"    1 line: line is not valid JSON; write one JSON object per line (first {log}:5)",
        "  next: if the log is not in the contract's field and kind names, let 'auditor map' suggest a "
        f"vocabulary: auditor map '{log}' --out vocabulary.toml; read and correct it, then audit with --map "
        "vocabulary.toml (docs/FORMAT.md, section 3)",
    ]


def test_past_five_reasons_the_rest_are_counted(tmp_path):
    log = _write(tmp_path / "kinds.jsonl", [{"seq": i, "workflow_key": "k", "kind": f"step-{chr(97 + i)}",
                                             "epoch": 1} for i in range(8)])
    p = _run("audit", str(log))
    lines = p.stderr.splitlines()
    assert p.returncode == 2
    assert [line.split(":")[0] for line in lines[2:7]] == ["    1 line"] * 5
    assert lines[7] == "    and 3 other reasons"


def test_the_library_error_carries_the_same_lines(tmp_path):
    log = _write(tmp_path / "one.jsonl", [{"seq": 1, "workflow_key": "k", "kind": "claimed", "epoch": 1}])
    with pytest.raises(NoEvents) as e:
        audit(str(log))
    assert e.value.details[0] == "reasons, most frequent first:"
    assert e.value.details[1].startswith('  1 line: "kind" is "claimed"')
    assert e.value.details[-1].startswith("next: ") and f"auditor map {log} --out" in e.value.details[-1]


def test_an_empty_input_has_no_reasons_to_give(tmp_path):
    p = _run("audit", str(_write(tmp_path / "empty.jsonl", [""])))
    assert (p.returncode, p.stderr) == (2, "Error: no event found in the input; check the path and the format\n")
