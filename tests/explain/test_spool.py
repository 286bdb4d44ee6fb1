"""``Spool.containing``: the items of a spool whose line holds a byte string, in order, decoded
only for those lines (how a report's timelines find their keys' findings among a million)."""

from __future__ import annotations

import orjson
import pytest

from auditor.explain import spool
from auditor.explain.spool import Spool

KEYS = ["a", "b", 'c"d', "é", "a\\b", "wf-1"]


def _items() -> list[dict]:
    # a worker named like another key must not bring its item along: the needle names the field
    return [{"workflow_key": KEYS[i * 7 % len(KEYS)], "worker": KEYS[i % len(KEYS)], "n": i} for i in range(3000)]


def _needles(keys):
    return [b'"workflow_key":' + orjson.dumps(k) for k in keys]


@pytest.mark.parametrize("in_memory", [True, False])
@pytest.mark.parametrize("block", [64, spool.BLOCK])
@pytest.mark.parametrize("keys", [["a"], ['c"d', "é"], ["zz"], ["a\\b", "a", "a"], KEYS])
def test_containing_is_the_filtered_list(monkeypatch, in_memory, block, keys):
    monkeypatch.setattr(spool, "IN_MEMORY", 1 << 30 if in_memory else 0)
    monkeypatch.setattr(spool, "BLOCK", block)
    items = _items()
    s = Spool.of(items, dict)
    got = list(s.containing(_needles(keys)))
    assert got == [i for i in items if i["workflow_key"] in keys]
    assert len(got) == sum(1 for i in items if i["workflow_key"] in keys)


def test_containing_reads_held_items_as_held():
    s = Spool.of([{"workflow_key": "a", "n": 0}], dict)
    held = {"workflow_key": "a", "n": 1, "extra": True}
    s.append(held)
    assert list(s.containing(_needles(["a"]))) == [{"workflow_key": "a", "n": 0}, held]
    assert list(s.containing(_needles(["b"]))) == []


def test_encoded_lines_do_not_keep_the_buffers_they_were_written_in():
    """orjson returns each line in the buffer it wrote it in (16 KB for a finding): a spool copies
    the lines as they are made, so adding a batch costs about the bytes it writes."""
    import tracemalloc

    from auditor.core.model import Finding, Grade, Kind

    findings = [Finding(f"f-{i}", Grade.STALE_COMMIT, f"k-{i}", i, i, Kind.PROGRESS, 1, "w", 2, "v", 1, 1)
                for i in range(5000)]
    written = sum(len(orjson.dumps(f)) + 1 for f in findings)
    s = Spool(dict)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        s.extend_items(findings)
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert len(s) == 5000 and s.line(4999) == orjson.dumps(findings[-1])
    assert peak < 3 * written, (peak, written)  # a list of the encoded lines: 30 times as much
