"""The event's field list exists once (core.fields.FIELDS); every other place that lists the fields
is checked against it: the store's DDL and what it reads back, the typed (Arrow) fast path, the
live engine's event tuple and record, the Spark engine's columns, and what makes two rows one
event (the store's duplicate rule and the Spark engine's)."""

from __future__ import annotations

import re

import duckdb
import pytest

from auditor.core.fields import FIELDS, OPTIONAL_FIELDS
from auditor.core.model import Event
from auditor.detect.live.event import LiveEvent
from auditor.store import SQL, Store


#: Columns the store keeps beside the fields: the rows' identity and order, what was parsed or
#: derived, and where each row came from.
STORE_ONLY = {"ord", "obs", "ts_utc", "source_id", "line", "position", "dropped"}


def _ddl_columns() -> list[str]:
    body = re.search(r"CREATE TABLE IF NOT EXISTS events \((.*?)\n\);", SQL["schema"], re.S).group(1)
    return [line.split()[0] for line in body.splitlines() if line.strip() and not line.strip().startswith("--")]


def test_the_store_keeps_every_field_and_only_its_own_columns_beside():
    columns = _ddl_columns()
    assert set(columns) == set(FIELDS) | {"attrs"} | STORE_ONLY
    with Store() as store:
        live = [r[0] for r in store.con.execute("DESCRIBE events").fetchall()]
    assert live == columns  # the DDL is the table, column for column, in its order


def test_what_the_store_reads_back_is_every_field():
    read = re.search(r"SELECT (.*?)\s+FROM identified_events\(\)", SQL["event_columns"], re.S).group(1)
    names = [c.strip().split()[-1] for c in read.replace("\n", " ").split(",")]
    assert set(names) == set(FIELDS) | {"attrs", "position"}


def test_the_event_records_carry_every_field():
    for record in (Event, LiveEvent):
        names = set(getattr(record, "__slots__", ()) or record._fields)
        assert set(FIELDS) <= names, (record.__name__, sorted(set(FIELDS) - names))


def test_the_spark_engine_carries_every_field():
    from auditor.spark import tasks

    carried = {name.removesuffix("_us").replace("reason_field", "reason") for name in tasks.EVENT_NAMES}
    assert set(FIELDS) <= carried, sorted(set(FIELDS) - carried)


def test_one_rule_says_what_makes_two_rows_one_event():
    """The store collapses rows of one event_id whose columns but the identity ones agree
    (``drop_duplicates``); the Spark engine compares ``tasks.CONTENT_COLUMNS``: the same columns."""
    from auditor.spark import tasks

    excluded = re.search(r"md5\(to_json\(struct_pack\(\*COLUMNS\(\* EXCLUDE \(([^)]*)\)", SQL["drop_duplicates"])
    identity = {c.strip() for c in excluded.group(1).split(",")}
    store_content = set(_ddl_columns()) - identity
    spark_content = {name.removesuffix("_us").replace("reason_field", "reason") for name in tasks.CONTENT_COLUMNS}
    assert spark_content == store_content


@pytest.mark.parametrize("field", OPTIONAL_FIELDS)
def test_an_older_store_gains_every_optional_field(field, tmp_path):
    """A store written before revision 2 (no optional columns) is upgraded on open."""
    path = tmp_path / "old.duckdb"
    con = duckdb.connect(str(path))
    con.execute(SQL["schema"].split("ALTER TABLE")[0])
    con.execute(f"ALTER TABLE events DROP COLUMN {field}")
    con.close()
    with Store(path) as store:
        names = [r[0] for r in store.con.execute("DESCRIBE events").fetchall()]
    assert field in names
