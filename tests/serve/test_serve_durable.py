"""200 means kept (issue 36): a real ``auditor serve`` killed with ``kill -9`` at random points,
stopped by SIGHUP, stopped while another process holds its store; every acknowledged record is in
the store afterwards. Senders are raw HTTP and the SDK's own OTLP/HTTP exporter."""

from __future__ import annotations

import gzip
import os
import random
import signal
import threading
import time
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from .serve_kit import Served, event_id, request, stored

PER_REQUEST = 50


def events(trace: int, n: int = PER_REQUEST) -> list[dict]:
    """``n`` progress events on a key of their own per request: nothing to find, all to keep."""
    return [{"kind": "progress", "workflow_key": f"k{trace % 97}", "epoch": 1, "seq": trace * 1000 + i,
             "worker": "w"} for i in range(n)]


class Load:
    """Two senders until the server goes away: raw HTTP (protobuf) and the SDK's exporter. ``acked``
    holds the event ids of every record a 200 (an export SUCCESS) acknowledged."""

    def __init__(self, server: Served, first_trace: int) -> None:
        self.server, self.acked, self.trace = server, set(), first_trace
        self._lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._raw), threading.Thread(target=self._sdk)]
        for t in self.threads:
            t.start()

    def _next(self) -> int:
        with self._lock:
            self.trace += 1
            return self.trace

    def _raw(self) -> None:
        while not self.stop.is_set():
            trace = self._next()
            try:
                status, _ = self.server.post(request(events(trace), trace))
            except OSError:
                return
            if status == 200:
                with self._lock:
                    self.acked.update(event_id(trace, i) for i in range(PER_REQUEST))

    def _sdk(self) -> None:
        memory = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        tracer = provider.get_tracer("kill-9")
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{self.server.port}/v1/traces", timeout=2)
        while not self.stop.is_set():
            trace = self._next()
            memory.clear()
            for e in events(trace):
                tracer.start_span("step", attributes={"ownership.event": e["kind"], **{
                    "ownership." + k: v for k, v in e.items() if k != "kind"}}).end()
            spans = memory.get_finished_spans()
            if exporter.export(spans) is not SpanExportResult.SUCCESS:
                return
            with self._lock:
                self.acked.update(f"otel:{s.context.trace_id:032x}:{s.context.span_id:016x}:span" for s in spans)
        exporter.shutdown()

    def join(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(60)


def decoder_pids(pid: int) -> list[int]:
    kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(k) for k in kids if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


#: How many kill -9 trials (``AUDITOR_KILL_TRIALS``): each restarts the receiver on the same store.
TRIALS = int(os.environ.get("AUDITOR_KILL_TRIALS", "5"))


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads the process tree from /proc")
def test_kill_9_at_random_points_loses_no_acknowledged_record(tmp_path):
    """``TRIALS`` trials: load from two senders, ``kill -9`` after a random time, restart on the
    same store (the spool is replayed before the port opens): every record acknowledged before the
    kill is in the store, exactly once. Every fourth trial runs a decoder process, which dies with
    the receiver. 5 by default (the suite's time); ``AUDITOR_KILL_TRIALS=20`` for the long run."""
    rng = random.Random(36)
    db = tmp_path / "kill.duckdb"
    acked: set[str] = set()
    trace, figures = 0, []
    server = Served(tmp_path, db, "--decoders", "0").start()
    for trial in range(TRIALS):
        kids = decoder_pids(server.proc.pid)
        load = Load(server, trace)
        time.sleep(rng.uniform(0.05, 0.6))
        server.kill()
        load.join()
        trace = load.trace
        acked |= load.acked
        figures.append(len(load.acked))
        deadline = time.monotonic() + 10
        while any(alive(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(alive(k) for k in kids), "a decoder outlived its receiver"
        # The restart replays the spool before its port opens; the next trial runs on it.
        decoders = "1" if trial % 4 == 3 else "0"
        server = Served(tmp_path, db, "--decoders", decoders).start()
        assert len(decoder_pids(server.proc.pid)) == int(decoders)
        ids = [r[0] for r in stored(db, "SELECT event_id FROM events")]
        assert len(ids) == len(set(ids))  # each stored once
        missing = acked - set(ids)
        assert not missing, f"trial {trial}: {len(missing)} acknowledged records missing"
    assert server.stop() == 0
    assert sum(figures) > 50 * TRIALS and sum(1 for f in figures if f) >= 0.75 * TRIALS  # the kills hit real load
    print(f"kill -9: {TRIALS} trials, {len(acked)} acknowledged records, 0 missing; per trial {figures}")


def test_sighup_stops_like_sigterm_and_keeps_everything(tmp_path):
    db = tmp_path / "hup.duckdb"
    server = Served(tmp_path, db, "--decoders", "0").start()
    for trace in range(1, 11):
        assert server.post(request(events(trace), trace))[0] == 200
    assert server.stop(signal.SIGHUP) == 0
    assert stored(db, "SELECT count(*) FROM events") == [(10 * PER_REQUEST,)]
    assert not list((tmp_path / "hup.duckdb.spool").glob("*.spool"))  # all stored: the spool is empty


@pytest.mark.slow
def test_shutdown_with_the_store_locked_keeps_the_records_and_says_so(tmp_path):
    """Another process holds the store while the receiver stops: it waits (``--store-wait``), then
    exits 75 naming the count; the spool keeps them and the next start appends them."""
    import subprocess
    import sys

    db = tmp_path / "locked.duckdb"
    server = Served(tmp_path, db, "--decoders", "0", "--store-wait", "1").start()
    assert server.post(request(events(1), 1))[0] == 200
    while server.json("/healthz")["persisted"] < PER_REQUEST:
        time.sleep(0.05)
    stored(db, "SELECT 1")  # the receiver lets go of an idle store: the lock below can be taken
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(60)", str(db)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for trace in range(2, 6):
            assert server.post(request(events(trace), trace))[0] == 200
        code = server.stop()
        assert code == 75, server.log.read_text()
        assert "Error: 200 acknowledged records are not in" in server.log.read_text()
    finally:
        holder.kill()
        holder.wait()
    Served(tmp_path, db, "--decoders", "0").start().stop()
    assert stored(db, "SELECT count(*) FROM events") == [(5 * PER_REQUEST,)]


def test_every_gzip_member_is_read_or_the_body_refused(tmp_path):
    db = tmp_path / "gz.duckdb"
    with Served(tmp_path, db, "--decoders", "0") as server:
        # Two members: their protobuf bytes concatenate into one request holding both halves.
        body = gzip.compress(request(events(1)[:25], 1)) + gzip.compress(request(events(1)[25:], 2))
        assert server.post(body, {"Content-Encoding": "gzip"})[0] == 200
        assert server.post(gzip.compress(request(events(3), 3)) + b"trailing", {"Content-Encoding": "gzip"})[0] == 400
        assert server.json("/healthz")["records"] == 50
    assert stored(db, "SELECT count(*) FROM events") == [(50,)]
    assert stored(db, "SELECT reason FROM quarantine") == [
        ("traces request refused whole (400): body is not valid gzip (every member whole)",)]
