"""The stage statement reads back the attrs values an earlier statement of the same ingest decoded
(``store.setup.known_attrs``, joined as ``attrs_known`` in ``normalize.sql``'s ``picked``) instead of
handing them to the Python function again (issue 48: 0.73 s of Python per million lines). What is
stored must be what the function makes of each value, payloads hashed or kept, an empty object
absent; a value is handed to Python in one statement at most; and nothing of the raw values is
left in memory once the ingest ends (they hold payloads before hashing).
"""

from __future__ import annotations

import functools
import json

import pytest

import auditor.ingest.jsonl as jsonl
import auditor.store as store
import auditor.store.feed as feed
from auditor.ingest.sources import discover
from auditor.store.setup import known_attrs

ATTRS = [{"reason": "lease expired"},
         {"checkpoint": "charge", "result": "committed", "write": "refused"},  # result: a payload key
         {"amount_cents": 5000, "prompt": {"text": "secret", "n": [1, 2.5]}},   # a nested payload
         {},                                                                     # empty: no attrs
         {"zeta": 1, "alpha": "é\u2028\"quoted\""},                              # sorted, escaped
         "not an object"]                                                        # attrs: "..."


def _log(tmp_path):
    lines = []
    for i in range(12_000):
        event = {"seq": i + 1, "workflow_key": f"k{i % 50}", "kind": "progress", "epoch": 1, "worker": "w"}
        if i % 7:
            event["attrs"] = ATTRS[i % len(ATTRS)]
        lines.append(json.dumps(event, ensure_ascii=False))
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert path.stat().st_size > feed.SMALL_FILE  # read as a big file, in chunks
    return path


def _ingest(path, monkeypatch, *, keep_payloads: bool, known: bool):
    """(attrs by obs, the values handed to the function per statement) of one ingest."""
    monkeypatch.setattr(jsonl, "jsonl_chunks", functools.partial(jsonl.jsonl_chunks, chunk_bytes=64 << 10))
    monkeypatch.setattr(store.appending, "APPEND_ROWS", 2_000)  # several statements
    statement, handed = [0], {}
    real_batch, real_stage = store.attrs_batch, store.Store._stage

    def counting_batch(lines, keep):
        handed.setdefault(statement[0], []).extend(lines.to_pylist())
        return real_batch(lines, keep)

    def counting_stage(self, *args, **kwargs):
        statement[0] += 1
        return real_stage(self, *args, **kwargs)

    monkeypatch.setattr(store, "attrs_batch", counting_batch)
    monkeypatch.setattr(store.Store, "_stage", counting_stage)
    if not known:
        empty = known_attrs(keep_payloads)  # nothing is known outside an ingest
        monkeypatch.setattr(store.appending, "known_attrs", lambda keep: empty)
    with store.Store(None, keep_payloads=keep_payloads) as s:
        feed.read_source(s, discover([path])[0])
        rows = s.con.execute("SELECT obs, attrs FROM events ORDER BY obs").fetchall()
    assert known_attrs(keep_payloads).num_rows == 0  # forgotten with the ingest
    monkeypatch.undo()
    return rows, handed, statement[0]


@pytest.mark.parametrize("keep_payloads", [False, True], ids=["payloads hashed", "payloads kept"])
def test_known_attrs_store_what_the_function_makes(tmp_path, monkeypatch, keep_payloads):
    path = _log(tmp_path)
    with_known, handed, statements = _ingest(path, monkeypatch, keep_payloads=keep_payloads, known=True)
    without, handed_all, _ = _ingest(path, monkeypatch, keep_payloads=keep_payloads, known=False)
    assert statements >= 4
    assert with_known == without and len(with_known) == 12_000
    stored = {a for _, a in with_known}
    assert None in stored  # no attrs, and the empty object
    assert any("sha256:" in a for a in stored if a) == (not keep_payloads)  # hashed, or none is
    assert ('"secret"' in "".join(a for a in stored if a)) == keep_payloads
    # each value is handed to Python in the first statement that meets it, and never again
    first = {}
    for n, values in sorted(handed.items()):
        for v in values:
            assert first.setdefault(v, n) == n, f"{v!r} handed again in statement {n}"
    assert sum(map(len, handed.values())) < sum(map(len, handed_all.values())) / 3
    assert len(handed_all) == statements  # without the known values, every statement calls it
