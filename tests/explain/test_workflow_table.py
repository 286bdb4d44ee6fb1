"""``WorkflowTable``, the workflow summaries held as columns, against the list of summaries it stands for."""

from __future__ import annotations

import pickle

import orjson
import pytest

from auditor import audit
from auditor.core.model import Grade
from auditor.explain.result import WorkflowSummary, WorkflowTable

from ..conftest import FIXTURES

# Keys JSON must escape (quote, backslash, control characters) beside ones it must not touch.
KEYS = ['a"quoted"', "back\\slash", "tab\there", "nl\nline", "\x00nul", "\x1fus", "\x7fdel", "slash/key",
        "é-ünïcode", "\u2028sep", "😀", "plain/key"]


def summaries() -> list[WorkflowSummary]:
    out = []
    for n, key in enumerate(sorted(KEYS)):
        handovers = n % 3
        if n % 4 == 1:  # a key with findings: a handover named by one, its severity
            out.append(WorkflowSummary(key, 10 + n, handovers + 1, handovers, max(handovers - 1, 0), 2,
                                       Grade.STALE_COMMIT, "authoritative"))
        else:
            out.append(WorkflowSummary(key, 10 + n, handovers + 1, handovers, handovers, 0, None,
                                       "observed" if n % 5 == 2 else "authoritative"))
    return out


def test_table_reads_as_the_list_it_was_made_of():
    rows = summaries()
    table = WorkflowTable.of(rows)
    assert len(table) == len(rows)
    assert list(table) == rows and table == rows
    assert [table[i] for i in range(len(rows))] == rows
    assert table[-1] == rows[-1] and table[2:5] == rows[2:5]
    with pytest.raises(IndexError):
        table[len(rows)]
    assert pickle.loads(pickle.dumps(table)) == rows
    assert table.totals() == (sum(w.acquisitions for w in rows), sum(w.handovers for w in rows),
                              sum(w.clean_handovers for w in rows))
    assert table.observed() == sum(1 for w in rows if w.ordering == "observed")
    clean = [w.workflow_key for w in rows if w.findings == 0 and w.clean_handovers > 0]
    assert table.clean_keys(100) == clean and table.clean_keys(2) == clean[:2]


@pytest.mark.parametrize("chunk", [65_536, 5, 1])
def test_json_lines_are_what_orjson_writes_of_each_summary(chunk):
    rows = summaries()
    lines = [line for part in WorkflowTable.of(rows).json_lines(chunk) for line in part]
    assert lines == [orjson.dumps(w).decode() for w in rows]


def test_empty_table():
    table = WorkflowTable.of([])
    assert len(table) == 0 and list(table) == [] and list(table.json_lines()) == []
    assert table.totals() == (0, 0, 0) and table.observed() == 0 and table.clean_keys(3) == []


def test_an_audit_keeps_clean_keys_as_columns():
    with audit([FIXTURES / "seed_split_brain.jsonl"]) as result:
        assert isinstance(result.workflows, WorkflowTable)
        by_key = {w.workflow_key: w for w in result.workflows}
        assert by_key["ledger/export/2026-07-26"].severity is Grade.DOUBLE_COMMIT
        assert by_key["reports/index/2026-07-26"] == WorkflowSummary(
            "reports/index/2026-07-26", 4, 2, 1, 1, 0, None, "authoritative")
