"""What the OpenTelemetry tests share: the seed scenario as records, its findings, and their triples."""

from __future__ import annotations

import json

from ..conftest import FIXTURES

SEED = [json.loads(line) for line in (FIXTURES / "seed_split_brain.jsonl").read_text().splitlines()]
SEED_FINDINGS = [("stale_activity", "ledger/export/2026-07-26", 6), ("stale_attempt", "ledger/export/2026-07-26", 7),
                 ("stale_commit", "ledger/export/2026-07-26", 8), ("double_commit", "ledger/export/2026-07-26", 9)]


def triples(findings):
    return [(f.grade.value, f.workflow_key, f.seq) for f in findings]
