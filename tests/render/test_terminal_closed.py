"""The terminal summary needs no open store: a closed result (or a Spark audit, whose events stay in
Spark) prints the same summary, only without the attrs hints that read events back."""

from pathlib import Path

from auditor import audit
from auditor.render.terminal import summary_lines

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_a_closed_result_prints_its_summary():
    result = audit([FIXTURES / "seed_split_brain.jsonl"])
    open_lines = [t.plain for t in summary_lines(result)]
    result.close()
    closed_lines = [t.plain for t in summary_lines(result)]
    assert closed_lines == open_lines
    assert closed_lines[0].startswith("split-brain audit: FAIL")
