"""A small input is audited in a store held in memory on one thread; the document is the file
store's, byte for byte."""

from __future__ import annotations

import gzip
import os

import pytest

from auditor import audit
from auditor.ingest import discover
from auditor.pipeline import analyze, ingest_paths, small_input
from auditor.render.json import render_json
from auditor.store import SMALL_INPUT, Store

from ..conftest import FIXTURES, vocabulary_of

LOGS = sorted(p for p in FIXTURES.iterdir() if not p.name.endswith((".expected.json", ".map.toml")))


def _document(log, small: bool) -> str:
    store = Store(None, small=small, vocabulary=vocabulary_of(log))
    ingest_paths([log], store, idempotent=False)
    with analyze(store) as result:
        return render_json(result)


@pytest.mark.parametrize("log", LOGS[::3], ids=lambda p: p.name)
def test_a_store_in_memory_writes_the_file_stores_document(log):
    assert _document(log, small=True) == _document(log, small=False)


def test_the_input_decides_where_the_store_is(tmp_path):
    line = b'{"seq":1,"workflow_key":"k","kind":"lease_acquired","epoch":1,"worker":"w","pad":"' + b"x" * 900 + b'"}\n'
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(line * (SMALL_INPUT // len(line)))  # just under the bound
    assert small_input(discover([plain]))
    with open(plain, "ab") as f:
        f.write(line)
    assert not small_input(discover([plain]))  # just over it
    packed = tmp_path / "packed.jsonl"  # gzip whatever its name: counted at 32 times its size
    packed.write_bytes(gzip.compress(os.urandom(SMALL_INPUT // 32 + 1), compresslevel=0))
    assert not small_input(discover([packed]))
    seed = FIXTURES / "seed_split_brain.jsonl"
    with audit([seed]) as small, audit([plain]) as big:
        assert (small.session._store.small, big.session._store.small) == (True, False)
        assert small.session._store.con.execute("SELECT current_setting('threads')").fetchone() == (1,)
