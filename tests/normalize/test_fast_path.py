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

from ..conftest import FIXTURES, ROOT, vocabulary_of

CORPUS = ROOT / "tests" / "corpus"
LOGS = sorted(p for p in [*FIXTURES.iterdir(), *CORPUS.iterdir()]
              if p.is_file() and not p.name.endswith((".expected.json", ".map.toml", ".py")))


def _document(log, careful: bool) -> str:
    # in memory (a small input, as audit() keeps it): the property is the normalizer's, not the store's
    store = Store(None, careful=careful, vocabulary=vocabulary_of(log), small=True)
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
    import auditor.store.setup

    calls = []
    real = auditor.store.setup.normalize_line
    monkeypatch.setattr(auditor.store.setup, "normalize_line", lambda *a: calls.append(a) or real(*a))
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

    from auditor.core.fields import FIELDS
    from auditor.normalize.staging import SQL

    counted = re.findall(r"\(j\.(\w+) IS NOT NULL\)::INTEGER", SQL["stage"])
    assert sorted(counted) == sorted([*FIELDS, "attrs"])


def test_blank_is_what_str_strip_removes():
    """The stage sends a value starting with one of ``vocabulary.BLANK`` to the normalizer, whose
    test of a blank value is ``str.strip()``: the list written out must be exactly the characters
    this Python's ``str.isspace`` names, or a blank value could pass the fast path as text."""
    import sys

    from auditor.core.fields import BLANK

    assert BLANK == "".join(chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace())


def _rows(log, careful: bool):
    store = Store(None, careful=careful)
    try:
        ingest_paths([log], store, idempotent=False)
        return (store.con.execute("SELECT line, event_id, workflow_key, kind, epoch, worker, effect_key, sink, "
                                  "step_id, event_id, reason, authority_id, scope FROM events ORDER BY line").fetchall(),
                store.con.execute("SELECT line, reason FROM quarantine ORDER BY line").fetchall())
    finally:
        store.close()


# A value the fast path took as written although the normalizer reads it otherwise: a key given as
# true or a fraction (refused), or a text that str.strip() finds blank (absent) but DuckDB's trim,
# which removes spaces only, does not ("\t", "\n", no-break and other Unicode spaces).
@pytest.mark.parametrize("member", [
    '"effect_key": true', '"effect_key": 1.5', '"effect_key": "\\t"', '"workflow_key": "\\n"',
    '"worker": "\\t"', '"sink": "\\u00a0"', '"step_id": "\\u2028"', '"event_id": "\\u3000"',
    '"authority_id": "\\t"', '"reason": "\\u0085"', '"scope": "\\u000b"', '"worker": " x"'])
def test_fast_path_reads_each_value_as_the_normalizer(tmp_path, member):
    log = tmp_path / "one.jsonl"
    log.write_text('{"seq": 1, "workflow_key": "k", "kind": "lease_acquired", "epoch": 1}\n'
                   '{"seq": 2, "workflow_key": "k", "kind": "effect_committed", "epoch": 1, "effect_key": "x", '
                   + member + '}\n')
    assert _rows(log, careful=False) == _rows(log, careful=True)


def test_a_boolean_effect_key_is_not_a_pass(tmp_path):
    """The reference refuses `"effect_key": true` (a key is a string or an integer): the fast path
    used to read it as "true", and the audit passed on a line the normalizer (and the live
    detector) quarantine."""
    from auditor import audit

    log = tmp_path / "one.jsonl"
    log.write_text('{"seq": 1, "workflow_key": "k", "kind": "lease_acquired", "epoch": 1}\n'
                   '{"seq": 2, "workflow_key": "k", "kind": "effect_committed", "epoch": 1, "effect_key": true}\n')
    with audit([log]) as result:
        assert result.verdict.value == "incomplete"


INSTANTS = ["2026-07-26T14:05:00Z", "2026-07-26t14:05:00z", "2026-07-26 14:05:00Z", "2026-07-26T14:05:00",
            "2026-07-26T14:05Z", "2026-07-26", "2026-07-26T14:05:00.1Z", "2026-07-26T14:05:00.123456789Z",
            "2026-07-26T14:05:00+02:00", "2026-07-26T14:05:00-0530", "2026-07-26T14:05:00+02",
            "2026-07-26T14:05:00 UTC", "20260726T140500Z", "2026-W30-7", "2026-07-26T24:00:00Z",
            "2026-7-26T14:05:00Z", "2026-07-26T14:05:00 +02:00", "2026-02-30T00:00:00Z", "2026-07-26T14:05:60Z",
            " 2026-07-26T14:05:00Z", "2026-07-26T14:05:00Z ", "2026-07-26T14:05:00.Z", "2026-07-26T14:05:00+24:00",
            "+2026-07-26T14:05:00Z", "2026-07-26Z", "２０２６-07-26T14:05:00Z"]


def test_both_engines_read_the_same_instants(tmp_path):
    """The store's cast (batch) and ``normalize.instant`` (live) read the same texts as the same
    instants, and refuse the same ones: ts, lease_until and expires_at."""
    import json
    from datetime import timezone

    from auditor.core.instants import instant

    log = tmp_path / "instants.jsonl"
    with open(log, "w", encoding="utf-8") as f:
        for n, text in enumerate(INSTANTS, 1):
            f.write(json.dumps({"seq": n, "workflow_key": "k", "kind": "lease_acquired", "epoch": n, "worker": "w",
                                "ts": text, "lease_until": text}) + "\n")
    with Store(None) as store:
        ingest_paths([log], store, idempotent=False)
        rows = store.con.execute("SELECT seq, ts_utc, lease_until, ts FROM events ORDER BY seq").fetchall()
    assert len(rows) == len(INSTANTS)
    for (seq, ts_utc, lease_until, ts), text in zip(rows, INSTANTS):
        live = instant(text)
        assert (ts_utc and ts_utc.astimezone(timezone.utc)) == (live and live.astimezone(timezone.utc)), text
        assert lease_until == ts_utc, text
        assert ts == (text if live else None), text
    read = [t for t in INSTANTS if instant(t) is not None]
    assert len(read) == 11 and "2026-07-26t14:05:00z" in read and "2026-07-26T14:05:00 UTC" not in read
