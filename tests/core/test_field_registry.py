"""One registry per field (core.fields.REGISTRY): every column list is generated from it.

Modelled on tests/rules/test_grades.py: a field declared in the registry, for the length of a
test, is followed from a JSONL line through the store (its column, the upgrade of an older store,
the read-back), both detectors' feeds, the Spark engine and the JSON document. A frozen slots
dataclass cannot gain a field inside a running process, so the test copies the package into a
temporary folder, adds one ``FieldSpec`` to its ``core/fields.py`` and audits in a subprocess that
imports that copy. Nothing else of the copy is edited: ``model.Event`` (the typed record every
engine builds) gains the field from the registry.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from auditor.core import columns
from auditor.core.fields import FIELDS, OPTIONAL_FIELDS, REGISTRY, ROLES
from auditor.core.model import Event
from auditor.normalize.staging import SQL as STAGING_SQL
from auditor.store import SQL, Store

from ..conftest import FIXTURES, ROOT

#: The field the tests declare: an enum of revision 3.1 with an alias.
REGION = '    FieldSpec("region", "enum", revision="3.1", values=("eu", "us"), aliases=("zone",)),\n'


def test_each_field_is_declared_once_with_a_known_role():
    names = [s.name for s in REGISTRY]
    assert len(names) == len(set(names)) and tuple(names) == FIELDS
    assert {s.role for s in REGISTRY} <= set(ROLES)
    assert tuple(s.name for s in columns.optional_fields()) == OPTIONAL_FIELDS
    assert columns.added_fields() == ()  # every field today is named by the normalizers' rules


def test_the_store_is_the_generated_table_column_for_column():
    with Store() as store:
        described = [(r[0], r[1]) for r in store.con.execute("DESCRIBE events").fetchall()]
    spelled = {"TIMESTAMPTZ": "TIMESTAMP WITH TIME ZONE"}
    assert described == [(c.name, spelled.get(c.sql.split()[0], c.sql.split()[0])) for c in columns.table()]
    upgrade = [line.split()[-2] for line in columns.events_upgrade().splitlines()]
    assert upgrade == [c.name for c in columns.table()[len(columns.REVISION_1_LAYOUT):]]
    assert "{{" not in json.dumps([SQL, STAGING_SQL])  # every placeholder expanded


def test_event_gains_the_registry_fields_it_does_not_declare():
    import dataclasses
    from datetime import datetime

    from auditor.core.builder import builder
    from auditor.core.model import _with_registry_fields

    assert _with_registry_fields(Event) is Event  # declares them all today: the very class, same speed

    @dataclasses.dataclass(frozen=True, slots=True)
    class Short:
        """Declared."""

        seq: int
        kind: str
        lease_until: datetime | None = None
        note: str = "n"

        @property
        def twice(self) -> int:
            return 2 * self.seq

    made = _with_registry_fields(Short)
    names = [f.name for f in dataclasses.fields(made)]
    assert names == ["seq", "kind", "lease_until", "note", *(f for f in FIELDS if f not in ("seq", "kind", "lease_until"))]
    assert made.__slots__ == tuple(names) and made.__doc__ == "Declared." and made.__module__ == "auditor.core.model"
    e = builder(made)(7, "progress", None, "x", authority_id="a1")
    assert (e.twice, e.note, e.authority_id, e.expires_at, e.worker) == (14, "x", "a1", None, None)
    assert dataclasses.fields(made)[names.index("expires_at")].type == "datetime | None"
    with pytest.raises(dataclasses.FrozenInstanceError):
        e.seq = 8  # type: ignore[misc]


def test_an_unknown_placeholder_names_the_list_it_wanted():
    from auditor.core.sql import expand

    with pytest.raises(KeyError, match=r"\{\{nothing\}\}: no such column list"):
        expand("SELECT {{nothing:e}} FROM events e")


def _declared(tmp_path: Path) -> Path:
    """A copy of the package with the field ``region`` declared in its registry, and only there."""
    copy = tmp_path / "pkg"
    shutil.copytree(ROOT / "auditor", copy / "auditor", ignore=shutil.ignore_patterns("__pycache__"))
    fields = copy / "auditor" / "core" / "fields.py"
    text = fields.read_text()
    anchor = "(revalidated)\"),\n)\n"
    assert anchor in text, "the registry's last entry moved: update the anchor"
    fields.write_text(text.replace(anchor, "(revalidated)\"),\n" + REGION + ")\n"))
    return copy


#: Run in the copy: the seed log with ``region`` on some lines (one under its alias, one unreadable).
SCRIPT = r'''
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import auditor
assert auditor.__file__.startswith(sys.argv[1]), auditor.__file__
from auditor import audit
from auditor.render.json import render_json
from auditor.store import Store
from auditor.detect.batch.timeline import excerpts, iter_events
from auditor.otel.convert import event_from_record
from auditor.detect.live.event import LiveEvent
from auditor.spark import tasks
from auditor.normalize.vocabulary import DEFAULT

here = Path(sys.argv[2])
lines = [json.loads(l) for l in Path(sys.argv[3]).read_text().splitlines()]
lines[0]["region"], lines[2]["zone"], lines[3]["region"] = "EU", "us", "mars"
log = here / "log.jsonl"
log.write_text("".join(json.dumps(r) + "\n" for r in lines))
out = {}
with audit([log], db=here / "store.duckdb") as result:
    doc = json.loads(render_json(result))
out["malformed"] = [(d["numbers"], d["line"], d["detail"][:40]) for d in doc["diagnostics"] if d["kind"] == "malformed_field"]
with audit([Path(sys.argv[3])]) as result:
    out["plain_doc"] = render_json(result)
with Store(here / "store.duckdb") as store:
    out["column"] = store.con.execute("SELECT seq, region FROM events WHERE region IS NOT NULL ORDER BY seq").fetchall()
    key = lines[0]["workflow_key"]
    out["events_of"] = [(e.seq, e.region) for e in store.events_of(key) if e.region]
    out["batch_feed"] = [(e.seq, e.region) for e in iter_events(store) if e.region]
    timeline = excerpts(store, [key], result.findings, 50)[key]
    out["timeline"] = [(t.event.seq, t.event.region) for t in timeline.events if t.event.region]
older = here / "older.duckdb"
with Store(older) as store:
    store.con.execute("ALTER TABLE events DROP COLUMN region")
with Store(older) as store:
    out["older"] = "region" in [r[0] for r in store.con.execute("DESCRIBE events").fetchall()]
import dataclasses, pickle
from auditor.core.model import Event
with Store(here / "store.duckdb") as store:
    first = next(e for e in store.events_of(key) if e.region)
out["event"] = [Event.__module__, Event.__name__, dataclasses.fields(Event)[-1].name, Event.__slots__[-1]]
out["pickled"] = pickle.loads(pickle.dumps(first)) == first and pickle.loads(pickle.dumps(first)).region
out["live"] = [event_from_record(dict(r)).region for r in lines[:4]]
out["live_tuple"] = LiveEvent._fields[-1]
import pyarrow as pa
batch = pa.record_batch({"line": list(range(1, 5)), "raw": [json.dumps(r).encode() for r in lines[:4]]})
stage1 = pa.Table.from_batches(list(tasks.normalize_rows([batch], "log", False, DEFAULT)))
rows = stage1.filter(pa.compute.equal(stage1["tag"], "e")).to_pylist()
out["spark_stage1"] = sorted((r["seq"], r["region"]) for r in rows if r["region"])
out["spark_carried"] = "region" in tasks.EVENT_NAMES and "region" in tasks._EVENTS_IN
print(json.dumps(out))
'''


def test_a_field_added_to_the_registry_reaches_every_engine(tmp_path):
    copy = _declared(tmp_path)
    seed = FIXTURES / "seed_split_brain.jsonl"
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(copy), str(tmp_path), str(seed)],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    # the store: its column (an enum read case-insensitively, "zone" its alias), read back by name
    assert out["column"] == [[1, "eu"], [3, "us"]]
    assert out["events_of"] == [[1, "eu"], [3, "us"]]
    # the batch detector's feed and its timelines; the live door's checked converter and tuple
    assert out["batch_feed"] == [[1, "eu"], [3, "us"]]
    assert out["timeline"] == [[1, "eu"], [3, "us"]]
    # the event gained it from the registry: last, named Event in core.model, pickled as Spark does
    assert out["event"] == ["auditor.core.model", "Event", "region", "region"] and out["pickled"] == "eu"
    assert out["live"] == ["eu", None, "us", None] and out["live_tuple"] == "region"
    # an older store gains the column on open
    assert out["older"] is True
    # the Spark engine's stage 1 carries it, and its stages name it
    assert out["spark_stage1"] == [[1, "eu"], [3, "us"]] and out["spark_carried"] is True
    # the JSON document: the unreadable value is a malformed_field of that field, on line 4
    assert out["malformed"] == [[{"lines": 1, "lost": 0}, 4, '"region" could not be read on 1 line of ']]
    # and a log without the field gives the very document it gave before the field existed
    with __import__("auditor").audit([seed]) as result:
        from auditor.render.json import render_json

        assert out["plain_doc"] == render_json(result)


def test_event_carries_every_field():
    assert set(FIELDS) <= set(Event.__slots__)
