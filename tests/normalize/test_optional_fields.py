"""SPEC rev 2 sections 7 and 8: the optional fields and kinds, read alike by every path.

The store's SQL fast path, its careful normalizer (``normalize.normalize``) and the live converter
must keep the same values; an event without the new fields derives the id revision 1 derived.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

import duckdb
import pytest

from auditor import audit, report
from auditor.normalize.reference import Rejected, normalize
from auditor.otel.convert import event_from_record
from auditor.store import Store

from ..conftest import FIXTURES

UTC = timezone.utc
BASE = {"seq": 1, "workflow_key": "job/1", "kind": "progress", "epoch": 3, "worker": "w1"}
OPTIONAL = ("lease_until", "heartbeat", "reason", "authority_id", "expires_at", "scope", "decision")

# (line, what is stored of the optional fields)
CASES = [
    ({**BASE, "lease_until": "2026-07-26T14:00:35Z", "heartbeat": "ok"},
     {"lease_until": datetime(2026, 7, 26, 14, 0, 35, tzinfo=UTC), "heartbeat": "ok"}),
    ({**BASE, "lease_expires_at": "2026-07-26T14:01:30+00:00"},  # the alias
     {"lease_until": datetime(2026, 7, 26, 14, 1, 30, tzinfo=UTC)}),
    ({**BASE, "lease_until": 1785074435},  # epoch seconds, as ts reads them
     {"lease_until": datetime(2026, 7, 26, 14, 0, 35, tzinfo=UTC)}),
    ({**BASE, "lease_until": "soon"}, {}),  # unparsable: dropped, the event stays
    ({**BASE, "kind": "heartbeat_lost", "reason": "zero_rows"}, {"heartbeat": "lost", "reason": "zero_rows"}),
    ({**BASE, "kind": "heartbeat_ok"}, {"heartbeat": "ok"}),
    ({**BASE, "heartbeat": "OK"}, {"heartbeat": "ok"}),
    ({**BASE, "heartbeat": "maybe"}, {}),  # unknown descriptive value: dropped, never the line
    ({"seq": 2, "workflow_key": "job/1", "kind": "authority_granted", "authority_id": "mandate-7",
      "expires_at": "2026-07-26T14:00:00Z", "scope": "refund<=100"},
     {"authority_id": "mandate-7", "expires_at": datetime(2026, 7, 26, 14, tzinfo=UTC), "scope": "refund<=100"}),
    ({"seq": 2, "workflow_key": "job/1", "kind": "authority_granted", "authority_id": 7,
      "scope": {"tool": "refund", "budget": 100}},
     {"authority_id": "7", "scope": '{"budget":100,"tool":"refund"}'}),
    ({"seq": 3, "workflow_key": "job/1", "kind": "authority_revoked", "authority_id": "mandate-7", "epoch": 2},
     {"authority_id": "mandate-7"}),
    ({**BASE, "kind": "revalidated", "decision": "Continue"}, {"decision": "continue"}),
    ({**BASE, "kind": "resumed"}, {}),
    ({"seq": 4, "workflow_key": "job/1", "kind": "effect_compensated", "effect_key": "refund:inv-9"}, {}),
    ({**BASE, "kind": "effect_committed", "effect_key": "refund:inv-9", "authority_id": "mandate-7"},
     {"authority_id": "mandate-7"}),
]


def numbered(lines: list[dict]) -> list[dict]:
    """Each case at its own seq: cases that mean the same event must not collapse as duplicates."""
    return [{**d, "seq": i} for i, d in enumerate(lines, 1)]


def stored(tmp_path, lines: list[dict]) -> list[dict]:
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(d) + "\n" for d in lines))
    with audit(log, fail_on="double_commit") as result:
        assert result.input.quarantined == 0, result.input.quarantine
        rows = result.store.con.execute(
            "SELECT event_id, kind, epoch, " + ", ".join(OPTIONAL) + " FROM events ORDER BY line").fetchall()
    return [dict(zip(("event_id", "kind", "epoch", *OPTIONAL), r)) for r in rows]


def test_optional_fields_are_stored_as_given(tmp_path):
    rows = stored(tmp_path, numbered([line for line, _ in CASES]))
    assert len(rows) == len(CASES)
    for (line, want), row in zip(CASES, rows):
        assert {f: row[f] for f in OPTIONAL if row[f] is not None} == want, line
    assert [r["epoch"] for r in rows[8:11]] == [None, None, 2]  # optional on authority kinds, kept when given


def test_careful_path_stores_what_the_fast_path_stores(tmp_path):
    """A member spelled in another case sends a line to the careful normalizer without changing
    its meaning: every column, the derived event_id included, must come out the same."""
    fast = stored(tmp_path, numbered([line for line, _ in CASES]))
    careful = stored(tmp_path, [{**line, "SEQ": line["seq"]} for line in numbered([line for line, _ in CASES])])
    assert careful == fast


def test_live_converter_reads_the_same_values(tmp_path):
    lines = numbered([line for line, _ in CASES])
    rows = stored(tmp_path, lines)
    for line, row in zip(lines, rows):
        e = event_from_record(dict(line))
        assert {f: getattr(e, f) for f in OPTIONAL} == {f: row[f] for f in OPTIONAL}, line


def test_an_event_without_them_keeps_its_revision_1_id(tmp_path):
    # Pinned: the derived id of the seed's first line before revision 2 (a store written then, fed
    # the same events again, still collapses them as duplicates).
    with audit(FIXTURES / "seed_split_brain.jsonl") as result:
        first = result.store.events_of("ledger/export/2026-07-26")[0]
    assert first.event_id == "99cd9c3745c47512b0e3dbf63350ef9b"


@pytest.mark.parametrize("line, reason", [
    ({"seq": 1, "workflow_key": "k", "kind": "resumed"},
     '"epoch" is missing; every resumed needs the owner epoch it was produced under'),
    ({"seq": 1, "workflow_key": "k", "kind": "effect_compensated"},
     '"effect_key" is missing; every effect_compensated needs the effect key it concerns'),
])
def test_authority_kinds_quarantine_what_they_cannot_be_read_without(line, reason):
    with pytest.raises(Rejected) as e:
        normalize(line.items())
    assert str(e.value) == reason


@pytest.mark.parametrize("line, kept", [
    # SPEC rev 3: authority fields never quarantine a line
    ({"seq": 1, "workflow_key": "k", "kind": "authority_granted"}, {"authority_id": None, "dropped": None}),
    ({"seq": 1, "workflow_key": "k", "kind": "authority_revoked"}, {"authority_id": None, "dropped": None}),
    ({"seq": 1, "workflow_key": "k", "kind": "revalidated", "epoch": 2}, {"decision": None, "dropped": ["decision"]}),
    ({"seq": 1, "workflow_key": "k", "kind": "revalidated", "epoch": 2, "decision": "maybe"},
     {"decision": None, "dropped": ["decision"]}),
    ({"seq": 1, "workflow_key": "k", "kind": "revalidated", "epoch": 2, "decision": "Pause"},
     {"decision": "pause", "dropped": None}),
])
def test_authority_fields_never_cost_the_line(line, kept):
    out = normalize(line.items())
    assert {k: out[k] for k in kept} == kept


def test_a_store_written_before_gains_the_columns(tmp_path):
    db = tmp_path / "old.duckdb"
    with audit(FIXTURES / "seed_split_brain.jsonl", db=db):
        pass
    con = duckdb.connect(str(db))
    for f in OPTIONAL:
        con.execute(f"ALTER TABLE events DROP COLUMN {f}")
    con.close()
    # Read-only (report) reads it as it is: the columns read as null.
    with report(db) as old:
        assert [f.grade.value for f in old.findings] == ["stale_activity", "stale_attempt", "stale_commit",
                                                         "double_commit"]
        assert old.store.events_of("ledger/export/2026-07-26")[0].lease_until is None
    # Writing adds them, and the new lines keep theirs.
    log = tmp_path / "more.jsonl"
    log.write_text(json.dumps({**BASE, "lease_until": "2026-07-26T14:00:35Z"}) + "\n")
    with Store(db) as store:
        from auditor import ingest_paths

        ingest_paths([log], store)
        assert store.con.execute("SELECT lease_until FROM events WHERE workflow_key = 'job/1'").fetchall() == [
            (datetime(2026, 7, 26, 14, 0, 35, tzinfo=UTC),)]
