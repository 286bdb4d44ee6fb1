"""The JSON document as written (orjson, item by item) against ``AuditResult.to_dict()``."""

from __future__ import annotations

import json

import pytest

from auditor import audit
from auditor.render.json import render_json

from ..conftest import FIXTURES, vocabulary_of

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
