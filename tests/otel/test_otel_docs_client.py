"""Issue 45: docs/OTEL.md's two clients for ``auditor serve`` work as written (only the port
changed): the Lease snippet with its logger provider and the SDK's OTLP/HTTP exporter, and the
curl example's OTLP/JSON; a real receiver stores what they send."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from ..conftest import ROOT
from ..serve.serve_kit import Served

pytestmark = pytest.mark.slow


def _snippet() -> str:
    page = (ROOT / "docs/OTEL.md").read_text()
    block = re.search(r"```python\n(from opentelemetry\._logs import set_logger_provider\n.*?)```", page, re.S)
    assert block is not None, "docs/OTEL.md lost its Lease example"
    return block.group(1)


def test_the_lease_snippet_delivers_its_evidence_to_serve(tmp_path):
    served = Served(tmp_path, tmp_path / "ownership.duckdb", token=None).start()
    try:
        code = _snippet()
        assert "http://127.0.0.1:4318/v1/logs" in code
        run = subprocess.run([sys.executable, "-c", code.replace(":4318/", f":{served.port}/")], cwd=tmp_path,
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status, body = served.get("/healthz")
            health = json.loads(body)
            if status == 200 and health.get("persisted", 0) >= 3:
                break
            time.sleep(0.2)
        assert health.get("persisted") == 3, health
    finally:
        served.proc.terminate()
        served.proc.wait(timeout=60)
    report = subprocess.run([sys.executable, "-m", "auditor", "report", "--db", str(tmp_path / "ownership.duckdb"),
                             "--json", "-", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    doc = json.loads(report.stdout)
    assert (report.returncode, doc["input"]["events"], doc["input"]["quarantined"]) == (0, 3, 0)
    (workflow,) = doc["workflows"]
    assert (workflow["workflow_key"], workflow["acquisitions"]) == ("ledger/export/2026-07-26", 1)


def test_the_curl_example_is_answered_200_and_stored(tmp_path):
    page = (ROOT / "docs/OTEL.md").read_text()
    block = re.search(r"```sh\n(curl -sS -X POST http://127\.0\.0\.1:4318/v1/logs .*?)```", page, re.S)
    assert block is not None, "docs/OTEL.md lost its curl example"
    served = Served(tmp_path, tmp_path / "curl.duckdb", token=None).start()
    try:
        command = block.group(1).rstrip().replace(":4318/", f":{served.port}/")
        run = subprocess.run(["bash", "-c", command + " -w ' %{http_code}'"], capture_output=True, text=True,
                             timeout=120)
        assert (run.returncode, run.stdout, run.stderr) == (0, "{} 200", "")
        health = json.loads(served.get("/healthz")[1])
        assert (health["records"], health["quarantined"]) == (1, 0)
    finally:
        served.proc.terminate()
        served.proc.wait(timeout=60)
    report = subprocess.run([sys.executable, "-m", "auditor", "report", "--db", str(tmp_path / "curl.duckdb"),
                             "--json", "-", "-q"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    (workflow,) = json.loads(report.stdout)["workflows"]
    assert (workflow["workflow_key"], workflow["acquisitions"], workflow["events"]) == (
        "ledger/export/2026-07-26", 1, 1)
