"""SPEC revision 3.1 at the normalizer: hexadecimal integers (item 6 of issue 42) read alike by the
reference normalizer, the store's SQL fast path and the live doors."""

from __future__ import annotations

import json

import pytest

from auditor import audit
from auditor.normalize.reference import Rejected, normalize, parse_line
from auditor.normalize.vocabulary import Vocabulary
from auditor.store import Store
from auditor import ingest_paths

from ..conftest import FIXTURES

# (text as written, the integer it is, or None: quarantined)
HEX = [("0x24", 36), ("0X24", 36), ("0xff", 255), ("0xFF", 255), ("0x0024", 36), (" 0x24 ", 36),
       ("0x7FFFFFFFFFFFFFFF", (1 << 63) - 1), ("0x8000000000000000", None), ("0xFFFFFFFFFFFFFFFF", None),
       ("0x", None), ("-0x24", None), ("+0x24", None), ("0x_1", None), ("0x1g", None), ("0b101", None),
       ("1e3", None), ("0o17", None), ("x24", None), ("24", 24)]


@pytest.mark.parametrize("field", ["seq", "epoch"])
@pytest.mark.parametrize("text, value", HEX, ids=[t for t, _ in HEX])
def test_the_reference_reads_hex_integers(field, text, value):
    line = {"seq": 1, "workflow_key": "k", "kind": "progress", "epoch": 3, field: text}
    if value is None:
        with pytest.raises(Rejected, match=f'"{field}" is ".*", expected an integer in int64 range'):
            normalize(parse_line(json.dumps(line)), Vocabulary.default())
    else:
        assert normalize(parse_line(json.dumps(line)), Vocabulary.default())[field] == value


def _stored(log, careful: bool):
    store = Store(None, careful=careful)
    try:
        ingest_paths([log], store, idempotent=False)
        return (store.con.execute("SELECT line, seq, epoch FROM events ORDER BY line").fetchall(),
                store.con.execute("SELECT line, reason FROM quarantine ORDER BY line").fetchall())
    finally:
        store.close()


def test_the_sql_fast_path_reads_hex_as_the_reference(tmp_path, monkeypatch):
    """Each text as seq and as epoch: the fast store and the careful one (every line through the
    reference) store the same values and quarantine the same lines; a canonical line with hex
    values stays on the fast path (the normalizer is not called for it)."""
    import auditor.store.setup

    lines = []
    for i, (text, _) in enumerate(HEX):  # one key per line: equal values would be duplicates
        lines.append({"seq": text, "workflow_key": f"s{i}", "kind": "progress", "epoch": 3})
        lines.append({"seq": 1, "workflow_key": f"e{i}", "kind": "progress", "epoch": text})
    log = tmp_path / "hex.jsonl"
    log.write_text("".join(json.dumps(x) + "\n" for x in lines))
    fast = _stored(log, careful=False)
    assert fast == _stored(log, careful=True)
    want = []
    for i, (_text, value) in enumerate(HEX):
        if value is not None:
            want += [(2 * i + 1, value, 3), (2 * i + 2, 1, value)]
    assert fast[0] == want
    assert [line for line, _ in fast[1]] == sorted({2 * i + 1 for i, (_, v) in enumerate(HEX) if v is None}
                                                   | {2 * i + 2 for i, (_, v) in enumerate(HEX) if v is None})
    calls = []
    real = auditor.store.setup.normalize_line
    monkeypatch.setattr(auditor.store.setup, "normalize_line", lambda *a: calls.append(a) or real(*a))
    one = tmp_path / "one.jsonl"
    one.write_text('{"seq":"0x24","workflow_key":"k","kind":"lease_acquired","epoch":"0x2","worker":"w"}\n')
    assert _stored(one, careful=False) == ([(1, 36, 2)], [])
    assert calls == []


def test_two_spellings_compare_by_integer_value_hex_included():
    """``"zxid": "0x24"`` mapped onto seq beside ``"seq": 36`` agree; beside 37 they are ambiguous."""
    v = Vocabulary.build(fields={"zxid": "seq"})
    base = {"workflow_key": "k", "kind": "progress", "epoch": 1}
    assert normalize(parse_line(json.dumps({**base, "seq": 36, "zxid": "0x24"})), v)["seq"] == 36
    with pytest.raises(Rejected, match='"seq" is given twice with different values'):
        normalize(parse_line(json.dumps({**base, "seq": 37, "zxid": "0x24"})), v)


def test_the_live_converter_reads_hex():
    from auditor.otel import MappingError, event_from_record

    rec = {"seq": "0x2d", "workflow_key": "k", "kind": "effect_committed", "epoch": "0x24", "effect_key": "e"}
    e = event_from_record(rec)
    assert (e.seq, e.epoch) == (45, 36)
    with pytest.raises(MappingError, match='"seq" is "0xFFFFFFFFFFFFFFFF", expected an integer in int64 range'):
        event_from_record({**rec, "seq": "0xFFFFFFFFFFFFFFFF"})


def test_a_span_with_hex_attributes_reaches_the_batch_findings():
    """The span processor (real SDK) on the ZooKeeper fixture's events, seq and epoch given as the
    hex strings the log wrote: the same findings as the batch audit of the log."""
    from opentelemetry.sdk.trace import TracerProvider

    from auditor.otel import AuditSpanProcessor

    log = FIXTURES / "zookeeper_hex_zxids.logfmt"
    batch = audit([log], vocabulary=FIXTURES / "zookeeper_hex_zxids.map.toml")
    kinds = {"acquired lock": "lease_acquired", "exported rows": "progress", "wrote result": "effect_committed"}
    processor = AuditSpanProcessor()
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("zk")
    for line in log.read_text().splitlines():
        f = dict(part.split("=", 1) for part in line.replace('"acquired lock"', "acquired_lock")
                 .replace('"exported rows"', "exported_rows").replace('"wrote result"', "wrote_result").split())
        attrs = {"ownership.event": kinds[f["msg"].replace("_", " ")], "ownership.seq": f["zxid"],
                 "ownership.epoch": f["czxid"], "ownership.workflow_key": f["job"], "ownership.worker": f["worker"]}
        if "idempotency_key" in f:
            attrs.update({"ownership.effect_key": f["idempotency_key"], "ownership.reporter": f["reporter"]})
        with tracer.start_as_current_span("step", attributes=attrs):
            pass
    assert processor.force_flush(5000)
    provider.shutdown()
    got = [(f.grade.value, f.workflow_key, f.seq) for f in processor.findings]
    assert got == [(f.grade.value, f.workflow_key, f.seq) for f in batch.findings]
    assert got == [("stale_activity", "ledger/export", 44), ("stale_commit", "ledger/export", 45),
                   ("double_commit", "ledger/export", 46)]


# Item 3: two values of a descriptive field drop that field and keep the event.

def test_two_values_of_a_descriptive_field_drop_it_and_keep_the_event():
    v = Vocabulary.default()
    base = {"seq": 3, "workflow_key": "k", "kind": "effect_committed", "epoch": 17, "effect_key": "e"}
    got = normalize(parse_line('{"seq": 3, "workflow_key": "k", "kind": "effect_committed", "epoch": 17, '
                               '"effect_key": "e", "worker": "a", "Worker": "b", "reporter": "sink", '
                               '"Reporter": "worker", "ts": "2026-07-26T02:00:00Z", "TS": "2026-07-26T03:00:00Z"}'), v)
    assert (got["worker"], got["reporter"], got["ts"], got["dropped"]) == ("unknown", None, None,
                                                                          ["reporter", "ts", "worker"])
    # agreeing spellings are one value, as before
    assert normalize(parse_line(json.dumps({**base, "worker": "a", "Worker": "a"})), v)["worker"] == "a"
    # effect_key only costs the line on a kind that names an effect; epoch not on outcome_verified
    progress = normalize(parse_line('{"seq": 4, "workflow_key": "k", "kind": "progress", "epoch": 1, '
                                    '"effect_key": "x", "effectKey": "y"}'), v)
    assert (progress["effect_key"], progress["dropped"]) == (None, ["effect_key"])
    verified = normalize(parse_line('{"seq": 5, "workflow_key": "k", "kind": "outcome_verified", "epoch": 1, '
                                    '"Epoch": 2, "effect_key": "x"}'), v)
    assert verified["epoch"] is None
    for costly in ('"seq": 1, "Seq": 2', '"epoch": 1, "Epoch": 2', '"effect_key": "x", "effectKey": "y"',
                   '"workflow_key": "k", "workflowKey": "j"', '"kind": "effect_committed", "Kind": "progress"'):
        line = ('{"seq": 1, "workflow_key": "k", "kind": "effect_committed", "epoch": 1, "effect_key": "x", '
                + costly + "}")
        with pytest.raises(Rejected, match="is given twice with different values"):
            normalize(parse_line(line), v)


def test_the_stale_commit_with_two_workers_is_found_in_every_reading_door(tmp_path):
    """The fixture through the batch audit, a ``--db`` store (careful and fast), and the live
    converter: the commit at seq 3 is kept, its worker dropped, and reported."""
    from auditor.otel import event_from_record

    log = FIXTURES / "descriptive_field_given_twice_keeps_the_event.jsonl"
    with audit([log]) as r:
        assert [(f.grade.value, f.seq, f.worker) for f in r.findings] == [("stale_commit", 3, "unknown"),
                                                                         ("stale_activity", 4, "alpha")]
        malformed = [(d.line, d.detail.split(" could not")[0]) for d in r.diagnostics]
        assert malformed == [(3, '"worker"'), (4, '"effect_key"'), (4, '"sink"')]
        assert r.input.quarantined == 1  # line 5: an effect kind's effect_key given two values
    assert _stored(log, careful=False) == _stored(log, careful=True)
    e = event_from_record({"seq": 3, "workflow_key": "k", "kind": "effect_committed", "epoch": 17,
                           "effect_key": "e", "worker": "a", "Worker": "b"})
    assert (e.seq, e.worker) == (3, "unknown")


def test_otlp_keeps_a_span_whose_descriptive_attribute_is_given_twice(tmp_path):
    """OTLP JSON (files) and protobuf (serve): ``ownership.worker`` twice drops the worker, keeps
    the span; ``ownership.epoch`` twice still refuses it."""
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from auditor.ingest.otlp import read_otlp
    from auditor.otel.otlp_proto import trace_records

    def span(seq, twice):
        attrs = [{"key": "ownership.workflow_key", "value": {"stringValue": "k"}},
                 {"key": "ownership.event", "value": {"stringValue": "effect_committed"}},
                 {"key": "ownership.effect_key", "value": {"stringValue": "pay"}},
                 {"key": "ownership.seq", "value": {"intValue": str(seq)}},
                 {"key": "ownership.epoch", "value": {"intValue": "1"}},
                 *({"key": twice, "value": {"stringValue": v}} for v in ("a", "b"))]
        return {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + str(seq), "name": "run", "startTimeUnixNano": "1",
                "attributes": attrs}
    doc = {"resourceSpans": [{"scopeSpans": [{"spans": [span(3, "ownership.worker"), span(4, "ownership.epoch")]}]}]}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(doc) + "\n")
    got = list(read_otlp(path, "t.jsonl"))
    assert [r for _, _, r in got][1].startswith('span 2 of this line: attribute "ownership.epoch" is given twice')
    with audit([path]) as r:
        assert [(d.kind.value, d.detail.split(" could not")[0]) for d in r.diagnostics
                if d.kind.value == "malformed_field"] == [("malformed_field", '"worker"')]
        assert (r.input.events, r.input.quarantined) == (1, 1)
    body = ParseDict({"resourceSpans": [{"scopeSpans": [{"spans": [
        dict(s, traceId="AAAAAAAAAAAAAAAAAAAAAQ==", spanId="AAAAAAAAAAE=") for s in doc["resourceSpans"][0]
        ["scopeSpans"][0]["spans"]]}]}]}, ExportTraceServiceRequest()).SerializeToString()
    reasons: list[str] = []
    records = trace_records(body, reasons)
    assert [r["seq"] for r in records] == [3] and len(reasons) == 1
    from auditor.otel.convert import checked_event

    event, _ = checked_event(records[0])
    assert event.worker == "unknown"
