"""The terminal summary (``render/terminal.py``): the seed's words as the CLI prints them, and a
closed result (or a Spark audit, whose events stay in Spark) printing the same summary, only
without the attrs hints that read events back."""

from __future__ import annotations

from auditor import audit
from auditor.render.terminal import summary_lines

from ..conftest import FIXTURES, run_cli

SEED = str(FIXTURES / "seed_split_brain.jsonl")

def test_a_closed_result_prints_its_summary():
    result = audit([FIXTURES / "seed_split_brain.jsonl"])
    open_lines = [t.plain for t in summary_lines(result)]
    result.close()
    closed_lines = [t.plain for t in summary_lines(result)]
    assert closed_lines == open_lines
    assert closed_lines[0].startswith("split-brain audit: FAIL")



def test_terminal_words_for_the_seed():
    lines = run_cli("audit", SEED).stdout.decode().splitlines()
    assert lines[1] == ("input: 16 lines read = 16 events + 0 duplicates + 0 quarantined; 1 file; "
                        "ordering authoritative")
    assert lines[8] == ("    stale for 3 min after the takeover, seq 6-8; effects: release-index/2026-07-26 "
                        "committed, unverified; confidence high; last stale event 8 min before the newest "
                        "event in the log")
    assert lines[9:] == [
        "    do: 1. Treat the outcome as uncertain until an outcome_verified predicate or a human confirms "
        "it; never auto-resolve by retrying the current owner.",
        "        2. Freeze further effects for this key; check the result; decide whether compensation is safe.",
        "        3. Query the destination by effect key; treat as a possible stale commit.",
        "        4. Stop or quarantine the old worker; verify it emits nothing more.",
        "confidence: high: order from seq, and no commit reported only by the worker (findings reported by sink, "
        "worker).",
    ]

