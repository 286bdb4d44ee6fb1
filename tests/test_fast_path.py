"""The fast ingest path against the careful one: the same JSON document, byte for byte.

``Store(careful=True)`` sends every line through ``normalize.normalize_line`` (the reference);
the default store takes the common shape on the SQL fast path. On every fixture and corpus file
the two must write the same document, or fail the same way. The big generated logs are compared
by bench/scale.py.
"""

from __future__ import annotations

import pytest

from auditor import AuditorError, analyze, ingest_paths
from auditor.render.json import render_json
from auditor.store import Store

from .conftest import FIXTURES, ROOT, vocabulary_of

CORPUS = ROOT / "tests" / "corpus"
LOGS = sorted(p for p in [*FIXTURES.iterdir(), *CORPUS.iterdir()]
              if p.is_file() and not p.name.endswith((".expected.json", ".map.toml", ".py")))


def _document(log, careful: bool) -> str:
    store = Store(None, careful=careful, vocabulary=vocabulary_of(log))
    try:
        ingest_paths([log], store, idempotent=False)
        result = analyze(store)
    except AuditorError as e:
        store.close()
        return f"{type(e).__name__}: {e}"
    with result:
        return render_json(result)


@pytest.mark.parametrize("log", LOGS, ids=[p.name for p in LOGS])
def test_fast_path_writes_the_careful_document(log):
    assert _document(log, careful=False) == _document(log, careful=True)


def test_careful_store_takes_no_line_on_the_fast_path(tmp_path, monkeypatch):
    """The reference really is the careful normalizer: with ``careful`` every line reaches
    ``normalize_line``; without it a canonical line does not."""
    import auditor.store_setup

    calls = []
    real = auditor.store_setup.normalize_line
    monkeypatch.setattr(auditor.store_setup, "normalize_line", lambda *a: calls.append(a) or real(*a))
    log = tmp_path / "one.jsonl"
    log.write_text('{"seq":1,"workflow_key":"k","kind":"lease_acquired","epoch":1,"worker":"w"}\n'
                   '{"seq":2,"workflow_key":"k","kind":"progress","epoch":1,"worker":"w"}\n')
    fast = _document(log, careful=False)
    assert calls == []
    assert _document(log, careful=True) == fast
    assert len(calls) == 2


def test_fast_path_counts_every_canonical_field():
    """The stage's member count names each field json_transform fills (the vocabulary's FIELDS and
    attrs): a field left out would send every line naming it to the careful path, or worse."""
    import re

    from auditor.store import SQL
    from auditor.vocabulary import FIELDS

    counted = re.findall(r"\(j\.(\w+) IS NOT NULL\)::INTEGER", SQL["stage"])
    assert sorted(counted) == sorted([*FIELDS, "attrs"])
