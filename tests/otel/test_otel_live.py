"""The OpenTelemetry door, v2 (issue 14), with the real SDK: samplers that compose and are chosen
by OTEL_TRACES_SAMPLER, log records as evidence (live and from OTLP files), the ownership
helpers, one alert per incident, rate-limited warnings, the event-cap warning, metrics."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tomllib
from importlib import import_module
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from auditor import audit, report
from auditor.otel import AuditLogRecordProcessor, AuditSpanProcessor
from auditor.otel.ownership import Lease, record, record_effect, record_progress

from .otel_kit import SEED, SEED_FINDINGS, triples

ROOT = Path(__file__).resolve().parent.parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
SAMPLERS = PYPROJECT["project"]["entry-points"]["opentelemetry_traces_sampler"]
KEYS = [f"tenant-{i}/export" for i in range(40)]


def unsampled_upstream():
    """The context of an incoming ``traceparent: 00-<trace>-<span>-00``: a remote, unsampled parent."""
    parent = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(0))
    return trace.set_span_in_context(NonRecordingSpan(parent))


def forty_split_brains(tracer=None, logger=None) -> None:
    """40 keys: epoch 1 acquired (seq 1), epoch 2 acquired (seq 2), epoch 1 then commits (seq 3),
    all inside one request whose upstream parent was not sampled."""
    ctx = unsampled_upstream()
    for key in KEYS:
        old, new = Lease(key, 1, "alpha", logger=logger), Lease(key, 2, "beta", logger=logger)
        if tracer is None:
            old.acquired(seq=1, reporter="coordinator")
            new.acquired(seq=2, reporter="coordinator")
            old.committed(key + "/out", seq=3, reporter="sink")
            continue
        for seq, epoch, worker in ((1, 1, "alpha"), (2, 2, "beta")):
            with tracer.start_as_current_span("lease.acquire", context=ctx, attributes={
                    "ownership.event": "lease_acquired", "ownership.workflow_key": key, "ownership.epoch": epoch,
                    "ownership.worker": worker, "ownership.seq": seq, "ownership.reporter": "coordinator"}):
                pass
        with tracer.start_as_current_span("export", context=ctx) as span:
            record_effect(span, key, 1, key + "/out", seq=3, worker="alpha", reporter="sink")


def entry_point(name: str):
    module, attr = SAMPLERS[name].split(":")
    return getattr(import_module(module), attr)


@pytest.mark.parametrize("name, arg", [("audit_parentbased_always_on", ""), ("audit_parentbased_traceidratio", "0.5"),
                                       ("audit_traceidratio", "0")])
def test_audit_samplers_see_evidence_under_an_unsampled_parent(name, arg):
    exporter = InMemorySpanExporter()
    processor = AuditSpanProcessor()
    provider = TracerProvider(sampler=entry_point(name)(arg))
    provider.add_span_processor(processor)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    forty_split_brains(provider.get_tracer("t"))
    provider.shutdown()
    assert [f.grade.value for f in processor.findings] == ["stale_commit"] * 40
    assert exporter.get_finished_spans() == ()  # the upstream's decision still holds for export


def test_default_sampler_sees_nothing_on_spans_but_everything_in_log_records():
    processor = AuditSpanProcessor()
    provider = TracerProvider()  # the SDK's default: ParentBased(ALWAYS_ON)
    provider.add_span_processor(processor)
    forty_split_brains(provider.get_tracer("t"))
    provider.shutdown()
    assert list(processor.findings) == []  # unsampled spans never reach a processor

    logs = AuditLogRecordProcessor()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(logs)
    forty_split_brains(logger=logger_provider.get_logger("worker"))
    logger_provider.shutdown()
    assert [f.grade.value for f in logs.findings] == ["stale_commit"] * 40


def test_otel_traces_sampler_selects_our_sampler_through_the_sdks_entry_points(tmp_path):
    """The SDK's configurator (what ``opentelemetry-instrument`` runs) loads samplers by entry
    point; a dist-info carrying pyproject's table stands for the installed package."""
    dist = tmp_path / "split_brain_auditor_ep-0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: split-brain-auditor-ep\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(
        "[opentelemetry_traces_sampler]\n" + "".join(f"{k} = {v}\n" for k, v in SAMPLERS.items()))
    code = ("from opentelemetry import trace\n"
            "from opentelemetry.sdk._configuration import _OTelSDKConfigurator\n"
            "_OTelSDKConfigurator().configure()\n"
            "print(trace.get_tracer_provider().sampler.get_description())\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
           "OTEL_TRACES_SAMPLER": "audit_parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
           "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "AuditAllSampler{ParentBased{root:TraceIdRatioBased{0.25},remoteParentSampled:" \
        "AlwaysOnSampler,remoteParentNotSampled:AlwaysOffSampler,localParentSampled:AlwaysOnSampler," \
        "localParentNotSampled:AlwaysOffSampler}}"


def test_installed_sdk_is_the_declared_minimum():
    """CI installs the test extra, which pins the SDK to the declared minimum: the minimum is what runs."""
    from importlib.metadata import version

    declared = next(d for d in PYPROJECT["project"]["dependencies"] if d.startswith("opentelemetry-sdk"))
    pinned = next(d for d in PYPROJECT["project"]["optional-dependencies"]["test"] if d.startswith("opentelemetry-sdk"))
    assert declared.split(">=")[1] == pinned.split("==")[1] == version("opentelemetry-sdk")


def seed_as_log_records(logger) -> None:
    for e in SEED:
        fields = {k: e[k] for k in ("seq", "worker", "effect_key", "sink", "reporter", "step_id") if k in e}
        record(e["kind"], e["workflow_key"], e.get("epoch"), logger=logger, **fields)


def test_log_records_live_equal_the_batch_audit_of_their_otlp_file(tmp_path):
    exporter = InMemoryLogRecordExporter()
    processor = AuditLogRecordProcessor(db=tmp_path / "live.duckdb")
    provider = LoggerProvider()
    provider.add_log_record_processor(processor)
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    seed_as_log_records(provider.get_logger("seed"))
    provider.shutdown()
    assert triples(processor.findings) == SEED_FINDINGS
    path = tmp_path / "logs.otlp.jsonl"
    request = MessageToDict(encode_logs(exporter.get_finished_logs()))
    path.write_text(json.dumps(request) + "\n")
    assert "resourceLogs" in request
    batch = audit(path)
    assert triples(batch.findings) == SEED_FINDINGS
    assert [f.id for f in report(tmp_path / "live.duckdb").findings] == [f.id for f in batch.findings]


def test_span_helpers_write_the_attributes_the_mapping_reads():
    processor = AuditSpanProcessor()
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    key = "ledger/export/2026-07-26"
    with tracer.start_as_current_span("coordinator") as span:
        Lease(key, 17, "alpha", span=span).acquired(seq=1)
        Lease(key, 18, "beta", span=span).acquired(seq=2)
    with tracer.start_as_current_span("alpha") as span:
        record_progress(span, key, 17, seq=3, worker="alpha")
        record_effect(span, key, 17, "index", seq=4, worker="alpha", committed=False, sink_result="rejected")
    provider.shutdown()
    assert triples(processor.findings) == [("stale_activity", key, 3), ("rejected_attempt", key, 4)]


def stale_span(tracer, key: str, progress: int, commit_first: bool = False) -> None:
    with tracer.start_as_current_span("lease", attributes={
            "ownership.event": "lease_acquired", "ownership.workflow_key": key, "ownership.epoch": 2,
            "ownership.seq": 1}):
        pass
    with tracer.start_as_current_span("old worker") as span:
        if commit_first:
            record_effect(span, key, 1, "out", seq=2)
        for i in range(progress):
            record_progress(span, key, 1, seq=3 + i)


def test_one_alert_per_incident_updates_counted(caplog):
    calls = []
    processor = AuditSpanProcessor(calls.append)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    with caplog.at_level(logging.WARNING, logger="auditor.otel"):
        stale_span(provider.get_tracer("t"), "k", 100)
        provider.shutdown()
    assert len(processor.findings) == 100
    assert [f.seq for f in calls] == [3]
    assert processor.incident_updates == 99
    assert len([r for r in caplog.records if "split-brain" in r.getMessage()]) == 1


def test_a_higher_grade_alerts_again():
    calls = []
    processor = AuditSpanProcessor(calls.append)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    stale_span(tracer, "k", 3)
    with tracer.start_as_current_span("old worker") as span:
        record_effect(span, "k", 1, "out", seq=10)
    provider.shutdown()
    assert [(f.grade.value, f.seq) for f in calls] == [("stale_activity", 3), ("stale_commit", 10)]
    assert processor.incident_updates == 2


def test_bad_attribute_warnings_are_rate_limited_with_fixed_memory(caplog):
    processor = AuditSpanProcessor(max_queue_size=100_000)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    with caplog.at_level(logging.WARNING, logger="auditor.otel"):
        for i in range(5_000):
            tracer.start_span("s", attributes={"ownership.event": "progress", "ownership.workflow_key": "k",
                                               "ownership.seq": i, "ownership.epoch": f"bad-{i}"}).end()
        provider.shutdown()
    assert processor.unmapped == 5_000
    assert len(caplog.records) <= 11
    assert processor.suppressed_warnings >= 4_990
    assert len(processor._logged) < 5  # noqa: SLF001 - the memory the issue saw grow per value


def test_event_cap_with_evidence_is_warned_about(caplog):
    processor = AuditSpanProcessor()
    provider = TracerProvider()
    provider.add_span_processor(processor)
    with caplog.at_level(logging.WARNING, logger="auditor.otel"):
        stale_span(provider.get_tracer("t"), "k", 200, commit_first=True)
        provider.shutdown()
    assert processor.capped_spans == 1
    assert "stale_commit" not in {f.grade.value for f in processor.findings}  # the SDK dropped it...
    assert any("hit the SDK's span limits" in r.getMessage() for r in caplog.records)  # ...not silently


def test_metrics_on_the_given_provider_with_the_new_instruments():
    reader = InMemoryMetricReader()
    processor = AuditSpanProcessor(meter_provider=MeterProvider(metric_readers=[reader]))
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    stale_span(tracer, "k", 2)
    tracer.start_span("s", attributes={"ownership.event": "progress", "ownership.workflow_key": "k",
                                       "ownership.seq": 99, "ownership.epoch": "bad"}).end()
    provider.shutdown()
    scope = reader.get_metrics_data().resource_metrics[0].scope_metrics[0]
    assert scope.scope.name == "auditor.otel" and scope.scope.version
    got = {m.name: sum(p.value for p in m.data.data_points) for m in scope.metrics}
    assert got["auditor.findings"] == 2 and got["auditor.unmapped_records"] == 1
    assert "auditor.queue_size" in got


def test_metrics_default_to_the_global_meter_provider():
    code = ("from opentelemetry import metrics\n"
            "from opentelemetry.sdk.metrics import MeterProvider\n"
            "from opentelemetry.sdk.metrics.export import InMemoryMetricReader\n"
            "reader = InMemoryMetricReader()\n"
            "metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))\n"
            "from auditor.otel import AuditSpanProcessor\n"
            "p = AuditSpanProcessor(); p.shutdown()\n"
            "print(reader.get_metrics_data().resource_metrics[0].scope_metrics[0].scope.name)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "auditor.otel", out.stderr


def test_a_burst_with_db_persistence_loses_no_evidence(tmp_path):
    """20,000 evidence spans in a tight loop: the store writer batches on its own thread, so the
    8,192-span queue never overflows."""
    processor = AuditSpanProcessor(db=tmp_path / "burst.duckdb")
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    for i in range(20_000):
        with tracer.start_as_current_span("s", attributes={
                "ownership.workflow_key": f"k{i % 100}", "ownership.epoch": 1, "ownership.worker": "w"}) as span:
            span.add_event("ownership.progress", {"ownership.seq": i})
    provider.shutdown()
    assert (processor.dropped_spans, processor.persisted, processor.persist_failures) == (0, 20_000, 0)
