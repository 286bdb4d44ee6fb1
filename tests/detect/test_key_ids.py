"""Detection joins and groups on a 64-bit id of each workflow key, not its string (issue 48): the
id is DuckDB's hash of the key, checked unique over the store's keys, and should two keys share
one, detection compares the strings instead (``detect.sql``'s ``key_of``). A real collision of
the hash cannot be made here, so a deliberately weak id (every key's id 0) stands in for one: the
check must see it and take the strings. Every fixture's document is the same on the strings as on
the ids; and without the check the weak id merges the seed's keys and the audit stops: what the
check guards is real.
"""

from __future__ import annotations

import duckdb
import pytest

import auditor.detect.batch as batch
from auditor import audit, ingest_paths
from auditor.render.json import render_json
from auditor.store import Store

from ..conftest import FIXTURES, audited, ev, vocabulary_of
from ..explain.test_fixtures import CASES, _log_of

WEAK = "CREATE OR REPLACE TEMP MACRO key_of(w) AS hash(w) * 0"  # every key's id is 0
SEED = FIXTURES / "seed_split_brain.jsonl"


def _document(log) -> str:
    with audit([log], vocabulary=vocabulary_of(log)) as result:
        return render_json(result)


def test_two_keys_sharing_an_id_are_seen():
    con = duckdb.connect()
    con.execute("CREATE TEMP TABLE key_counts (workflow_key VARCHAR, k UBIGINT)")
    con.execute("INSERT INTO key_counts VALUES ('a', 1), ('b', 2), ('c', 3)")
    assert batch._ids_collide(con) is False
    con.execute("INSERT INTO key_counts VALUES ('d', 2)")
    assert batch._ids_collide(con) is True


def test_detection_takes_the_hash_and_falls_back_to_the_strings(monkeypatch):
    """The id's type, read from the store while detection holds its tables: the hash's UBIGINT,
    or under a weak id that collides, the string itself."""
    def key_type() -> str:
        with Store(None) as store:
            ingest_paths([SEED], store, "auto", None)
            detection = batch.detect(store)
            try:
                ((kind,),) = store.con.execute("SELECT DISTINCT typeof(k) FROM key_counts").fetchall()
                ((keys, ids),) = store.con.execute(
                    "SELECT count(*), count(DISTINCT k) FROM key_counts").fetchall()
                assert keys == ids == 3
                return kind
            finally:
                detection.close()

    assert key_type() == "UBIGINT"
    monkeypatch.setitem(batch.SQL, "hashed_keys", WEAK)
    assert key_type() == "VARCHAR"


@pytest.mark.parametrize("expected", CASES, ids=[c.name.split(".")[0] for c in CASES])
def test_detection_on_the_strings_gives_the_same_document(expected, monkeypatch):
    """The path a collision takes, on every fixture (most have one key, where no id can collide):
    the check answers that two keys share an id, and detection runs on the strings."""
    log = _log_of(expected)
    usual = audited(log).json
    asked = []
    monkeypatch.setattr(batch, "_ids_collide", lambda con: asked.append(con) or True)
    assert _document(log) == usual
    assert len(asked) == 1


def test_without_the_check_a_collision_merges_keys(monkeypatch):
    """The negative control: the weak id taken as unique merges the seed's three keys; each key's
    row then meets the others' findings, and explain stops on the keys read out of step instead
    of writing a document (the check above is what keeps this from happening)."""
    monkeypatch.setitem(batch.SQL, "hashed_keys", WEAK)
    monkeypatch.setattr(batch, "_ids_collide", lambda con: False)
    with pytest.raises(RuntimeError, match="out of (key order|step)"):
        _document(SEED)


def test_the_weak_id_gives_the_seeds_document_through_the_check(monkeypatch):
    monkeypatch.setitem(batch.SQL, "hashed_keys", WEAK)
    assert _document(SEED) == audited(SEED).json


def test_an_unacquired_epochs_position_is_its_first_events(audit_events):
    """``unacquired_epoch``'s position is looked up only for the epochs never acquired (issue
    48: key_epochs no longer carries every epoch's first position): the first event at the
    epoch's first place, two there (an ordering conflict) in event_id order, whatever the file's;
    a compensation record there (its epoch is no owner evidence, SPEC section 8) is not it."""
    compensation = {"seq": 5, "workflow_key": "k", "kind": "effect_compensated", "epoch": 7, "worker": "beta",
                    "effect_key": "x", "event_id": "0-compensation"}
    events = [ev("1 acq 1 alpha"), ev("2 prog 1 alpha"), compensation,
              ev("5 prog 7 beta", event_id="z-first-in-file"), ev("5 prog 7 beta", event_id="a-second"),
              ev("6 prog 7 beta"), ev("9 prog 9 gamma", key="other"), ev("3 prog 9 gamma", key="other")]
    with audit_events(events) as result:
        got = sorted((d.kind.value, d.workflow_key, d.seq, d.epoch, d.position) for d in result.diagnostics)
    assert got == [("ordering_conflict", "k", 5, None, 3), ("unacquired_epoch", "k", 5, 7, 5),
                   ("unacquired_epoch", "other", 3, 9, 8)]
