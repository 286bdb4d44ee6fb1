"""``auditor serve --map`` reads log records as teams write them (SPEC section 2, revision 3): a
real server process, sent the lines of a shaped fixture as OpenTelemetry log records (their bodies
nested ``AnyValue`` maps, as the SDK's OTLP encoder writes them; protobuf and JSON, through a
decoder process and without), audits them to exactly what the batch audit of the canonical twin
finds, live and in the store; the noisy log's irrelevant lines are counted as ignored."""

from __future__ import annotations

import json
import time

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

from auditor import audit, report

from ..helpers import shaped, twin, vocabulary
from .serve_kit import Served

pytestmark = pytest.mark.slow  # a real server process per case


def log_request(name: str):
    """The shaped fixture's lines as one OTLP ``ExportLogsServiceRequest``: each line's members the
    body of one log record (nested objects as ``kvlist`` values)."""
    from auditor.ingest.logfmt import parse as parse_logfmt
    from auditor.normalize.reference import parse_line

    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    logger = provider.get_logger("shapes")
    read = parse_logfmt if shaped(name).suffix == ".logfmt" else parse_line
    for text in shaped(name).read_text().splitlines():
        logger.emit(body=dict(read(text)))
    provider.shutdown()
    return encode_logs(exporter.get_finished_logs())


def findings(items) -> list[tuple]:
    return sorted((f["grade"], f["workflow_key"], f["seq"], f["epoch"]) for f in items)


@pytest.mark.parametrize(("name", "ctype", "decoders"), [
    ("structlog_nested_messages_with_ids", "application/x-protobuf", "1"),
    ("noisy_three_irrelevant_lines_per_evidence_line", "application/json", "0"),
])
def test_serve_with_map_audits_log_records_as_the_canonical_twin(tmp_path, name, ctype, decoders):
    req = log_request(name)
    body = req.SerializeToString() if ctype.endswith("protobuf") else json.dumps(MessageToDict(req)).encode()
    db = tmp_path / "serve.duckdb"
    lines = len(shaped(name).read_text().splitlines())
    with audit([twin(name)]) as want:
        want_findings = findings({"grade": f.grade.value, "workflow_key": f.workflow_key, "seq": f.seq,
                                  "epoch": f.epoch} for f in want.findings)
        events = want.input.events
    assert want_findings, "a fixture that shows nothing"
    with Served(tmp_path, db, "--map", str(vocabulary(name)), "--decoders", decoders) as server:
        assert server.post(body, path="/v1/logs", ctype=ctype)[0] == 200
        assert findings(server.json("/findings")) == want_findings  # the store's batch audit
        health = server.json("/healthz")
        assert (health["records"], health["unmapped"], health["ignored"]) == (lines, 0, lines - events)
        deadline = time.monotonic() + 30  # the live audit holds each event for its reorder window
        while health["findings_live"] < len(want_findings) and time.monotonic() < deadline:
            time.sleep(0.1)
            health = server.json("/healthz")
        assert health["findings_live"] == len(want_findings)
    with report(db) as got:
        assert (got.input.lines_read, got.input.events, got.input.quarantined, got.input.ignored) == (
            lines, events, 0, lines - events)


def test_serve_without_a_map_reads_no_plain_log_record_as_evidence(tmp_path):
    """Without a vocabulary that reads logs, a log record that does not name an ownership event is
    not evidence: nothing is stored, nothing is unmapped."""
    body = log_request("structlog_nested_messages_with_ids").SerializeToString()
    with Served(tmp_path, tmp_path / "plain.duckdb", "--decoders", "0") as server:
        assert server.post(body, path="/v1/logs")[0] == 200
        health = server.json("/healthz")
        assert (health["records"], health["unmapped"], health["ignored"]) == (0, 0, 0)
