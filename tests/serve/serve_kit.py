"""A real ``auditor serve`` process for the receiver's end-to-end tests, and raw OTLP/HTTP to it.

``Served`` starts the server (stderr to a file, never a pipe nobody reads), waits for it, and
stops it with a signal or ``kill -9``; ``request`` builds an OTLP protobuf traces request from
canonical events (one span per event, ``ownership.event`` on the span, so each record's event id
is ``otel:<trace>:<span>:span``); ``post`` sends bytes as they are (``http.client``).
"""

from __future__ import annotations

import atexit
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

ROOT = Path(__file__).resolve().parent.parent.parent
TOKENS = {"worker": "w" * 24, "sink": "s" * 24, "coordinator": "c" * 24, "verifier": "v" * 24,
          "reader": "r" * 24, "any": "a" * 24}


_STARTED: list[subprocess.Popen] = []


@atexit.register
def _stop_leftovers() -> None:
    """A test that failed half way leaves no server behind (each ended by its own process id)."""
    for proc in _STARTED:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tokens_file(tmp: Path) -> Path:
    path = tmp / "tokens"
    path.write_text("# one sender per line\n" + "".join(f"{t} {role}\n" for role, t in TOKENS.items()))
    return path


def auth(role: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[role]}"}


def _kv(key: str, value) -> KeyValue:
    if isinstance(value, bool) or not isinstance(value, int):
        return KeyValue(key=key, value=AnyValue(string_value=str(value)))
    return KeyValue(key=key, value=AnyValue(int_value=value))


def request(events: list[dict], trace: int = 1) -> bytes:
    """An OTLP protobuf traces request: one span per canonical event, span ids ``trace``-numbered."""
    req = ExportTraceServiceRequest()
    scope = req.resource_spans.add().scope_spans.add()
    for n, e in enumerate(events):
        span = scope.spans.add(trace_id=trace.to_bytes(16, "big"), span_id=(n + 1).to_bytes(8, "big"),
                               name="step", start_time_unix_nano=1_790_000_000_000_000_000 + n)
        span.attributes.append(_kv("ownership.event", e["kind"]))
        for k, v in e.items():
            if k != "kind":
                span.attributes.append(_kv("ownership." + k, v))
    return req.SerializeToString()


def event_id(trace: int, n: int) -> str:
    """The event id of ``request(events, trace)``'s ``n``-th event (0-based)."""
    return f"otel:{trace:032x}:{n + 1:016x}:span"


class Served:
    """One ``auditor serve`` process on 127.0.0.1 (``args`` added to its command line)."""

    def __init__(self, tmp: Path, db: Path, *args: str, tls: Path | None = None, token: str | None = "reader",
                 host: str = "127.0.0.1") -> None:
        self.tmp, self.db, self.args, self.tls, self.host = tmp, db, list(args), tls, host
        self.port = free_port()
        self.token = TOKENS[token] if token else None
        self.log = tmp / f"serve-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> "Served":
        self.port = free_port()
        self.log = self.tmp / f"serve-{self.port}.log"
        assert self.proc is None or self.proc.poll() is not None, "this server is running already"
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "auditor", "serve", "--host", self.host, "--port",
                                          str(self.port), "--db", str(self.db), "-q", *self.args],
                                         cwd=ROOT, stderr=err, stdout=subprocess.DEVNULL)
        _STARTED.append(self.proc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"auditor serve exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
            try:
                if self.get("/healthz")[0] == 200:
                    return self
            except OSError:
                time.sleep(0.05)
        raise AssertionError("auditor serve did not come up")

    def connection(self, timeout: float = 30.0) -> http.client.HTTPConnection:
        if self.tls is None:
            return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        context = ssl.create_default_context(cafile=str(self.tls))
        return http.client.HTTPSConnection("localhost", self.port, timeout=timeout, context=context)

    def post(self, body: bytes, headers: dict | None = None, path: str = "/v1/traces",
             ctype: str = "application/x-protobuf", role: str | None = "any") -> tuple[int, bytes]:
        conn = self.connection()
        try:
            h = {"Content-Type": ctype, **(auth(role) if role else {}), **(headers or {})}
            conn.request("POST", path, body, h)
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def get(self, path: str, headers: dict | None = None) -> tuple[int, bytes]:
        conn = self.connection(timeout=60)
        try:
            conn.request("GET", path, headers={**({"Authorization": f"Bearer {self.token}"} if self.token else {}),
                                               **(headers or {})})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def json(self, path: str):
        status, body = self.get(path)
        assert status == 200, (status, body)
        return json.loads(body)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout)

    def kill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def __enter__(self) -> "Served":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()


def stored(db: Path, sql: str, wait: float = 30.0) -> list[tuple]:
    """Rows of ``sql`` over the store, read-only (waiting while the receiver holds it)."""
    import duckdb

    deadline = time.monotonic() + wait
    while True:
        try:
            con = duckdb.connect(str(db), read_only=True)
            break
        except duckdb.IOException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def verdict(db: Path) -> tuple[int, dict]:
    """``auditor report --db``'s exit code and JSON document (a process of its own, as an operator runs it)."""
    proc = subprocess.run([sys.executable, "-m", "auditor", "report", "--db", str(db), "--json", "-", "-q", "--wait", "30"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.stdout, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def verdict_here(db: Path) -> tuple[int, str, int]:
    """``auditor report --db``'s exit code, verdict and quarantined count, from this process (quicker)."""
    from auditor import report

    result = report(db, lock_timeout=30)
    try:
        return result.exit_code, result.verdict.value, result.input.quarantined
    finally:
        store = getattr(result, "store", None)
        if store is not None:
            store.close()
