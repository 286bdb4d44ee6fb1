"""Logs as teams write them (SPEC section 2, revision 3): each of the five shaped fixtures, read
with its vocabulary, audits to exactly what its canonical twin audits to, in the batch engine, the
live detector and the live log door; the lines it names are the shaped log's own. (Spark runs every
fixture with its vocabulary and compares with one machine: tests/spark/test_spark.py.)"""

from __future__ import annotations

import json

import pytest

from auditor import audit
from auditor.detect.batch.timeline import iter_events
from auditor.detect.live.detector import detect_events
from auditor.ingest.logfmt import parse as parse_logfmt
from auditor.normalize.reference import Ignored, normalize, parse_line
from auditor.normalize.vocabulary import vocabulary_of
from auditor.render.json import render_json
from auditor.simulate import shapes

from ..helpers import shaped, twin, vocabulary, without_places

NAMES = list(shapes.SHAPES)


def members(name: str, text: str):
    return parse_logfmt(text) if shapes.SHAPES[name][1] == ".logfmt" else parse_line(text)


@pytest.mark.parametrize("name", NAMES)
def test_fixtures_are_what_the_generator_writes(name):
    assert shaped(name).read_text() == shapes.shaped_text(name)
    assert twin(name).read_text() == shapes.canonical_text(name)


@pytest.mark.parametrize("name", NAMES)
def test_each_shape_audits_to_exactly_its_canonical_twin(name):
    with audit([shaped(name)], vocabulary=vocabulary(name)) as got, audit([twin(name)]) as want:
        doc, truth = json.loads(render_json(got)), json.loads(render_json(want))
        assert without_places({k: v for k, v in doc.items() if k != "input"}) == \
            without_places({k: v for k, v in truth.items() if k != "input"})
        assert doc["findings"], "a fixture that shows nothing"
        lines = shaped(name).read_text().splitlines()
        v = vocabulary_of(vocabulary(name))
        for f in got.findings:  # the line a finding names is its own event's, in the shaped log
            event = normalize(members(name, lines[f.line - 1]), v)
            assert (f.file, event["seq"], event["workflow_key"], event["kind"]) == (
                str(shaped(name)), f.seq, f.workflow_key, f.kind.value)
        extra = got.input.lines_read - want.input.lines_read
        assert (got.input.events, got.input.quarantined, got.input.ignored) == (want.input.events, 0, extra)


def test_the_noisy_log_lists_each_ignore_entry_with_its_first_line_and_values():
    with audit([shaped("noisy_three_irrelevant_lines_per_evidence_line")],
               vocabulary=vocabulary("noisy_three_irrelevant_lines_per_evidence_line")) as got:
        inp = got.input
        assert (inp.lines_read, inp.events, inp.duplicates, inp.quarantined, inp.ignored) == (64, 16, 0, 0, 48)
        assert sum(e.lines for e in inp.ignore) == 48
        lines = shaped("noisy_three_irrelevant_lines_per_evidence_line").read_text().splitlines()
        v = vocabulary_of(vocabulary("noisy_three_irrelevant_lines_per_evidence_line"))
        for e in inp.ignore:
            assert 1 <= len(e.samples) <= 10
            with pytest.raises(Ignored) as first:  # the first line it names is one it ignored
                normalize(parse_line(lines[e.line - 1]), v)
            assert first.value.entry == (e.table, e.entry)
            assert first.value.value == e.samples[0]
        assert [(e.table, e.entry) for e in inp.ignore] == [
            ("kind_patterns", "^cache hit ratio "), ("kinds", "config reloaded"), ("kind_patterns", "^metrics flushed "),
            ("kind_patterns", r"^(GET|POST) /\S* [0-9]{3}( [0-9]+ms)?$"), ("kind_patterns", "^db pool: ")]


@pytest.mark.parametrize("name", NAMES)
def test_the_live_detector_reads_each_shape_as_its_twin(name):
    with audit([shaped(name)], vocabulary=vocabulary(name)) as got, audit([twin(name)]) as want:
        live = detect_events(iter_events(got.store))
        assert [(f.grade, f.workflow_key, f.seq, f.epoch, f.current_epoch) for f in live] == \
            [(f.grade, f.workflow_key, f.seq, f.epoch, f.current_epoch) for f in want.findings]


@pytest.mark.parametrize("name", NAMES)
def test_the_log_door_reads_each_shape_with_the_same_vocabulary(name):
    """Each line as an OpenTelemetry log record whose body is the line (what the Collector's JSON
    parser sends): the live audit finds what the twin's batch audit finds, with the file's --map."""
    from opentelemetry.sdk._logs import LoggerProvider

    from auditor.otel import AuditLogRecordProcessor

    processor = AuditLogRecordProcessor(vocabulary=vocabulary(name))
    provider = LoggerProvider()
    provider.add_log_record_processor(processor)
    logger = provider.get_logger("shapes")
    for text in shaped(name).read_text().splitlines():
        logger.emit(body=dict(members(name, text)))
    provider.shutdown()
    with audit([twin(name)]) as want:
        assert sorted((f.grade.value, f.workflow_key, f.seq) for f in processor.findings) == \
            sorted((f.grade.value, f.workflow_key, f.seq) for f in want.findings)
        extra = len(shaped(name).read_text().splitlines()) - want.input.lines_read
        assert (processor.unmapped, processor.ignored) == (0, extra)


@pytest.mark.parametrize("name", ["structlog_nested_messages_with_ids", "ecs_event_action_and_labels"])
def test_an_otlp_file_of_those_log_records_reads_alike(tmp_path, name):
    """The same records exported by the SDK's OTLP encoder (bodies as nested kvlist AnyValues) and
    read back from a Collector-style JSON file, with the same --map: the same findings, lines the
    file's own; without a vocabulary that reads logs, no log record is evidence (nothing is read)."""
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("shapes")
    for text in shaped(name).read_text().splitlines():
        logger.emit(body=dict(members(name, text)))
    provider.shutdown()
    path = tmp_path / "logs.otlp.jsonl"
    path.write_text("".join(json.dumps(MessageToDict(encode_logs([r]))) + "\n" for r in exporter.get_finished_logs()))
    with audit([path], vocabulary=vocabulary(name)) as got, audit([twin(name)]) as want:
        assert [(f.grade, f.workflow_key, f.seq, f.line) for f in got.findings] == \
            [(f.grade, f.workflow_key, f.seq, f.line) for f in want.findings]
    from auditor import AuditorError

    with pytest.raises(AuditorError, match="no event found"):
        audit([path])
