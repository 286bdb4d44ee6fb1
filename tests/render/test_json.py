"""The JSON document (``render/json.py``): as written (orjson, item by item) against
``AuditResult.to_dict()``, one compact line per item, and an incomplete audit's document."""

from __future__ import annotations

import json

import pytest

from auditor import audit
from auditor.render.json import render_json

from ..conftest import FIXTURES, run_cli, vocabulary_of

LOGS = sorted(p for p in FIXTURES.iterdir() if not p.name.endswith(".expected.json")
              and p.suffix in (".jsonl", ".json", ".csv", ".gz", ".zst"))



@pytest.mark.parametrize("log", LOGS, ids=[p.name for p in LOGS])
def test_written_document_is_to_dict(log):
    result = audit([log], vocabulary=vocabulary_of(log))
    text = render_json(result)
    assert json.loads(text) == json.loads(json.dumps(result.to_dict(), default=str))
    # One list item per line, each compact JSON of its own.
    items = [line for line in text.splitlines() if line.startswith("    {")]
    assert len(items) == sum(len(getattr(result, k)) for k in ("incidents", "findings", "diagnostics", "workflows"))
    assert all(json.loads(line.rstrip(",")) for line in items)


def test_seed_document_items_are_compact_lines():
    text = render_json(audit([FIXTURES / "seed_split_brain.jsonl"]))
    finding_lines = [line for line in text.splitlines() if line.startswith('    {"id":"f-')]
    assert len(finding_lines) == 4
    first = json.loads(finding_lines[0].rstrip(","))
    assert (first["grade"], first["workflow_key"], first["seq"]) == ("stale_activity", "ledger/export/2026-07-26", 6)



def test_json_says_incomplete_and_what_was_lost_before_the_findings(lossy):
    p = run_cli("audit", str(lossy), "--json", "-")
    assert p.returncode == 3
    doc = json.loads(p.stdout)
    assert doc["schema"] == "split-brain-audit/3" and doc["verdict"] == "incomplete"
    assert doc["evidence_lost"] == {
        "quarantined": 1, "event_id_conflicts": 0, "unplaced": 0, "malformed": 0, "allow_quarantined": 0,
        "first": [{"file": str(lossy), "line": 10,
                   "reason": '"epoch" is "seventeen", expected an integer in int64 range'}]}
    keys = list(doc)
    assert keys.index("evidence_lost") < keys.index("findings")

