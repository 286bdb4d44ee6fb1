"""The OpenTelemetry door: the span -> canonical mapping, the OTLP JSON reader, and the span processor,
all with the real SDK (TracerProvider, real tracers, InMemorySpanExporter, InMemoryMetricReader)."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import multiprocessing
import os
import threading
import time
from datetime import datetime
from pathlib import Path

import pytest
import zstandard
from dataclasses import replace
from hypothesis import event, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, AlwaysRecordSampler

from auditor import audit, report
from auditor.ingest.otlp import read_otlp
from auditor.core.model import Confidence, Event
from auditor.otel import (OWNERSHIP_ATTRIBUTES, AuditAllSampler, AuditSpanProcessor, MappingError, event_from_record,
                          map_span, rfc3339, span_events, span_records)
from auditor.store import Store

from ..conftest import FIXTURES, run_cli
from .otel_kit import SEED, SEED_FINDINGS, triples

WITNESS_8 = ("epoch 18 (beta) was acquired at seq 5; epoch 17 (alpha) then committed release-index/2026-07-26 "
             "at seq 8: a displaced owner changed the outside world.")


#: Where evidence was read (SPEC rev 3: a position is its place in one input's observation order;
#: the live door numbers by arrival only the keys it orders so, and leaves the rest to the store).
PROVENANCE = ("file", "line", "position", "transition_position", "receipt_position", "since_position")


def same(f) -> dict:
    """A finding (or its JSON) without its provenance: the same evidence read from another source
    (file, line and position) is the same finding."""
    d = json.loads(json.dumps(f if isinstance(f, dict) else f.to_dict(), default=str))
    return {k: v for k, v in d.items() if k not in PROVENANCE}


def ns(ts: str) -> int:
    return int(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()) * 1_000_000_000


# Instrumenting the seed scenario: a coordinator thread grants leases (one short span per
# acquisition, carrying ownership.event); each worker thread opens one span per workflow key and
# marks progress, attempts and commits on it as span events. Threads take turns in seq order.

class Turns:
    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.next = 1

    def wait(self, seq: int) -> None:
        with self.cv:
            assert self.cv.wait_for(lambda: self.next == seq, timeout=20), f"seq {seq} never came"

    def done(self) -> None:
        with self.cv:
            self.next += 1
            self.cv.notify_all()


def ownership(e: dict, *fields: str) -> dict:
    return {f"ownership.{f}": e[f] for f in fields if f in e}


def act(tracer, events: list[dict], turns: Turns | None, hold: threading.Event | None = None) -> None:
    """Emit ``events`` (one actor's share of the seed) as spans and span events.

    Acquisitions are short spans carrying ``ownership.event``; the other events are span events on
    one span per (workflow key, worker, epoch), which ends when the actor is done (or released).
    """
    spans, last = {}, {}
    for e in events:
        if turns:
            turns.wait(e["seq"])
        if e["kind"] == "lease_acquired":
            tracer.start_span("lease.acquire", start_time=ns(e["ts"]), attributes={
                "ownership.event": "lease_acquired",
                **ownership(e, "seq", "workflow_key", "epoch", "worker", "reporter")}).end(ns(e["ts"]) + 2_000_000)
        else:
            owner = (e["workflow_key"], e.get("worker"), e.get("epoch"))
            span = spans.get(owner)
            if span is None:
                span = spans[owner] = tracer.start_span(
                    "step " + e["workflow_key"], start_time=ns(e["ts"]),
                    attributes=ownership(e, "workflow_key", "epoch", "worker"))
            span.add_event("ownership." + e["kind"], timestamp=ns(e["ts"]),
                           attributes={**ownership(e, "seq", "effect_key", "sink", "reporter"),
                                       **e.get("attrs", {})})
            last[owner] = ns(e["ts"])
        if turns:
            turns.done()
    if hold is not None:
        hold.wait(20)
    for owner, span in spans.items():
        span.end(last[owner] + 1_000_000_000)


def actors() -> dict[str, list[dict]]:
    by: dict[str, list[dict]] = {}
    for e in SEED:
        who = "coordinator" if e["kind"] == "lease_acquired" else e["worker"]
        by.setdefault(who, []).append(e)
    return by


def record_seed(provider: TracerProvider, before_alpha_ends=None) -> None:
    """The seed from one thread per actor; alpha's long span ends after everyone else's spans."""
    turns, alpha_may_end = Turns(), threading.Event()
    threads = {who: threading.Thread(target=act, args=(provider.get_tracer(who), events, turns,
                                                        alpha_may_end if who == "alpha" else None))
               for who, events in actors().items()}
    for t in threads.values():
        t.start()
    for who, t in threads.items():
        if who != "alpha":
            t.join(20)
    if before_alpha_ends is not None:
        before_alpha_ends()
    alpha_may_end.set()
    threads["alpha"].join(20)


# OTLP JSON as the Collector's file exporter writes it (hex ids, int64 as strings).

def _any(v):
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, (list, tuple)):
        return {"arrayValue": {"values": [_any(x) for x in v]}}
    return {"stringValue": str(v)}


def _kvs(attrs) -> list[dict]:
    return [{"key": k, "value": _any(v)} for k, v in (attrs or {}).items()]


def otlp_line(spans) -> str:
    """One export request holding ``spans``, grouped by resource and scope."""
    groups: dict = {}
    for s in spans:
        res = json.dumps(dict(s.resource.attributes), sort_keys=True)
        scope = s.instrumentation_scope.name if s.instrumentation_scope else ""
        groups.setdefault(res, {}).setdefault(scope, []).append(s)
    return json.dumps({"resourceSpans": [
        {"resource": {"attributes": _kvs(json.loads(res))},
         "scopeSpans": [{"scope": {"name": scope}, "spans": [{
             "traceId": format(s.context.trace_id, "032x"), "spanId": format(s.context.span_id, "016x"),
             "parentSpanId": format(s.parent.span_id, "016x") if s.parent else "",
             "name": s.name, "kind": s.kind.value + 1,
             "startTimeUnixNano": str(s.start_time), "endTimeUnixNano": str(s.end_time),
             "attributes": _kvs(s.attributes),
             "droppedAttributesCount": s.dropped_attributes, "droppedEventsCount": s.dropped_events,
             "events": [{"timeUnixNano": str(ev.timestamp), "name": ev.name, "attributes": _kvs(ev.attributes),
                         "droppedAttributesCount": ev.dropped_attributes} for ev in s.events],
             "status": {}} for s in group]} for scope, group in scopes.items()]}
        for res, scopes in groups.items()]})


def provider_with(processor, exporter=None, **kw) -> TracerProvider:
    provider = TracerProvider(**kw)
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(processor)
    return provider


# The mapping.

def test_map_span_inherits_overrides_and_keeps_attrs():
    recs = map_span(
        "ab" * 16, "cd" * 8, "charge", 1_785_031_560_000_000_000,
        {"ownership.workflow_key": "pay/inv-7", "ownership.epoch": 4, "ownership.effect_key": "payment:inv-7:capture",
         "gen_ai.tool.call.id": "call_9", "http.method": "POST"},
        [("ownership.effect_attempted", 1_785_031_561_500_000_000, {"ownership.seq": 11}, 0),
         ("exception", 1_785_031_562_000_000_000, {"exception.type": "Timeout"}, 0),
         ("ownership.effect_committed", 1_785_031_563_000_000_000,
          {"ownership.seq": 12, "ownership.reporter": "sink", "ownership.epoch": 5, "receipt": "r-1"}, 2)],
        {"service.instance.id": "pod-a", "service.name": "payments"}, False)
    assert recs == [
        {"workflow_key": "pay/inv-7", "epoch": 4, "effect_key": "payment:inv-7:capture", "worker": "pod-a",
         "kind": "effect_attempted", "seq": 11, "ts": "2026-07-26T02:06:01.500000Z",
         "event_id": f"otel:{'ab' * 16}:{'cd' * 8}:0",
         "attrs": {"gen_ai.tool.call.id": "call_9", "otel.span_name": "charge"}},
        {"workflow_key": "pay/inv-7", "epoch": 5, "effect_key": "payment:inv-7:capture", "worker": "pod-a",
         "kind": "effect_committed", "seq": 12, "reporter": "sink", "ts": "2026-07-26T02:06:03Z",
         "event_id": f"otel:{'ab' * 16}:{'cd' * 8}:2",
         "attrs": {"receipt": "r-1", "gen_ai.tool.call.id": "call_9", "otel.span_name": "charge",
                   "otel.capped": True}},
    ]


def test_map_span_level_event_and_worker_attribute():
    recs = map_span("0" * 31 + "1", "0" * 15 + "2", "lease.acquire", 1_785_031_500_000_000_000,
                    {"ownership.event": "ownership.lease_acquired", "ownership.workflow_key": "k",
                     "ownership.epoch": 18, "ownership.seq": 5, "ownership.worker": "beta"},
                    [], {"service.instance.id": "ignored"}, True)
    assert recs == [{"workflow_key": "k", "epoch": 18, "seq": 5, "worker": "beta", "kind": "lease_acquired",
                     "ts": "2026-07-26T02:05:00Z", "event_id": "otel:" + "0" * 31 + "1:" + "0" * 15 + "2:span",
                     "attrs": {"otel.span_name": "lease.acquire", "otel.capped": True}}]


def test_map_span_without_ownership_evidence_is_nothing():
    assert map_span("0" * 32, "0" * 16, "GET /", 1, {"ownership.workflow_key": "k", "http.route": "/"},
                    [("exception", 2, {}, 0)], {}, False) == []


RECORDS = [
    {"workflow_key": "k", "kind": "lease_acquired", "epoch": 3, "seq": 1, "event_id": "a"},
    {"workflow_key": "k", "kind": "job_claimed", "epoch": "4", "seq": "2", "worker": 7, "event_id": "b"},
    {"workflow_key": "k", "kind": "result_rejected", "epoch": 4, "seq": 3, "effect_key": "x", "event_id": "c"},
    {"workflow_key": "k", "kind": "effect_committed", "epoch": 4, "seq": 4, "effect_key": "x", "reporter": "SINK",
     "sink_result": "accepted", "event_id": "d", "attrs": {"otel.capped": True}},
    {"workflow_key": "k", "kind": "outcome_verified", "seq": 5, "effect_key": "x", "event_id": "e"},
    {"workflow_key": "k", "kind": "progress", "epoch": -1, "seq": 6, "event_id": "f"},
    {"workflow_key": "k", "kind": "progress", "epoch": "seventeen", "seq": 7, "event_id": "g"},
    {"workflow_key": "k", "kind": "lease_lost", "epoch": 1, "seq": 8, "event_id": "h"},
    {"kind": "progress", "epoch": 1, "seq": 9, "event_id": "i"},
    {"workflow_key": "k", "kind": "effect_attempted", "epoch": 1, "seq": 10, "event_id": "j"},
    {"workflow_key": "k", "kind": "effect_attempted", "epoch": 1, "seq": 11, "effect_key": "x",
     "sink_result": "maybe", "event_id": "l"},
    {"workflow_key": "k", "kind": "progress", "epoch": 1, "seq": 2 ** 63, "event_id": "m"},
    {"workflow_key": "k", "kind": "progress", "epoch": 1.5, "seq": 14, "event_id": "n"},
    {"workflow_key": "k", "kind": "progress", "epoch": True, "seq": 15, "event_id": "o"},
    {"workflow_key": "k", "kind": "progress", "epoch": 1, "seq": "+-5", "event_id": "p"},
    {"workflow_key": "k", "kind": "progress", "epoch": 1, "seq": 16, "reporter": "Boss", "event_id": "q"},
    {"workflow_key": "k", "kind": "Ownership.Progress", "epoch": " +2 ", "seq": " 17", "event_id": "r"},
    {"workflow_key": "", "kind": "progress", "epoch": 1, "seq": 18, "event_id": "s"},
]


def test_live_conversion_agrees_with_the_store_normalizer():
    """The live path's typed subset of the normalizer accepts and rejects exactly what the store does."""
    store = Store()
    store.append_records("records", list(enumerate(RECORDS, start=1)))
    stored = {e.event_id: e for e in store.iter_events()}
    live, rejected = {}, []
    for rec in RECORDS:
        try:
            e = event_from_record(rec)
            live[e.event_id] = e
        except MappingError as err:
            rejected.append((rec["event_id"], str(err)))
    # SPEC rev 2: an unknown sink_result ("l") counts as unknown, an unknown reporter ("q") is kept
    assert sorted(live) == sorted(stored) == ["a", "b", "c", "d", "e", "l", "q", "r"]
    # the same events; the store numbers them too (SPEC rev 3), the live door leaves that to it
    assert live == {k: dataclasses.replace(e, position=None) for k, e in stored.items()}
    assert [r for r, _ in rejected] == ["f", "g", "h", "i", "j", "m", "n", "o", "p", "s"]
    quarantined = store.con.execute("SELECT line, reason FROM quarantine ORDER BY line").fetchall()
    assert [reason for _, reason in quarantined] == [reason for _, reason in rejected]


# The OTLP reader.

def test_read_otlp_yields_records_and_reasons(tmp_path):
    good = {"resourceSpans": [{"resource": {"attributes": [{"key": "service.instance.id", "value": {"stringValue": "w1"}}]},
                               "scopeSpans": [{"scope": {}, "spans": [{
                                   "traceId": "5B8EFFF798038103D269B633813FC60C", "spanId": "EEE19B7EC3C1B174",
                                   "name": "run", "startTimeUnixNano": "1785031500000000000",
                                   "attributes": [{"key": "ownership.workflow_key", "value": {"stringValue": "k"}},
                                                  {"key": "ownership.epoch", "value": {"intValue": "2"}},
                                                  {"key": "tags", "value": {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": 3}]}}},
                                                  {"key": "cfg", "value": {"kvlistValue": {"values": [{"key": "on", "value": {"boolValue": True}}]}}}],
                                   "events": [{"timeUnixNano": "1785031501000000000", "name": "ownership.progress",
                                               "attributes": [{"key": "ownership.seq", "value": {"intValue": "9007199254740993"}},
                                                              {"key": "ratio", "value": {"doubleValue": 0.5}}]},
                                              {"timeUnixNano": "1785031502000000000", "name": "ownership.heartbeat_ok",
                                               "attributes": [{"key": "ownership.seq", "value": {"intValue": "10"}}]}],
                                   "droppedAttributesCount": 0, "droppedEventsCount": 1}]}]}]}
    b64 = json.loads(json.dumps(good))
    span = b64["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["traceId"], span["spanId"] = "W47/95gDgQPSabYzgT/GDA==", "7uGbfsPBsXQ="
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([json.dumps(good), "", "{not json", json.dumps({"resourceLogs": []}),
                               json.dumps({"spans": []}), json.dumps({"resourceSpans": {"a": 1}}),
                               json.dumps(b64)]) + "\n")
    got = list(read_otlp(path, "t.jsonl"))
    base = {"workflow_key": "k", "epoch": 2, "worker": "w1"}
    eid = "otel:5b8efff798038103d269b633813fc60c:eee19b7ec3c1b174:"
    first = [
        (1, {**base, "kind": "progress", "seq": 9007199254740993, "ts": "2026-07-26T02:05:01Z", "event_id": eid + "0",
             "attrs": {"ratio": 0.5, "otel.span_name": "run", "otel.capped": True}}, None),
        (1, {**base, "kind": "heartbeat_ok", "seq": 10, "ts": "2026-07-26T02:05:02Z", "event_id": eid + "1",
             "attrs": {"otel.span_name": "run", "otel.capped": True}}, None),
    ]
    assert got == first + [
        (3, None, "line is not valid JSON; the Collector's file exporter writes one JSON object per line"),
        (5, None, 'line has no "resourceSpans" or "resourceLogs"; expected OTLP JSON traces or logs '
                   '(Collector file exporter)'),
        (6, None, '"resourceSpans" is not a list; expected OTLP JSON'),
    ] + [(7, rec, None) for _, rec, _ in first]
    # the span-level attributes that are not ownership.* stay on the span, not on its events
    assert "tags" not in got[0][1]["attrs"]


@pytest.mark.parametrize("value, reason", [
    ({"doubleValue": "abc"}, '"doubleValue" is \'abc\', expected a number'),
    ({"arrayValue": [1]}, '"arrayValue" is not an object; expected OTLP JSON'),
    ({"kvlistValue": "s"}, '"kvlistValue" is not an object; expected OTLP JSON'),
])
def test_a_malformed_attribute_value_costs_its_span_not_the_audit(tmp_path, value, reason):
    """A value the reader could not take used to stop the whole audit with an unexpected
    ValueError or AttributeError, naming neither file nor line."""
    def span(seq, extra=()):
        return {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + str(seq), "name": "run", "startTimeUnixNano": "1",
                "attributes": [{"key": "ownership.workflow_key", "value": {"stringValue": "k"}},
                               {"key": "ownership.event", "value": {"stringValue": "lease_acquired"}},
                               {"key": "ownership.epoch", "value": {"intValue": str(seq)}},
                               {"key": "ownership.seq", "value": {"intValue": str(seq)}}, *extra]}
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        span(1), span(2, [{"key": "x", "value": value}])]}]}]}) + "\n" + json.dumps({"resourceSpans": [1]}) + "\n")
    assert [(n, r) for n, _, r in read_otlp(path, "t.jsonl")][1:] == [
        (1, f"span 2 of this line: {reason}; the line's other spans were read"),
        (2, '"resourceSpans[]" is not an object; expected OTLP JSON')]


def _twice_epoch_span(seq: int, epochs: tuple[int, ...]) -> dict:
    return {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + str(seq), "name": "run", "startTimeUnixNano": "1",
            "attributes": [{"key": "ownership.workflow_key", "value": {"stringValue": "k"}},
                           {"key": "ownership.event", "value": {"stringValue": "effect_committed"}},
                           {"key": "ownership.effect_key", "value": {"stringValue": "pay"}},
                           {"key": "ownership.seq", "value": {"intValue": str(seq)}},
                           *({"key": "ownership.epoch", "value": {"intValue": str(p)}} for p in epochs)]}


AMBIGUOUS = 'attribute "ownership.epoch" is given twice with different values; the record is ambiguous, keep one of them'


def test_an_ownership_attribute_given_twice_with_different_values_is_ambiguous(tmp_path):
    """As a JSON line naming "epoch" twice (FORMAT section 4): the span is refused, not read as
    its last value, which could make a stale commit (epoch 1) look current (epoch 2)."""
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        _twice_epoch_span(3, (1, 2)), _twice_epoch_span(4, (2, 2))]}]}]}) + "\n")
    got = list(read_otlp(path, "t.jsonl"))
    assert [(n, r) for n, _, r in got] == [(1, f"span 1 of this line: {AMBIGUOUS}; the line's other spans were read"),
                                           (1, None)]
    assert got[1][1]["epoch"] == 2  # the same value twice is read once


def test_an_ownership_attribute_given_twice_is_ambiguous_in_protobuf_too():
    from google.protobuf.json_format import ParseDict
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from auditor.otel.otlp_proto import trace_records

    def pb(span):
        span = dict(span, traceId="AAAAAAAAAAAAAAAAAAAAAQ==", spanId="AAAAAAAAAAE=")
        return span
    body = ParseDict({"resourceSpans": [{"scopeSpans": [{"spans": [
        pb(_twice_epoch_span(3, (1, 2))), pb(_twice_epoch_span(4, (2, 2)))]}]}]},
        ExportTraceServiceRequest()).SerializeToString()
    reasons: list[str] = []
    records = trace_records(body, reasons)
    assert reasons == [f"span 1 of this request: {AMBIGUOUS}"]
    assert [(r["seq"], r["epoch"]) for r in records] == [(4, 2)]


def test_an_otlp_bool_written_as_text_keeps_its_value():
    from auditor.ingest.otlp import _value

    assert [_value({"boolValue": b}) for b in (True, False, "true", "false", "False")] == [True, False, True, False, False]


def test_read_otlp_reads_zstd_and_open_files(tmp_path):
    text = (FIXTURES / "otlp_seed_split_brain.jsonl").read_bytes()
    zpath = tmp_path / "traces.jsonl.zst"
    zpath.write_bytes(zstandard.ZstdCompressor().compress(text))
    plain = list(read_otlp(FIXTURES / "otlp_seed_split_brain.jsonl"))
    assert len(plain) == 16
    assert list(read_otlp(zpath)) == plain
    assert list(read_otlp(io.BytesIO(text))) == plain
    assert list(read_otlp(io.StringIO(text.decode()))) == plain


def test_otlp_fixture_is_the_seed():
    """fixtures/otlp_seed_split_brain.jsonl was recorded with the real SDK by record_seed()."""
    result = audit([FIXTURES / "otlp_seed_split_brain.jsonl"])
    seed = audit([FIXTURES / "seed_split_brain.jsonl"])
    assert triples(result.findings) == SEED_FINDINGS
    assert [same(f) | {"id": 0} for f in result.findings] == [same(f) | {"id": 0} for f in seed.findings]
    assert [i.witness for i in result.incidents] == [i.witness for i in seed.incidents]
    assert WITNESS_8 in result.incidents[0].witness
    assert (result.input.lines_read, result.input.events, result.input.quarantined) == (16, 16, 0)


# The processor, on the real SDK.

@pytest.mark.parametrize("window_ms", [5000.0, 0.0], ids=["reorder-window", "late-arrivals"])
@pytest.mark.slow
def test_processor_reaches_the_seed_findings(tmp_path, caplog, window_ms):
    caplog.set_level(logging.WARNING, logger="auditor.otel")
    seen = []
    db = tmp_path / "live.duckdb"
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    processor = AuditSpanProcessor(seen.append, meter_provider=meters, db=db,
                                   reorder_window_millis=window_ms, schedule_delay_millis=20)
    exporter = InMemorySpanExporter()
    provider = provider_with(processor, exporter)
    record_seed(provider, None if window_ms else lambda: processor.force_flush(5000))
    assert processor.force_flush(10_000) is True
    batch = audit([FIXTURES / "seed_split_brain.jsonl"])

    assert triples(seen) == SEED_FINDINGS
    assert [same(f) for f in seen] == [same(f) for f in batch.findings]
    assert processor.detector.late_events == (0 if window_ms else 4)  # alpha's seqs 3, 6, 7, 8
    warnings = [r.getMessage() for r in caplog.records if r.name == "auditor.otel"]
    assert len(warnings) == 4
    assert warnings[2] == ("split-brain stale_commit on ledger/export/2026-07-26 at seq 8 (confidence high): "
                           + WITNESS_8)
    assert [r.__dict__["ownership.seq"] for r in caplog.records if r.name == "auditor.otel"] == [6, 7, 8, 9]
    provider.shutdown()

    metrics = {m.name: m for rm in reader.get_metrics_data().resource_metrics
               for sm in rm.scope_metrics for m in sm.metrics}
    by_grade = {p.attributes["ownership.grade"]: p.value for p in metrics["auditor.findings"].data.data_points}
    assert by_grade == {"stale_activity": 1, "stale_attempt": 1, "stale_commit": 1, "double_commit": 1}
    assert [p.value for p in metrics["auditor.reclaimed_acquisitions"].data.data_points] == [2]
    assert [p.value for p in metrics["auditor.stale_events"].data.data_points] == [3]

    # the persisted store gives the batch answer ...
    stored = report(db)
    assert [same(f) for f in stored.findings] == [same(f) for f in batch.findings]
    assert (stored.input.events, stored.input.quarantined) == (16, 0)
    assert [i.confidence for i in stored.incidents] == [Confidence.HIGH]
    # ... and so do the same spans written as an OTLP JSON file, through the CLI, by name and by content
    spans = exporter.get_finished_spans()
    traces = tmp_path / "traces.jsonl"
    traces.write_text(otlp_line(spans[:7]) + "\n" + otlp_line(spans[7:]) + "\n")
    sniffed = tmp_path / "collector-output"
    sniffed.write_bytes(zstandard.ZstdCompressor().compress(traces.read_bytes()))
    for args in (["--format", "otlp", str(traces)], [str(traces)], [str(sniffed)]):
        done = run_cli("audit", *args, "--json", "-")
        assert done.returncode == 1, done.stderr
        doc = json.loads(done.stdout)
        assert [(f["grade"], f["workflow_key"], f["seq"]) for f in doc["findings"]] == SEED_FINDINGS
        assert [same(f) for f in doc["findings"]] == [same(f) for f in batch.findings]


def test_processor_audits_what_the_sampler_records():
    exporter = InMemorySpanExporter()
    got = {}
    for name, sampler in (("off", ALWAYS_OFF), ("sdk-always-record", AlwaysRecordSampler(ALWAYS_OFF)),
                          ("audit-all", AuditAllSampler(ALWAYS_OFF))):
        processor = AuditSpanProcessor()
        provider = provider_with(processor, exporter, sampler=sampler)
        act(provider.get_tracer("t"), SEED, None)
        assert processor.force_flush(5000)
        provider.shutdown()
        got[name] = (triples(processor.findings), processor.unmapped)
    assert got == {
        "off": ([], 0),
        # The SDK's samplers return no attributes with DROP: start-time attributes are lost, so the
        # acquisition spans carry nothing and the 11 step events have no workflow key.
        "sdk-always-record": ([], 11),
        "audit-all": (SEED_FINDINGS, 0),
    }
    assert exporter.get_finished_spans() == ()  # sampling for export is unchanged


def test_capped_span_lowers_confidence(tmp_path):
    db = tmp_path / "capped.duckdb"
    processor = AuditSpanProcessor(db=db)
    provider = provider_with(processor, span_limits=SpanLimits(max_span_attributes=6))
    tracer = provider.get_tracer("t")
    for e in SEED:
        # A full span evicts its oldest attributes: the noise and the reporter go, the last six stay.
        with tracer.start_as_current_span("step", attributes={
                **{f"noise.{i}": i for i in range(3)}, "ownership.reporter": e.get("reporter", "worker"),
                "ownership.event": e["kind"], **ownership(e, "seq", "workflow_key", "epoch", "worker", "effect_key")}):
            pass
    provider.shutdown()
    assert triples(processor.findings) == SEED_FINDINGS
    assert [processor.confidence(f) for f in processor.findings] == [Confidence.MEDIUM] * 4
    assert [f.reporter for f in processor.findings] == ["worker", None, None, None]  # progress has no effect key
    stored = report(db)
    assert triples(stored.findings) == SEED_FINDINGS
    assert [i.confidence for i in stored.incidents] == [Confidence.MEDIUM]


def test_hooks_never_raise_or_hide_the_application_exception(caplog):
    def broken_callback(finding):
        raise RuntimeError("callback bug")

    processor = AuditSpanProcessor(broken_callback)
    provider = provider_with(processor)
    tracer = provider.get_tracer("t")
    with pytest.raises(ValueError, match="the application's own error"):
        with tracer.start_as_current_span("lease.acquire", attributes={
                "ownership.event": "lease_acquired", "ownership.workflow_key": "k", "ownership.seq": 1}):
            raise ValueError("the application's own error")
    for garbage in (None, object(), "span"):
        processor.on_end(garbage)
        processor.on_start(garbage)
    act(tracer, SEED, None)
    assert processor.force_flush(5000) is True
    assert triples(processor.findings) == SEED_FINDINGS  # the callback's failure did not stop the audit
    messages = [r.getMessage() for r in caplog.records if r.name == "auditor.otel" and "split-brain" not in r.getMessage()]
    assert sorted(messages) == ["auditor: on_end failed; this span is not audited",
                        "auditor: ownership evidence not audited live: \"epoch\" is missing; every lease_acquired "
                        "needs the owner epoch it was produced under (the store quarantines it with this reason)",
                        "auditor: the on_finding callback raised"]
    provider.shutdown()


def test_bounded_queue_counts_drops_and_force_flush_honours_its_timeout(caplog):
    blocked, release = threading.Event(), threading.Event()

    def stall(finding):
        blocked.set()
        release.wait(20)

    processor = AuditSpanProcessor(stall, max_queue_size=8, reorder_window_millis=0, schedule_delay_millis=10)
    provider = provider_with(processor)
    tracer = provider.get_tracer("t")
    act(tracer, SEED[:5], None)
    assert processor.force_flush(5000)
    act(tracer, SEED[5:6], None)  # seq 6 is a finding: the worker stalls in the callback
    assert blocked.wait(10)
    act(tracer, SEED[6:], None)  # 7 spans (1 acquisition, 6 step spans), twice, for a queue of 8
    act(tracer, SEED[6:], None)
    started = time.monotonic()
    assert processor.force_flush(200) is False
    assert 0.15 < time.monotonic() - started < 2.0
    assert processor.dropped_spans == 6
    release.set()
    assert processor.force_flush(5000) is True
    drops = [r.getMessage() for r in caplog.records if "queue full" in r.getMessage()]
    assert drops == ["auditor: span queue full (max_queue_size=8): ownership spans are being dropped and not "
                     "audited; raise max_queue_size or audit the Collector's files"]
    provider.shutdown()


def test_shutdown_is_idempotent_and_reports_open_attempts():
    processor = AuditSpanProcessor()
    provider = provider_with(processor)
    act(provider.get_tracer("t"), SEED[:5] + [dict(SEED[6], seq=6)], None)  # an attempt never resolved
    provider.shutdown()
    processor.shutdown()
    assert [(f.grade.value, f.seq, f.outcome.value) for f in processor.findings] == [("stale_attempt", 6, "unknown")]
    assert processor.force_flush(100) is False
    processor.on_end(None)
    act(provider.get_tracer("t"), SEED, None)
    assert processor.findings[-1].seq == 6  # nothing after shutdown


def _child_audits(provider, processor, conn):
    try:
        act(provider.get_tracer("child"), SEED, None)
        ok = processor.force_flush(10_000)
        conn.send((ok, triples(processor.findings), processor._worker.is_alive()))
    finally:
        conn.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork only")
def test_fork_safe():
    processor = AuditSpanProcessor()
    provider = provider_with(processor)
    act(provider.get_tracer("parent"), SEED[:4], None)
    assert processor.force_flush(5000)
    parent_end, child_end = multiprocessing.Pipe()
    child = multiprocessing.get_context("fork").Process(target=_child_audits, args=(provider, processor, child_end))
    child.start()
    child.join(30)
    assert child.exitcode == 0
    assert parent_end.recv() == (True, SEED_FINDINGS, True)
    act(provider.get_tracer("parent"), SEED[4:], None)
    assert processor.force_flush(5000)
    assert triples(processor.findings) == SEED_FINDINGS
    provider.shutdown()


def _worker_process(name: str, events: list[dict], db: str, out: str) -> None:
    exporter = InMemorySpanExporter()
    processor = AuditSpanProcessor(db=db, source_name=name)
    provider = TracerProvider(resource=Resource.create({"service.name": "exporter", "service.instance.id": name}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    provider.add_span_processor(processor)
    act(provider.get_tracer(name), events, None)
    provider.shutdown()
    Path(out).write_text(otlp_line(exporter.get_finished_spans()) + "\n")


@pytest.mark.slow
def test_two_worker_processes_share_one_store(tmp_path):
    """Each process sees only its own spans live; the shared store and their OTLP files see them all."""
    db = str(tmp_path / "shared.duckdb")
    nodes = {"node-1": [e for e in SEED if e.get("worker") not in ("beta", "epsilon")],
             "node-2": [e for e in SEED if e.get("worker") in ("beta", "epsilon")]}
    ctx = multiprocessing.get_context("spawn")
    outs = []
    for name, events in nodes.items():
        out = str(tmp_path / f"{name}.jsonl")
        p = ctx.Process(target=_worker_process, args=(name, events, db, out))
        p.start()
        p.join(60)
        assert p.exitcode == 0
        outs.append(out)
    stored = report(db)
    assert triples(stored.findings) == SEED_FINDINGS
    assert stored.input.files == ["node-1", "node-2"]
    done = run_cli("audit", *outs, "--expect", str(FIXTURES / "seed_split_brain.expected.json"))
    assert done.returncode == 0, done.stderr  # with --expect the exit code says whether it matched
    assert done.stdout.decode().splitlines()[-1] == "PASS: all 4 expected findings found, nothing else"


def test_span_records_match_the_otlp_reader():
    """A span seen live and the same span read back from OTLP JSON give identical records."""
    exporter = InMemorySpanExporter()
    provider = provider_with(AuditSpanProcessor(), exporter,
                             resource=Resource.create({"service.instance.id": "pod-1"}))
    act(provider.get_tracer("t"), SEED, None)
    provider.shutdown()
    spans = exporter.get_finished_spans()
    live = [json.loads(json.dumps(r)) for s in spans for r in span_records(s)]
    read = [r for _, r, _ in read_otlp(io.StringIO(otlp_line(spans)))]
    assert sorted(live, key=lambda r: r["seq"]) == sorted(read, key=lambda r: r["seq"])
    assert len(live) == 16


# The live shortcut (span_events) against the one mapping (span_records + event_from_record).

_VALUES = st.one_of(st.integers(-2, 20), st.sampled_from(["k", "x", " ", "", "7", "accepted", "rejected", "SINK",
                                                           "worker", "w", "maybe"]), st.booleans(),
                    st.just(2 ** 63))
_NAMES = sorted(OWNERSHIP_ATTRIBUTES) + ["gen_ai.tool.call.id", "other"]
_KIND_NAMES = st.sampled_from(["lease_acquired", "progress", "effect_attempted", "effect_committed",
                               "outcome_verified", "heartbeat_ok", "ownership.progress", "Progress", "bogus"])
_SHORTCUT_PROVIDER = TracerProvider(resource=Resource.create({"service.instance.id": "pod-9"}),
                                    span_limits=SpanLimits(max_span_attributes=8))
_SHORTCUT_EXPORTER = InMemorySpanExporter()
_SHORTCUT_PROVIDER.add_span_processor(SimpleSpanProcessor(_SHORTCUT_EXPORTER))


_VALID = st.fixed_dictionaries(
    {"ownership.workflow_key": st.sampled_from(["k1", "k2"]), "ownership.epoch": st.integers(0, 5)},
    optional={"ownership.seq": st.integers(1, 50), "ownership.worker": st.sampled_from(["a", "b"]),
              "ownership.effect_key": st.sampled_from(["x", "y"]), "ownership.sink": st.just("s"),
              "ownership.sink_result": st.sampled_from(["accepted", "rejected", "unknown"]),
              "ownership.reporter": st.sampled_from(["sink", "worker"]), "ownership.step_id": st.just("st"),
              "gen_ai.tool.call.id": st.just("call_1"), "other": st.integers()})
_NOISE = st.dictionaries(st.sampled_from(_NAMES), _VALUES, max_size=2)
_ATTRS = st.one_of(_VALID, _VALID, _VALID, st.builds(lambda a, b: {**a, **b}, _VALID, _NOISE))
_EVENT_ATTRS = st.one_of(st.fixed_dictionaries({"ownership.seq": st.integers(1, 50)}), _NOISE,
                         st.builds(lambda a, b: {**a, **b}, st.fixed_dictionaries({"ownership.seq": st.integers(1, 50)}),
                                   st.dictionaries(st.sampled_from(_NAMES[:-2]), st.sampled_from(["x", "k2", 3]),
                                                   max_size=2)))
_CANONICAL_KINDS = st.sampled_from(["lease_acquired", "progress", "effect_attempted", "effect_committed",
                                    "outcome_verified"])


@settings(max_examples=500, deadline=None)
@given(_ATTRS, st.one_of(st.none(), st.none(), _CANONICAL_KINDS, _KIND_NAMES),
       st.lists(st.tuples(st.one_of(_CANONICAL_KINDS, _CANONICAL_KINDS, _KIND_NAMES, st.just("exception"))
                          .map(lambda k: k if k == "exception" else "ownership." + k), _EVENT_ATTRS), max_size=3))
def test_span_events_shortcut_equals_the_mapping(span_attrs, span_kind, events):
    _SHORTCUT_EXPORTER.clear()
    tracer = _SHORTCUT_PROVIDER.get_tracer("t")
    attrs = dict(span_attrs, **({"ownership.event": span_kind} if span_kind else {}))
    with tracer.start_as_current_span("s", attributes=attrs) as span:
        for name, ev_attrs in events:
            span.add_event(name, ev_attrs)
    (finished,) = _SHORTCUT_EXPORTER.get_finished_spans()
    fast = span_events(finished)
    slow = []
    for rec in span_records(finished):
        try:
            slow.append(event_from_record(rec))
        except MappingError:
            slow.append(None)
    event("shortcut taken" if fast else "checked path" if fast is None else "no evidence")
    if fast is None:
        return  # the processor then takes the checked path: slow is what it uses
    assert None not in slow
    # the shortcut keeps OTel's nanoseconds and builds no event id (see span_events)
    as_events = [replace(Event(*e), ts=rfc3339(e.ts), event_id=None) for e in fast]
    assert [replace(e, attrs=None) for e in as_events] == [replace(e, attrs=None, event_id=None) for e in slow]
    assert [bool(e.attrs) for e in as_events] == [bool(e.attrs and e.attrs.get("otel.capped")) for e in slow]


def _framed(lines: list[bytes]) -> bytes:
    """The file exporter's legacy ``format: json`` + ``compression: zstd`` layout."""
    out = b""
    for line in lines:
        frame = zstandard.ZstdCompressor().compress(line)
        out += len(frame).to_bytes(4, "big") + frame
    return out


def test_read_otlp_reads_the_file_exporters_zstd_layouts(tmp_path):
    lines = (FIXTURES / "otlp_seed_split_brain.jsonl").read_bytes().splitlines()
    plain = list(read_otlp(FIXTURES / "otlp_seed_split_brain.jsonl"))
    framed = tmp_path / "traces.zst"
    framed.write_bytes(_framed(lines))
    assert list(read_otlp(framed)) == plain
    assert list(read_otlp(io.BufferedReader(io.BytesIO(_framed(lines))))) == plain
    # native compression: one zstd frame per write, lines inside
    native = tmp_path / "traces.jsonl.zst"
    native.write_bytes(b"".join(zstandard.ZstdCompressor().compress(line + b"\n") for line in lines))
    assert list(read_otlp(native)) == plain
    cut = tmp_path / "cut.zst"
    cut.write_bytes(_framed(lines)[:-10])
    assert list(read_otlp(cut)) == [r for r in plain if r[0] == 1] + [
        (2, None, "the file ends inside a frame: it was cut short; re-copy it")]
    native.write_bytes(native.read_bytes()[:-100])
    assert list(read_otlp(native)) == [r for r in plain if r[0] == 1] + [
        (2, None, "the zstd stream is cut short (the file is truncated); the lines before it were read")]
    for args in (["--format", "otlp", str(framed)], [str(framed)]):  # the size prefix is sniffed
        done = run_cli("audit", *args, "--json", "-")
        assert done.returncode == 1, done.stderr
        assert [(f["grade"], f["workflow_key"], f["seq"])
                for f in json.loads(done.stdout)["findings"]] == SEED_FINDINGS


def test_seqless_evidence_is_low_confidence_and_named_by_position(caplog):
    """A key whose spans carry no seq is ordered by arrival, as the batch audit orders a log without
    seq by file position: its findings report no seq, a position, and confidence low (rules.confidence)."""
    processor = AuditSpanProcessor()
    tracer = provider_with(processor).get_tracer("t")
    with caplog.at_level(logging.WARNING, logger="auditor"):
        for e in SEED:
            attrs = {"ownership.event": e["kind"], **ownership(e, "workflow_key", "epoch", "worker", "effect_key")}
            with tracer.start_as_current_span("step", attributes=attrs):
                pass
        processor.force_flush()
    # Positions are arrival ranks over every span (SPEC rev 3: global observation order), as the
    # batch audit of the same log without seq numbers its lines.
    assert [(f.grade.value, f.seq, f.position) for f in processor.findings] == [
        ("stale_activity", None, 6), ("stale_attempt", None, 7), ("stale_commit", None, 8),
        ("double_commit", None, 9)]
    assert {processor.confidence(f) for f in processor.findings} == {Confidence.LOW}
    first = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("split-brain"))
    assert first.startswith("split-brain stale_activity on ledger/export/2026-07-26 at position 6 (no seq) "
                            "(confidence low): epoch 18 (beta) was acquired at position 5; ")


def test_seqless_log_batch_witness_names_positions(tmp_path):
    log = tmp_path / "noseq.jsonl"
    log.write_text("".join(json.dumps({k: v for k, v in e.items() if k != "seq"}) + "\n" for e in SEED))
    with audit(log) as result:
        assert [(f.grade.value, f.seq, f.position) for f in result.findings] == [
            ("stale_activity", None, 6), ("stale_attempt", None, 7), ("stale_commit", None, 8),
            ("double_commit", None, 9)]
        [incident] = result.incidents
    assert incident.confidence is Confidence.LOW
    assert incident.witness == (
        "epoch 18 (beta) was acquired at position 5; epoch 17 (alpha) then committed "
        "release-index/2026-07-26 at position 8 (no seq): a displaced owner changed the outside world. "
        "Epoch 18 (beta) committed release-index/2026-07-26 again at position 9 (no seq) after epoch 17 "
        "had: the effect happened twice.")


def test_authority_attributes_audited_live_as_in_the_store(tmp_path):
    """``ownership.authority_id``, ``ownership.expires_at``, ``ownership.decision`` on spans: the
    span processor judges the refund under an expired mandate as the batch audit of its store."""
    db = tmp_path / "live.duckdb"
    processor = AuditSpanProcessor(db=db)
    provider = provider_with(processor)
    tracer = provider.get_tracer("t")
    base = {"ownership.workflow_key": "refund/inv-9"}
    spans = [
        ("authority_granted", 1, {"ownership.authority_id": "mandate-7", "ownership.expires_at": "2026-07-26T14:00:00Z"}),
        ("lease_acquired", 2, {"ownership.epoch": 1, "ownership.worker": "w1"}),
        ("lease_acquired", 3, {"ownership.epoch": 2, "ownership.worker": "w2"}),
        ("revalidated", 4, {"ownership.epoch": 2, "ownership.decision": "continue"}),
        ("effect_committed", 5, {"ownership.epoch": 2, "ownership.worker": "w2", "ownership.effect_key": "refund:inv-9",
                                 "ownership.authority_id": "mandate-7", "ownership.reporter": "sink"}),
    ]
    start = 1_785_074_400_000_000_000  # 2026-07-26T14:00:00Z in ns
    for kind, seq, attrs in spans:
        t = start + (seq - 1) * 75_000_000_000  # 75 s apart: the commit lands at 14:05
        span = tracer.start_span("step", start_time=t,
                                 attributes={**base, "ownership.event": kind, "ownership.seq": seq, **attrs})
        span.end(end_time=t + 1)
    provider.shutdown()
    assert [(f.grade.value, f.seq, f.reasons, f.authority_id) for f in processor.findings] == [
        ("unauthorized_commit", 5, ("expired",), "mandate-7")]
    with report(db) as stored:
        assert [same(f) for f in stored.findings] == [same(f) for f in processor.findings]


def test_store_writer_lets_other_processes_in_when_idle(tmp_path):
    """The writer keeps the store open while appends keep coming, and closes it (a checkpoint)
    once idle: another process can then report from the file while the processor still runs."""
    from auditor.otel.persist import HOLD_IDLE

    db = tmp_path / "live.duckdb"
    processor = AuditSpanProcessor(db=db, reorder_window_millis=0, schedule_delay_millis=20)
    provider = provider_with(processor)
    record_seed(provider, None)
    assert processor.force_flush(10_000) is True
    time.sleep(HOLD_IDLE + 1.0)
    done = run_cli("report", "--db", str(db), "--json", "-")
    assert done.returncode == 1, done.stderr  # findings: exit code 1, the document on stdout
    assert sorted((f["grade"], f["seq"]) for f in json.loads(done.stdout)["findings"]) == sorted(
        (g, s) for g, _k, s in SEED_FINDINGS)
    provider.shutdown()
    assert processor.persisted == len(SEED) and processor.persist_failures == 0


def test_a_locked_store_drops_only_the_oldest_records_past_half_the_limit(tmp_path, monkeypatch):
    """The store writer's parts (first line, records, split) against a locked store: it keeps the
    newest max_unwritten // 2 records for the retry and drops (and counts) only the oldest past
    that, as it did per record; a part straddling the cut loses its oldest records, not all of
    them. Dropping whole parts lost a request of records that fitted."""
    from auditor.core.errors import StoreLocked
    from auditor.store.typed import prepare

    def locked(self, name, parts):
        raise StoreLocked("locked by another process")

    monkeypatch.setattr(Store, "append_parts", locked)
    processor = AuditSpanProcessor(db=tmp_path / "live.duckdb", max_unwritten=10)
    recs = [{"workflow_key": "k", "kind": "progress", "epoch": 1, "seq": n} for n in range(1, 11)]
    processor._unwritten = 10  # as _persist counts what it hands the writer
    kept = processor._write([(1, recs[:2], None), (3, recs[2:], prepare(recs[2:]))])  # 10 records, 5 may wait
    assert [(first, records) for first, records, _split in kept] == [(6, recs[5:])]
    assert (processor.persist_failures, processor.persisted, processor._unwritten) == (5, 0, 5)
    monkeypatch.undo()
    assert processor._write(kept) == []
    assert (processor.persist_failures, processor.persisted, processor._unwritten) == (5, 5, 0)
    processor.shutdown()
    with Store(tmp_path / "live.duckdb") as store:
        assert store.con.execute("SELECT line, seq FROM events ORDER BY line").fetchall() == [
            (n, n) for n in range(6, 11)]
