"""The store's typed append (``store_typed``, taken by ``Store.append_records``) against the careful
store: the same events (derived event ids included), quarantine and accounting, row for row.

The records are what ``auditor serve`` hands its store writer: the OTLP fixtures as serve decodes
them (JSON bodies), protobuf requests like the benchmark's, log records (no event id: derived),
and records built to sit on each edge of the typed path (a ts the normalizer reads as a number,
payload-like attrs, floats, blank and bracketed strings, optional fields, duplicates across appends).
"""

from __future__ import annotations

import math
import sys

import pytest

from auditor.serve.decode import JSON, PROTOBUF, _decode
from auditor.store import Store
from auditor.store.typed import prepare, split

from ..conftest import FIXTURES, ROOT

OTLP = sorted(FIXTURES.glob("otlp_*.jsonl"))


def _served(path) -> list[dict]:
    out = []
    for line in path.read_bytes().splitlines():
        if line.strip():
            out += _decode("traces", line, JSON)[0]
    return out


def _protobuf() -> list[dict]:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from otel_overhead import _request
    finally:
        sys.path.pop(0)
    return [r for b in range(3) for r in _decode("traces", _request(0, b, spans=5, events=4), PROTOBUF)[0]]


def _logs() -> list[dict]:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    req = ExportLogsServiceRequest()
    logs = req.resource_logs.add().scope_logs.add()
    for i in range(4):
        lr = logs.log_records.add(event_name="ownership.progress", time_unix_nano=1_790_000_000_000_000_000 + i)
        for k, v in (("ownership.workflow_key", "log/k"), ("ownership.epoch", 1), ("ownership.seq", i),
                     ("ownership.worker", "w"), ("note", "x")):
            lr.attributes.append(KeyValue(key=k, value=AnyValue(int_value=v) if isinstance(v, int)
                                          else AnyValue(string_value=v)))
    return _decode("logs", req.SerializeToString(), PROTOBUF)[0]


def _edges() -> list[dict]:
    base = {"workflow_key": "edge", "kind": "progress", "epoch": 1, "worker": "w"}
    recs = [
        {**base, "seq": 1, "ts": "2026-07-26T10:00:00Z", "attrs": {"a": 1}},
        {**base, "seq": 2, "ts": "1790000000"},                        # the normalizer reads it as epoch seconds
        {**base, "seq": 3, "ts": "not a time"},                        # dropped, the event stays
        {**base, "seq": 4, "attrs": {"prompt": "secret", "nested": {"tool_input": [1, 2]}}},
        {**base, "seq": 5, "attrs": {"f": 0.1, "g": -0.0, "h": 1e300, "i": 5e-324, "j": 1.0, "b": True, "n": None}},
        {**base, "seq": 6, "attrs": {"big": 1 << 70}},                  # beyond 64 bits: the JSON way
        {**base, "seq": 7, "attrs": {"nan": math.nan}},
        {**base, "seq": 8, "worker": " "},                            # blank: absent
        {**base, "seq": 9, "worker": "{x"},
        {**base, "seq": 10, "worker": "\tw"},
        {**base, "seq": 11, "lease_until": "2026-07-26T10:05:00Z"},  # optional field: the JSON way
        {**base, "seq": 12, "attrs": {}},
        {**base, "seq": 13, "attrs": "text"},
        {**base, "seq": 14, "attrs": {"u": "ünï 😀 \n"}, "step_id": "é"},
        {**base, "seq": 15, "epoch": "1"},
        {**base, "seq": True},
        {**base, "seq": 17, "kind": "effect_attempted", "effect_key": "e1", "sink": "db", "sink_result": "ok",
         "reporter": "sink"},
        {**base, "seq": 18, "kind": "effect_committed"},                # no effect_key: quarantined
        {**base, "seq": 19, "kind": "outcome_verified", "effect_key": "e1", "epoch": 7},
        {**base, "seq": 20, "kind": "progress", "sink_result": "ok"},
        {**base, "seq": 21, "Kind": "progress"},
        {**base, "seq": 22, "extra": 5},
        {**base, "seq": 23, "worker": None},
        {"workflow_key": "edge-observed", "kind": "progress", "epoch": 1},  # no seq: observation order
        {"workflow_key": "edge-observed", "kind": "lease_acquired", "epoch": 2},
        {**base, "seq": 24, "attrs": {"s": "lone \ud800 surrogate"}},
        {**base, "seq": 25, "event_id": "given-1"},
        {**base, "seq": 26, "event_id": "given-1"},                    # one id, other content: both kept
    ]
    return recs + [dict(r) for r in recs[:5]]                       # exact duplicates collapse


def _contents(store: Store) -> tuple:
    q = store.con.execute
    return (q("SELECT * EXCLUDE (source_id) FROM events ORDER BY obs").fetchall(),
            q("SELECT * FROM quarantine ORDER BY source_id, line").fetchall(),
            q("SELECT * FROM sources ORDER BY source_id").fetchall())


def _append(careful: bool, batches: list[list[dict]]) -> tuple:
    with Store(None, careful=careful) as store:
        line = 0
        for batch in batches:
            recs = []
            for r in batch:
                line += 1
                recs.append((line, r))
            store.append_records("otlp:serve", recs)
        return _contents(store)


def _append_parts(batches: list[list[dict]], keep_payloads: bool = False) -> tuple:
    """The batches as serve's writer appends them: each in parts of a few records, every other part
    split ahead (``prepare``, as a decoder process does), lines numbered on across parts."""
    with Store(None) as store:
        line = 1
        for batch in batches:
            parts = []
            for n, i in enumerate(range(0, len(batch), 7)):
                recs = batch[i:i + 7]
                parts.append((line, recs, prepare(recs, keep_payloads) if n % 2 == 0 else None))
                line += len(recs)
            store.append_parts("otlp:serve", parts)
        return _contents(store)


RECORDS = {"fixtures": lambda: [r for p in OTLP for r in _served(p)], "protobuf": _protobuf, "logs": _logs,
           "edges": _edges}


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_typed_append_writes_what_the_careful_store_writes(name):
    records = RECORDS[name]()
    assert records
    batches = [records, [dict(r) for r in records[: len(records) // 2]]]  # the second repeats: duplicates
    assert _append(False, batches) == _append(True, batches)


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_parts_split_ahead_write_what_the_careful_store_writes(name):
    records = RECORDS[name]()
    batches = [records, [dict(r) for r in records[: len(records) // 2]]]
    careful = _append(True, batches)
    assert _append_parts(batches) == careful
    # a split made with another keep_payloads is not taken: the store splits again, by its own
    assert _append_parts(batches, keep_payloads=True) == careful


def test_typed_append_takes_the_records_serve_sends():
    """The shortcut is really taken for the common shape (else the test above pins nothing)."""
    for name in ("fixtures", "protobuf", "logs"):
        records = RECORDS[name]()
        _cols, rest = split([(i, i, r) for i, r in enumerate(records, 1)], False)
        assert len(rest) < len(records) / 2, name
    _cols, rest = split([(i, i, r) for i, r in enumerate(_edges(), 1)], False)
    assert 0 < len(rest) < len(_edges())


_DETECTED = ("seq", "workflow_key", "kind", "epoch", "worker", "effect_key", "sink", "sink_result", "reporter",
             "step_id")


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_the_live_shortcut_follows_the_stores_rule(name):
    """One rule (``store_typed.typed``) for both engines: the live shortcut takes a record exactly
    when the store's split types it and it has a seq; the events serve's audit builds from the
    typed columns are the shortcut's own; and each is what the checked path makes of the record,
    in every field the detector reads."""
    from auditor.otel.convert import event_from_record, record_event, typed_events
    from auditor.store.typed import typed

    # a value Arrow cannot hold (a lone surrogate) sends its whole request the record way: not here
    records = [r for r in RECORDS[name]() if prepare([r]).typed is not None]
    _cols, rest = split([(i, i, r) for i, r in enumerate(records, 1)], False)
    untyped = {pos for _line, pos, _rec in rest}
    from_columns = typed_events(prepare(records), len(records))
    for pos, rec in enumerate(records, 1):
        shortcut = record_event(rec)
        assert (shortcut is not None) == (typed(rec, rec.get("kind")) and rec.get("seq") is not None), rec
        if pos not in untyped:
            assert (shortcut is not None) == (rec.get("seq") is not None), rec
        if from_columns[pos - 1] is not None or pos not in untyped:
            assert from_columns[pos - 1] == shortcut, rec
        if shortcut is not None:
            checked = event_from_record(rec)
            assert [getattr(shortcut, f) for f in _DETECTED] == [getattr(checked, f) for f in _DETECTED], rec


def test_serves_events_from_columns_keep_each_records_place():
    """A request mixing typed records with ones that take the checked way (a string epoch, no seq,
    an optional field): the typed columns give the events at their records' places, None elsewhere."""
    from auditor.otel.convert import record_event, typed_events

    base = {"workflow_key": "k", "kind": "progress", "epoch": 1, "worker": "w", "attrs": {"otel.capped": True}}
    records = [{**base, "seq": 1}, {**base, "seq": 2, "epoch": "1"}, {**base, "seq": 3},
               {"workflow_key": "k2", "kind": "progress", "epoch": 1}, {**base, "seq": 5, "reason": "r"},
               {**base, "seq": 6, "attrs": {"otel.span_name": "\"otel.capped\""}}]
    events = typed_events(prepare(records), len(records))
    assert [e is not None for e in events] == [True, False, True, False, False, True]
    assert [e for e in events if e is not None] == [record_event(records[i]) for i in (0, 2, 5)]
    assert [e.attrs for e in events if e is not None] == [{"otel.capped": True}, {"otel.capped": True}, None]


def test_the_typed_attrs_memory_never_holds_a_hashed_payload():
    """Flat attrs are remembered by their values (``typed._ATTRS_CACHE``) for as long as the
    process runs (serve's decoder processes end no ingest that would forget them): a payload that
    is stored hashed must not be held there as given; one kept as given (keep_payloads) may be."""
    from auditor.store import typed

    typed._ATTRS_CACHE.clear()
    hashed = typed._attrs_text({"prompt": "secret plan", "tool": "search"}, False)
    assert "secret plan" not in hashed and "sha256:" in hashed
    plain = typed._attrs_text({"tool": "search", "span": "call"}, False)
    kept = typed._attrs_text({"prompt": "kept plan"}, True)
    assert "kept plan" in kept
    held = repr(list(typed._ATTRS_CACHE))
    assert "secret plan" not in held
    assert "'tool', 'search'), ('span', 'call')" in held and "kept plan" in held  # the cache still works
    assert typed._attrs_text({"tool": "search", "span": "call"}, False) is plain  # read back, not remade
    typed._ATTRS_CACHE.clear()
