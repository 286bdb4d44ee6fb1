"""A worker process for the end-to-end test of ``auditor serve``: it sends its share of the seed
scenario (copied over ``keys`` workflow keys) with the SDK's real OTLP/HTTP exporters, spans and
log records, and writes the same events as canonical JSON lines for the batch audit.

    python -m tests.otlp_sender ENDPOINT ROLE KEYS OUT

ROLE ``coordinator-alpha`` sends the acquisitions as spans and alpha's evidence as log records;
``beta-gamma`` sends the other workers' evidence as span events.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from auditor.otel.ownership import attributes, record

SEED = [json.loads(line) for line in
        (Path(__file__).resolve().parent.parent.parent / "fixtures" / "seed_split_brain.jsonl").read_text().splitlines()]
FIELDS = ("seq", "worker", "effect_key", "sink", "reporter", "step_id")


def events(keys: int, role: str) -> list[dict]:
    out = []
    for n in range(keys):
        for e in SEED:
            mine = e["kind"] == "lease_acquired" or e.get("worker") == "alpha"
            if mine == (role == "coordinator-alpha"):
                e = {k: v for k, v in e.items() if k not in ("ts", "attrs")}
                out.append({**e, "workflow_key": f"{e['workflow_key']}#{n}"})
    return out


def main(endpoint: str, role: str, keys: int, out: Path) -> None:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint + "/v1/traces")))
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint + "/v1/logs")))
    tracer, logger = tracer_provider.get_tracer(role), logger_provider.get_logger(role)
    mine = events(keys, role)
    with open(out, "w") as f:
        for e in mine:
            f.write(json.dumps(e) + "\n")
            fields = {k: e[k] for k in FIELDS if k in e}
            if e["kind"] == "lease_acquired":
                tracer.start_span("lease.acquire", attributes={
                    "ownership.event": "lease_acquired", **attributes(e["workflow_key"], e["epoch"], **fields)}).end()
            elif role == "coordinator-alpha":
                record(e["kind"], e["workflow_key"], e.get("epoch"), logger=logger, **fields)
            else:
                with tracer.start_as_current_span("step") as span:
                    record(e["kind"], e["workflow_key"], e.get("epoch"), span=span, **fields)
    assert tracer_provider.force_flush(60_000) and logger_provider.force_flush(60_000)
    tracer_provider.shutdown()
    logger_provider.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), Path(sys.argv[4]))
