"""Detection's fact rows (handovers, acquirers, verifications) are read in key order and grouped
by key with arrow (``rows._grouped``): a key's rows may be cut by a batch's end, a batch may be
empty, and a key's rows that do not lie together are two groups (``_Facts.take`` then stops the
audit), exactly as ``itertools.groupby`` over the rows one by one."""

from __future__ import annotations

from itertools import groupby
from operator import itemgetter

import pyarrow as pa
import pytest

from auditor.detect.batch.rows import _grouped


def _batches(keys: list[str], cuts: list[int]):
    """The rows (key, n) of ``keys``, cut into batches at ``cuts``."""
    table = pa.table({"workflow_key": keys, "n": list(range(len(keys)))})
    bounds = [0, *cuts, len(keys)]
    return [table.slice(a, b - a).to_batches()[0] if b > a else
            pa.RecordBatch.from_pylist([], table.schema) for a, b in zip(bounds, bounds[1:])]


CASES = {
    "one batch": (["a", "a", "b", "c", "c", "c"], []),
    "a key cut by a batch's end": (["a", "a", "b", "b", "b", "c"], [3]),
    "a key over three batches": (["a", "b", "b", "b", "b", "c"], [2, 3, 4]),
    "empty batches between": (["a", "a", "b"], [1, 1, 1, 3]),
    "a key apart from its own rows": (["a", "b", "a"], [1]),
    "one row a batch": (["a", "a", "b", "b"], [1, 2, 3]),
    "nothing": ([], []),
    "null keys": (["a", None, None, "b", None], [2]),
}


@pytest.mark.parametrize("keys, cuts", CASES.values(), ids=CASES.keys())
def test_grouped_is_groupby_over_the_rows(keys, cuts):
    batches = _batches(keys, cuts)
    rows = [row for b in batches for row in zip(*(c.to_pylist() for c in b.columns))]
    expected = [(k, list(g)) for k, g in groupby(rows, key=itemgetter(0))]
    assert list(_grouped(iter(batches))) == expected
