"""Ordering conflicts (SPEC section 3's diagnostics) counted over the events whose id is written.

``detect.sql``'s ``diagnostic_rows`` groups only the rows with a written ``event_id``: the store
writes the id of every event that shares its ``(workflow_key, seq)`` with another (store.sql's
``fill_ids``), so no group of more than one is missed. These tests pin that on every fixture and
corpus log, across appends to one store, and in the document.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from auditor import analyze, ingest_paths, report
from auditor.core.errors import AuditorError
from auditor.store import Store

from ..conftest import FIXTURES, ROOT, vocabulary_of

LOGS = sorted(p for d in (FIXTURES, ROOT / "tests" / "corpus") for p in d.iterdir()
              if p.is_file() and not p.name.endswith((".expected.json", ".toml", ".md")))

_GROUPS = """SELECT workflow_key, seq, count(*) FROM events
WHERE seq IS NOT NULL AND ord IS NOT NULL {where}
GROUP BY workflow_key, seq HAVING count(*) > 1 ORDER BY ALL"""


def _groups(store: Store) -> tuple[list, list]:
    """The (key, seq) groups of more than one event: over every event, and over those with an id."""
    con = store.con
    return (con.execute(_GROUPS.format(where="")).fetchall(),
            con.execute(_GROUPS.format(where="AND event_id IS NOT NULL")).fetchall())


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_every_event_sharing_a_seq_has_its_id_written(log):
    store = Store(None, vocabulary=vocabulary_of(log), small=True)
    try:
        ingest_paths([log], store, idempotent=False)
    except AuditorError:  # a log that is refused whole has no events to group
        store.close()
        return
    with store:
        every, written = _groups(store)
    assert written == every


def test_the_fixture_of_ordering_conflicts_keeps_its_diagnostic():
    log = FIXTURES / "ordering_conflict.jsonl"
    store = Store(None)
    ingest_paths([log], store, idempotent=False)
    assert _groups(store) == ([("export/s3/batch-5", 2, 2)], [("export/s3/batch-5", 2, 2)])
    with analyze(store) as result:
        conflicts = [(d.workflow_key, d.seq, d.detail) for d in result.diagnostics if d.kind == "ordering_conflict"]
    assert conflicts == [("export/s3/batch-5", 2, "2 different events share seq 2")]


def _lines(path: Path, worker: str, seqs) -> Path:
    path.write_text("".join(json.dumps({"seq": s, "workflow_key": "k", "kind": "progress", "epoch": 1,
                                        "worker": worker}) + "\n" for s in seqs))
    return path


def test_a_conflict_across_two_appends_and_three_files_is_found_by_report(tmp_path):
    db = tmp_path / "store.duckdb"
    # seq 3 three times: once in the first append, twice more in the second (two files read together)
    first = _lines(tmp_path / "a.jsonl", "w", range(1, 6))
    second = [_lines(tmp_path / "b.jsonl", "v", (3, 6)), _lines(tmp_path / "c.jsonl", "u", (3, 7))]
    with Store(db) as store:
        ingest_paths([first], store)
    with Store(db) as store:
        ingest_paths(second, store)
        every, written = _groups(store)
        unwritten = store.con.execute("SELECT count(*) FROM events WHERE event_id IS NULL").fetchone()[0]
    assert every == written == [("k", 3, 3)] and unwritten == 9 - 3
    with report(db) as result:
        conflicts = [(d.seq, d.detail) for d in result.diagnostics if d.kind == "ordering_conflict"]
    assert conflicts == [(3, "3 different events share seq 3")]
