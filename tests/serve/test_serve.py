"""``auditor serve`` end to end: two worker processes export with the SDK's real OTLP/HTTP
exporters (spans and log records) to a real server process; its findings equal the batch audit
of the same events. Plus the receiver's edges (gzip, JSON, bad bodies, backpressure) in process."""

from __future__ import annotations

import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from auditor import audit, report
from auditor.render.json import render_json
from auditor.serve import Receiver, ServeConfig
from auditor.store import Store

ROOT = Path(__file__).resolve().parent.parent.parent

pytestmark = pytest.mark.slow  # real processes and sessions: the end-to-end part of the suite


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str):
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


def wait_healthy(url: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            if get(url + "/healthz")["status"] == "ok":
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("auditor serve did not come up")


def summary(items: list[dict]) -> list[tuple]:
    return sorted((f["id"], f["grade"], f["workflow_key"], f["seq"], f["epoch"], f["effect_key"], f["outcome"])
                  for f in items)


def test_two_senders_findings_equal_the_batch_audit(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    db = tmp_path / "serve.duckdb"
    server = subprocess.Popen([sys.executable, "-m", "auditor", "serve", "--port", str(port), "--db", str(db), "-q"],
                              cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        wait_healthy(url, server)
        outs = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
        senders = [subprocess.Popen([sys.executable, "-m", "tests.otel.otlp_sender", url, role, "20", str(out)], cwd=ROOT)
                   for role, out in zip(("coordinator-alpha", "beta-gamma"), outs)]
        assert [s.wait(120) for s in senders] == [0, 0]
        batch = audit(outs)
        assert len(batch.findings) == 80  # the seed's four findings on each of 20 keys
        deadline = time.monotonic() + 30
        while get(url + "/healthz")["records"] < sum(len(o.read_text().splitlines()) for o in outs):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        findings, incidents = get(url + "/findings"), get(url + "/incidents")
        doc = json.loads(render_json(batch))
        assert summary(findings) == summary(doc["findings"])
        assert sorted(i["id"] for i in incidents) == sorted(i["id"] for i in doc["incidents"])
        health = get(url + "/healthz")
        assert health["unmapped"] == 0 and health["refused_requests"] == 0
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    # uvicorn shuts down gracefully, then re-raises the signal it caught (the shell sees SIGTERM).
    assert server.returncode in (0, -signal.SIGTERM), server.stderr.read()
    # Shutdown flushed everything to the store: the report of the file is the batch answer.
    assert summary(json.loads(render_json(report(db)))["findings"]) == summary(doc["findings"])


SPAN = {"resourceSpans": [{"scopeSpans": [{"spans": [
    {"traceId": "0" * 31 + "1", "spanId": "0" * 15 + "1", "name": "lease", "attributes": [
        {"key": "ownership.event", "value": {"stringValue": "lease_acquired"}},
        {"key": "ownership.workflow_key", "value": {"stringValue": "k"}},
        {"key": "ownership.epoch", "value": {"intValue": "2"}}, {"key": "ownership.seq", "value": {"intValue": "1"}}],
     "events": [{"name": "ownership.effect_committed", "attributes": [
         {"key": "ownership.epoch", "value": {"intValue": "1"}}, {"key": "ownership.seq", "value": {"intValue": "2"}},
         {"key": "ownership.effect_key", "value": {"stringValue": "e"}}]}]}]}]}]}


@pytest.fixture
def receiver(tmp_path):
    r = Receiver(ServeConfig(db=tmp_path / "r.duckdb", max_queue=2, max_body_bytes=1 << 16))
    yield r
    r.close()


def test_receiver_json_gzip_and_errors(tmp_path):
    # A queue of 64, not the fixture's 2: the two requests accepted first may still wait for the
    # audit when the bad ones come (under load they did, and the bad ones were answered 429, busy,
    # before they were read); what this test checks is how a body that cannot be read is answered.
    receiver = Receiver(ServeConfig(db=tmp_path / "r.duckdb", max_queue=64, max_body_bytes=1 << 16))
    try:
        _json_gzip_and_errors(receiver)
    finally:
        receiver.close()


def _json_gzip_and_errors(receiver):
    body = json.dumps(SPAN).encode()
    assert receiver.accept("traces", body, "application/json", "")[:2] == (200, b"{}")
    assert receiver.accept("traces", gzip.compress(body), "application/json", "gzip")[0] == 200
    assert receiver.accept("traces", b"nope", "application/json", "")[0] == 400
    assert receiver.accept("traces", b"\xff\x00garbage", "application/x-protobuf", "")[0] == 400
    assert receiver.accept("traces", b"nope", "application/json", "gzip")[0] == 400
    assert receiver.accept("traces", body, "application/json", "br")[0] == 415
    assert receiver.accept("traces", gzip.compress(b" " * (1 << 17)), "application/json", "gzip")[0] == 413
    assert receiver.accept("traces", body, "text/plain", "")[0] == 415
    assert [(f["grade"], f["seq"]) for f in json.loads(receiver.document_list("findings")[0])] == [("stale_commit", 2)]


def test_receiver_backpressure_is_429_with_retry_after_never_a_drop(receiver):
    receiver.audit._stop = True  # noqa: SLF001 - a stalled worker: the queue cannot drain
    receiver.audit._wake.set()  # noqa: SLF001
    receiver.audit._worker.join(5)  # noqa: SLF001
    body = json.dumps(SPAN).encode()
    got = [receiver.accept("traces", body, "application/json", "") for _ in range(4)]
    assert [g[0] for g in got] == [200, 200, 429, 429]
    assert got[2][3] == {"Retry-After": "1"}
    assert receiver.refused == 2 and receiver.records == 4


def decoder_pids(pid: int) -> list[int]:
    """The server's decoder processes (spawned multiprocessing children, not its resource tracker)."""
    kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(k) for k in kids if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads the process tree from /proc")
def test_a_decoder_killed_mid_run_loses_nothing(tmp_path):
    """Requests are decoded in a separate process; when it dies, the receiver decodes them itself:
    every record sent by the SDK's exporters is still accepted, audited and stored."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    db = tmp_path / "serve.duckdb"
    server = subprocess.Popen([sys.executable, "-m", "auditor", "serve", "--port", str(port), "--db", str(db), "-q",
                               "--decoders", "1"], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        wait_healthy(url, server)
        (decoder,) = decoder_pids(server.pid)
        assert get(url + "/healthz")["decoders"] == 1
        os.kill(decoder, signal.SIGKILL)
        out = tmp_path / "a.jsonl"
        sender = subprocess.Popen([sys.executable, "-m", "tests.otel.otlp_sender", url, "beta-gamma", "10", str(out)],
                                  cwd=ROOT)
        assert sender.wait(120) == 0
        sent = len(out.read_text().splitlines())
        deadline = time.monotonic() + 30
        while get(url + "/healthz")["records"] < sent:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        doc = json.loads(render_json(audit([out])))
        assert summary(get(url + "/findings")) == summary(doc["findings"])
        health = get(url + "/healthz")
        assert health["records"] == sent and health["decoders"] == 0 and health["unmapped"] == 0
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    assert server.returncode in (0, -signal.SIGTERM), server.stderr.read()
    assert summary(json.loads(render_json(report(db)))["findings"]) == summary(doc["findings"])


def post(url: str, body: bytes, ctype: str, encoding: str = "") -> tuple[int, bytes]:
    headers = {"Content-Type": ctype, **({"Content-Encoding": encoding} if encoding else {})}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, body, headers), timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_decoder_process_answers_as_the_receiver_does(tmp_path):
    """JSON, gzip and every refusal, decoded in the decoder process, get the receiver's answers."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "auditor", "serve", "--port", str(port), "--db",
                               str(tmp_path / "serve.duckdb"), "-q", "--decoders", "1", "--max-body-mb", "1"],
                              cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        wait_healthy(url, server)
        body = json.dumps(SPAN).encode()
        traces = url + "/v1/traces"
        assert post(traces, body, "application/json") == (200, b"{}")
        assert post(traces, gzip.compress(body), "application/json", "gzip")[0] == 200
        assert post(traces, b"nope", "application/json")[0] == 400
        assert post(traces, b"\xff\x00garbage", "application/x-protobuf")[0] == 400
        assert post(traces, b"nope", "application/json", "gzip")[0] == 400
        assert post(traces, body, "application/json", "br")[0] == 415
        assert post(traces, gzip.compress(b" " * (2 << 20)), "application/json", "gzip")[0] == 413
        assert post(traces, body, "text/plain")[0] == 415
        assert [(f["grade"], f["seq"]) for f in get(url + "/findings")] == [("stale_commit", 2)]
        health = get(url + "/healthz")
        assert health["decoders"] == 1 and health["records"] == 4 and health["refused_requests"] == 0
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(60)
    assert server.returncode in (0, -signal.SIGTERM), server.stderr.read()


def test_store_held_open_keeps_the_receivers_vocabulary(tmp_path):
    """GET /findings opens the store in this process with the default vocabulary while the writer
    may hold it open: appends after it still use serve's --map vocabulary (nothing quarantined)."""
    vocab = tmp_path / "team.toml"
    vocab.write_text('[kinds]\njob_done = "progress"\n')
    r = Receiver(ServeConfig(db=tmp_path / "v.duckdb", vocabulary=vocab))
    try:
        def span(seq: int) -> bytes:
            return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
                {"traceId": "0" * 31 + "1", "spanId": f"{seq:016x}", "name": "job", "attributes": [
                    {"key": "ownership.workflow_key", "value": {"stringValue": "k"}},
                    {"key": "ownership.epoch", "value": {"intValue": "1"}}],
                 "events": [{"name": "ownership.job_done", "attributes": [
                     {"key": "ownership.seq", "value": {"intValue": str(seq)}}]}]}]}]}]}).encode()

        for seq in range(1, 6):
            assert r.accept("traces", span(seq), "application/json", "")[0] == 200
            assert r.document_list("findings")[0] == b"[]"  # a report between appends, store held open
        with Store(r.db, read_only=True) as store:
            summary_ = store.input_summary()
        assert (summary_.events, summary_.quarantined) == (5, 0)
    finally:
        r.close()


def test_serve_groups_lease_health_by_the_chosen_attrs(tmp_path):
    """``--by`` reaches the live lease watch (the dimensions on the lease metrics), as it does
    the batch audit's lease health; a blank name is refused before the port is bound."""
    r = Receiver(ServeConfig(db=tmp_path / "by.duckdb", lease_by=("team", "gen_ai.request.model")))
    try:
        assert r.audit.lease.by == ("team", "gen_ai.request.model")
    finally:
        r.close()
    default = Receiver(ServeConfig(db=tmp_path / "default.duckdb"))
    try:
        assert default.audit.lease.by == ("tool", "model", "provider")
    finally:
        default.close()
    proc = subprocess.run([sys.executable, "-m", "auditor", "serve", "--port", str(free_port()), "--by", " "],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert proc.returncode == 2
    assert "--by ' ': expected the name of an attrs member" in proc.stderr


def _kv(key: str, value) -> dict:
    return {"key": key, "value": {"intValue": str(value)} if isinstance(value, int) else {"stringValue": value}}


def test_a_decoded_request_mixing_typed_and_checked_records_audits_as_the_batch(tmp_path):
    """What a decoder process hands the receiver (pickled): the store's typed columns, which the
    audit reads as its events, and the records themselves, read only where the split did not type
    one (a string epoch, an optional field, an unknown reporter, no seq). Live findings and the
    batch audit of the store agree."""
    import pickle

    from auditor.serve.decode import JSON, decode_request

    events = [("lease_acquired", [_kv("ownership.epoch", 1), _kv("ownership.seq", 1), _kv("ownership.worker", "a")]),
              ("lease_acquired", [_kv("ownership.epoch", "2"), _kv("ownership.seq", 3), _kv("ownership.worker", "b")]),
              ("progress", [_kv("ownership.epoch", 1), _kv("ownership.seq", 4), _kv("ownership.worker", "a")]),
              ("effect_committed", [_kv("ownership.epoch", 1), _kv("ownership.seq", 5), _kv("ownership.worker", "a"),
                                    _kv("ownership.effect_key", "e"), _kv("ownership.reporter", "gateway")]),
              ("progress", [_kv("ownership.epoch", 1), _kv("ownership.seq", 6), _kv("ownership.worker", "a"),
                            _kv("ownership.lease_until", "2026-07-26T10:00:00Z")]),
              ("effect_committed", [_kv("ownership.epoch", 2), _kv("ownership.seq", 7), _kv("ownership.worker", "b"),
                                    _kv("ownership.effect_key", "e"), _kv("ownership.reporter", "sink")]),
              ("progress", [_kv("ownership.workflow_key", "unordered"), _kv("ownership.epoch", 1)])]
    body = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "0" * 31 + "2", "spanId": "0" * 15 + "2", "name": "step",
         "attributes": [_kv("ownership.workflow_key", "mixed")],
         "events": [{"name": "ownership." + kind, "timeUnixNano": str(1_790_000_000_000_000_000 + i),
                     "attributes": attrs} for i, (kind, attrs) in enumerate(events)]}]}]}]}
    raw = json.dumps(body).encode()
    decoded = pickle.loads(pickle.dumps(decode_request("traces", raw, JSON, "", 1 << 20, prepare=True)))
    prepared = decoded[3]
    assert prepared.typed.num_rows == 4 and len(prepared.rest) == 3  # both ways are taken
    r = Receiver(ServeConfig(db=tmp_path / "m.duckdb"))
    try:
        assert r.admit("traces", decoded, raw, JSON, "")[0] == 200  # the decoder's hand-off
        assert r.audit.force_flush()
        live = sorted((f.grade.value, f.workflow_key, f.seq) for f in r.audit.findings)
        assert r.audit.unmapped == 0
    finally:
        r.close()
    batch = sorted((f["grade"], f["workflow_key"], f["seq"])
                   for f in json.loads(render_json(report(tmp_path / "m.duckdb")))["findings"])
    assert live == batch == [("double_commit", "mixed", 7), ("stale_activity", "mixed", 4),
                             ("stale_activity", "mixed", 6), ("stale_commit", "mixed", 5)]
