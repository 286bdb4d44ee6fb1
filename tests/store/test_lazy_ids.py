"""Derived event ids written only where detection compares them (store.sql's ``fill_ids``), and
derived on read everywhere else (``identified_events()``): pinned to the store that writes every
one as its line is staged (``Store(derive_ids=True)``), on every fixture and corpus log."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from auditor import analyze, ingest_paths
from auditor.core.errors import AuditorError
from auditor.render.json import render_json
from auditor.store import Store

from ..conftest import FIXTURES, ROOT, vocabulary_of

LOGS = sorted(p for d in (FIXTURES, ROOT / "tests" / "corpus") for p in d.iterdir()
              if p.is_file() and not p.name.endswith((".expected.json", ".toml", ".md")))


def _stored(paths: list[Path], derive_ids: bool, db: Path | None = None):
    """What a store holds after ingesting ``paths``: every event with its id, the accounting and
    the id conflicts; or the error the ingest raised."""
    store = Store(db, vocabulary=vocabulary_of(paths[0]), derive_ids=derive_ids, small=True)  # in memory unless db
    try:
        ingest_paths(paths, store, idempotent=False)
    except AuditorError as e:
        store.close()
        return type(e).__name__, str(e)
    try:
        con = store.con
        return (con.execute("SELECT * EXCLUDE (ord) , ord FROM identified_events() ORDER BY obs").fetchall(),
                con.execute("SELECT * EXCLUDE (source_id) FROM sources ORDER BY source_id").fetchall(),
                con.execute("SELECT * FROM quarantine ORDER BY source_id, line").fetchall(),
                store.id_conflicts(),
                con.execute("SELECT count(*) FROM events WHERE event_id IS NULL").fetchone()[0] if not derive_ids else 0)
    finally:
        store.close()


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_lazy_ids_are_the_eager_ids(log):
    lazy, eager = _stored([log], False), _stored([log], True)
    assert lazy[:4] == eager[:4]


def test_most_ids_stay_unwritten_and_every_id_is_derived_on_read():
    log = FIXTURES / "clean_handover.jsonl"  # no event_id given
    events, *_rest, unwritten = _stored([log], False)
    # no two of its events share a seq: no id is written, and every one is read
    assert unwritten == len(events) == 6 and all(len(e[0]) == 32 for e in events)  # event_id, the first column


def test_a_log_read_twice_collapses_the_same_duplicates(tmp_path):
    log = FIXTURES / "clean_handover.jsonl"
    twice = tmp_path / "again.jsonl"
    twice.write_bytes(log.read_bytes())
    lazy, eager = _stored([log, twice], False), _stored([log, twice], True)
    assert lazy[:4] == eager[:4]
    # lines read, events, duplicates, quarantined: the second file is all duplicates
    assert [s[3:7] for s in lazy[1]] == [(6, 6, 0, 0), (6, 0, 6, 0)]


def _derived_id(line: dict, tmp_path) -> str:
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps(line) + "\n")
    with Store(None) as store:
        ingest_paths([one], store, idempotent=False)
        return store.con.execute("SELECT event_id FROM identified_events()").fetchone()[0]


def test_an_id_given_that_is_another_events_derived_id_is_a_conflict(tmp_path):
    a = {"seq": 1, "workflow_key": "k", "kind": "lease_acquired", "epoch": 1, "worker": "w1"}
    b = {"seq": 2, "workflow_key": "k", "kind": "progress", "epoch": 1, "worker": "w1",
         "event_id": _derived_id(a, tmp_path)}
    log = tmp_path / "forged.jsonl"
    log.write_text(json.dumps(a) + "\n" + json.dumps(b) + "\n")
    lazy, eager = _stored([log], False), _stored([log], True)
    assert lazy[:4] == eager[:4]
    assert [c.workflow_key for c in lazy[3]] == ["k"] and lazy[4] == 0  # every id written: the fallback


def test_a_store_written_with_every_id_takes_more_lines(tmp_path):
    """A store from before (every id written, event_id NOT NULL) is appended to as any other."""
    log = FIXTURES / "clean_handover.jsonl"
    db = tmp_path / "old.duckdb"
    with Store(db, derive_ids=True) as store:
        ingest_paths([log], store)
        store.con.execute("ALTER TABLE events ALTER COLUMN event_id SET NOT NULL")
    more = tmp_path / "more.jsonl"
    more.write_text('{"seq": 99, "workflow_key": "wf-new", "kind": "progress", "epoch": 1, "worker": "w"}\n'
                    '{"seq": 99, "workflow_key": "wf-new", "kind": "progress", "epoch": 1, "worker": "w", "step_id": "s"}\n')
    with Store(db) as store:
        ingest_paths([more], store)
        ((nulls,),) = store.con.execute("SELECT count(*) FROM events WHERE event_id IS NULL").fetchall()
    assert nulls == 0  # the two new events share (key, seq): both ids are written
    fresh = _stored([log, more], True)
    with Store(db, read_only=True) as store:
        got = store.con.execute("SELECT * EXCLUDE (ord), ord FROM identified_events() ORDER BY obs").fetchall()
    assert got == fresh[0]


def test_the_document_is_the_eager_stores(tmp_path):
    log = ROOT / "tests" / "data" / "streamed_mix.jsonl"
    docs = []
    for derive in (False, True):
        store = Store(None, derive_ids=derive)
        ingest_paths([log], store, idempotent=False)
        with analyze(store) as result:
            docs.append(render_json(result))
    assert docs[0] == docs[1]


def _unwritten(db: Path) -> int:
    with Store(db, read_only=True) as store:
        return store.con.execute("SELECT count(*) FROM events WHERE event_id IS NULL").fetchone()[0]


def test_later_appends_keep_ids_unwritten_and_fill_an_earlier_event_a_later_one_ties_with(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps({"seq": s, "workflow_key": "k", "kind": "progress", "epoch": 1,
                                         "worker": "w"}) + "\n" for s in range(1, 6)))
    # a different event at seq 3 (a tie), and new ones
    second.write_text("".join(json.dumps({"seq": s, "workflow_key": "k", "kind": "progress", "epoch": 1,
                                          "worker": "v"}) + "\n" for s in (3, 6, 7)))
    db = tmp_path / "store.duckdb"
    for log in (first, second):
        with Store(db) as store:
            ingest_paths([log], store)
    assert _unwritten(db) == 8 - 2  # only the two events at seq 3
    with Store(db, read_only=True) as store:
        got = store.con.execute("SELECT * EXCLUDE (ord), ord FROM identified_events() ORDER BY obs").fetchall()
        ties = store.con.execute("SELECT count(*) FROM events WHERE seq = 3 AND event_id IS NOT NULL").fetchone()[0]
    assert ties == 2 and got == _stored([first, second], True)[0]


def test_a_source_that_gave_a_derived_looking_id_keeps_every_later_id_written(tmp_path):
    a = {"seq": 1, "workflow_key": "k", "kind": "lease_acquired", "epoch": 1, "worker": "w1"}
    forged = {"seq": 2, "workflow_key": "k", "kind": "progress", "epoch": 1, "worker": "w1", "event_id": "0" * 32}
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text(json.dumps(a) + "\n" + json.dumps(forged) + "\n")
    second.write_text(json.dumps(dict(a, seq=3, workflow_key="other")) + "\n")
    db = tmp_path / "store.duckdb"
    for log in (first, second):
        with Store(db) as store:
            ingest_paths([log], store)
    assert _unwritten(db) == 0
    with Store(db, read_only=True) as store:
        flags = store.con.execute("SELECT given_derived_ids FROM sources ORDER BY source_id").fetchall()
    assert flags == [(True,), (False,)]


TZ_SCRIPT = """
import json, sys
from auditor import ingest_paths
from auditor.store import Store
with Store(None) as store:
    ingest_paths([sys.argv[1]], store, idempotent=False)
    fed = [e.event_id for e in store.iter_events()]
    shown = store.events_frame()["event_id"].to_list()
print(json.dumps([fed, shown]))
"""


@pytest.mark.parametrize("tz", ["UTC", "America/New_York", "Asia/Kolkata"])
def test_ids_derived_on_read_do_not_depend_on_the_time_zone(tmp_path, tz):
    import os
    import subprocess
    import sys

    log = tmp_path / "leases.jsonl"
    log.write_text("".join(json.dumps({"seq": s, "workflow_key": "k", "kind": "lease_acquired", "epoch": s,
                                       "worker": "w", "lease_until": "2026-01-01T00:00:0%dZ" % s}) + "\n"
                           for s in (1, 2)))
    eager = _stored([log], True)[0]
    out = subprocess.run([sys.executable, "-c", TZ_SCRIPT, str(log)], capture_output=True, text=True, check=True,
                         env=dict(os.environ, TZ=tz))
    fed, shown = json.loads(out.stdout)
    assert fed == shown == [e[0] for e in eager]


def test_opening_a_store_writes_nothing(tmp_path):
    """The upgrade of a store written before (event_id NOT NULL) runs only on such a store: an
    ALTER on every open wrote to the store's log before any line was read."""
    db = tmp_path / "s.duckdb"
    with Store(db) as store:
        ingest_paths([FIXTURES / "clean_handover.jsonl"], store)
    with Store(db):
        assert not (tmp_path / "s.duckdb.wal").exists()
