"""Explain streams detection's tables as they lie (issue 48): detect.sql writes ``finding_rows``,
``keys`` and the key facts from an ``ORDER BY``, and the readers scan them without one under
``Store.in_order``, so DuckDB holds no sort of every finding row while the keys are explained.

What that rests on is DuckDB's, so it is checked here on a real store with more row groups than
one (a fixture's tables fit in one, where any scan is in order): a table written from an
``ORDER BY`` under the store's usual setting (order not preserved, for speed) is scanned back in
that order, streamed, on every thread, within ``in_order`` (without it, the same scan came back in
another order); and the usual setting is back once an audit's batches are read.
"""

from __future__ import annotations

from auditor import audit
from auditor.store import Store

from ..conftest import ROOT

ROWS = 400_000  # a little over three of DuckDB's row groups (122,880 rows)


def _setting(store: Store) -> bool:
    ((value,),) = store.con.execute("SELECT current_setting('preserve_insertion_order')").fetchall()
    return value


def _scan(store: Store) -> list[str]:
    cur = store.con.cursor()
    try:
        return [k for batch in cur.sql("SELECT k FROM t").to_arrow_reader(16_384) for k in batch.column("k").to_pylist()]
    finally:
        cur.close()


def test_a_table_written_in_order_streams_back_in_order_within_in_order():
    with Store(None) as store:
        assert _setting(store) is False
        store.con.execute("CREATE TABLE t AS SELECT 'k' || lpad(((i * 7919) % $n)::VARCHAR, 7, '0') AS k "
                          "FROM range($n) r(i) ORDER BY k", {"n": ROWS})
        with store.in_order():
            assert _setting(store) is True
            seen = _scan(store)
        assert _setting(store) is False
    assert len(seen) == ROWS
    assert seen == sorted(seen) and seen[0] == "k0000000" and seen[-1] == f"k{ROWS - 1:07d}"


def test_the_setting_is_back_after_an_audit_into_a_file(tmp_path):
    db = tmp_path / "audit.duckdb"
    with audit([ROOT / "fixtures" / "seed_split_brain.jsonl"], db=db) as result:
        assert _setting(result.store) is False
        assert result.grade_counts() == {"double_commit": 1, "stale_commit": 1, "stale_attempt": 1,
                                         "stale_activity": 1}


def test_a_store_opened_beside_an_ordered_read_leaves_it_in_order(tmp_path):
    # auditor serve reopens its store while a report reads detection's tables: the setting is the
    # database's, and the second store must not turn it off under the first one's scans.
    db = tmp_path / "shared.duckdb"
    with Store(db) as first:
        with first.in_order():
            with Store(db) as second:
                assert _setting(first) is True and _setting(second) is True
                with second.in_order():
                    pass
                assert _setting(first) is True  # the inner block ended; the outer one still reads
        assert _setting(first) is False
        with Store(db, read_only=True) as third:
            assert _setting(third) is False


def test_keys_read_out_of_order_stop_the_audit():
    import pyarrow as pa
    import pytest

    from auditor.detect.batch.rows import _ascending

    assert _ascending(pa.array(["a", "b", "c"]), None) == "c"
    assert _ascending(pa.array([], pa.string()), "c") == "c"
    assert _ascending(pa.array(["d"]), "c") == "d"
    for keys, last in ((["a", "c", "b"], None), (["c"], "c"), (["b", "d"], "c")):
        with pytest.raises(RuntimeError, match="out of key order"):
            _ascending(pa.array(keys), last)
