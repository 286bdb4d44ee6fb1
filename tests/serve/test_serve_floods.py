"""Floods beside a canary sender (issue 44, items 4-6): many gzip members, unterminated header
lines, idle connections, trickled bodies, concurrent readers of ``/findings``. Each test starts a
real ``auditor serve`` on 127.0.0.1, floods it for a few seconds from threads of its own, and
measures what the probe measured: the receiver's RSS and a canary's answers and latency."""

from __future__ import annotations

import gzip
import http.client
import json
import socket
import threading
import time
from pathlib import Path

import pytest

from auditor.serve.decode import DecodeBound, gunzip
from .serve_kit import Served, request

KEY = "ledger/export/2026-07-26"
STALE = [{"kind": "lease_acquired", "workflow_key": KEY, "epoch": 17, "seq": 1, "worker": "alpha"},
         {"kind": "lease_acquired", "workflow_key": KEY, "epoch": 18, "seq": 2, "worker": "beta"},
         {"kind": "effect_committed", "workflow_key": KEY, "epoch": 17, "seq": 3, "worker": "alpha",
          "effect_key": "release-index"}]
HEAD = b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class Canary:
    """A sender beside the flood: one small request at a time until stopped; each answer's status
    and latency kept."""

    def __init__(self, server: Served, first_trace: int = 1000) -> None:
        self.server, self.trace = server, first_trace
        self.answers: list[tuple[int, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)  # a failed test never hangs on it
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            self.trace += 1
            events = [{"kind": "progress", "workflow_key": f"canary-{self.trace}", "epoch": 1, "seq": 1,
                       "worker": "c"}]
            started = time.monotonic()
            try:
                status = self.server.post(request(events, self.trace))[0]
            except OSError:
                status = 0
            self.answers.append((status, time.monotonic() - started))
            time.sleep(0.05)

    def join(self) -> list[tuple[int, float]]:
        self.stop.set()
        self.thread.join(60)
        return self.answers


def test_gunzip_is_bounded_in_members_bytes_and_time():
    member = gzip.compress(b"x", mtime=0)
    with pytest.raises(DecodeBound, match="more than 1,024 members"):
        gunzip(member * 100_000, 1 << 24)
    with pytest.raises(DecodeBound, match="decoding time bound"):
        gunzip(member * 10, 1 << 24, deadline=time.monotonic() - 1)
    started = time.monotonic()
    assert gunzip(member * 100_000, 1 << 24, max_members=100_000) == b"x" * 100_000
    assert time.monotonic() - started < 5  # linear: 100k members in about a second on a loaded machine


@pytest.mark.slow
def test_100k_gzip_members_beside_a_canary(tmp_path):
    """The probe's item 4: a body of 100,000 gzip members is refused (413) at the member bound
    within a second or two, while a canary is answered 200 throughout and its records reach the
    store; the receiver stops on SIGTERM and restarts at once (the replay meets the same bound)."""
    db = tmp_path / "gz.duckdb"
    server = Served(tmp_path, db, "--decoders", "1").start()
    canary = Canary(server)
    body = gzip.compress(b"", mtime=0) * 100_000  # 2 MB of empty members, as the probe's 6 MB of 300k
    try:
        started = time.monotonic()
        status, answer = server.post(body, {"Content-Encoding": "gzip"})
        took = time.monotonic() - started
        time.sleep(1.0)
    finally:
        answers = canary.join()
    assert status == 413 and b"more than 1,024 members" in answer and took < 5, (status, took)
    assert answers and all(s == 200 for s, _ in answers), answers
    worst = max(t for _, t in answers)
    assert worst < 3.0, worst
    server.json("/findings")  # drained: every canary record is in the store
    assert server.json("/healthz")["persisted"] == len(answers)
    started = time.monotonic()
    assert server.stop() == 0 and time.monotonic() - started < 15
    started = time.monotonic()
    server = Served(tmp_path, db, "--decoders", "0").start()
    assert time.monotonic() - started < 30
    assert server.stop() == 0
    print(f"100k members: 413 in {took:.2f} s; canary {len(answers)} x 200, worst {worst * 1000:.0f} ms")


def _hold(port: int, data: bytes, sockets: list) -> None:
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(20)
    sockets.append(s)
    try:
        s.sendall(data)
    except OSError:
        pass


@pytest.mark.slow
def test_header_idle_and_slow_body_floods_keep_the_canary_served(tmp_path):
    """The probe's item 5, short: 40 connections each sending 2 MB of one unterminated header line
    (431 each past 64 KB; the RSS barely moves), then 150 idle connections over a limit of 100 (the
    canary's connections close the oldest idle ones instead of getting 503), then nine bodies of
    16 MiB trickled (they hold only what they sent: the canary never gets 429). A header sent a
    byte at a time is cut at the absolute deadline."""
    db = tmp_path / "flood.duckdb"
    server = Served(tmp_path, db, "--decoders", "0", "--max-connections", "100", "--idle-timeout", "3").start()
    pid = server.proc.pid
    before = rss_mb(pid)
    canary = Canary(server)
    try:
        answers, peak = _flood(server, pid)
    finally:
        canary.join()
    answers = canary.answers
    assert peak - before < 100, (before, peak)
    assert len(answers) >= 10 and all(s == 200 for s, _ in answers), answers
    worst = max(t for _, t in answers)
    assert worst < 3.0, worst
    _deadline_holds(server)
    assert server.stop() == 0
    print(f"floods: RSS {before:.0f} -> {peak:.0f} MB; canary {len(answers)} x 200, worst {worst * 1000:.0f} ms")


def _flood(server: Served, pid: int):
    """The three floods, one after another; the receiver's RSS after the header flood."""
    sockets: list[socket.socket] = []
    line = HEAD + b"X-Flood: " + b"a" * (2 << 20)  # never terminated
    threads = [threading.Thread(target=_hold, args=(server.port, line, sockets)) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    peak = rss_mb(pid)
    statuses = [s.recv(200)[:12] for s in sockets]
    assert statuses.count(b"HTTP/1.1 431") == 40, statuses
    for s in sockets:
        s.close()
    sockets.clear()
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(150)]
    time.sleep(1.0)
    for _ in range(9):
        _hold(server.port, HEAD + b"Content-Length: 16777216\r\n\r\n" + b"x" * 1000, sockets)
    for _ in range(10):
        for s in sockets:
            s.sendall(b"x" * 100)
        time.sleep(0.1)
    for s in idle + sockets:
        s.close()
    return None, peak


def _deadline_holds(server: Served) -> None:
    # One header byte every 0.25 s: closed at the deadline (3 s from the connection's start), not reset by bytes.
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port)) as s:
        s.settimeout(1)
        got = b""
        for byte in HEAD * 4:
            try:
                s.sendall(bytes([byte]))
                got = s.recv(200, socket.MSG_DONTWAIT)
            except (BlockingIOError, socket.timeout):
                pass
            except OSError:
                break
            if got or time.monotonic() - started > 8:
                break
            time.sleep(0.25)
    assert got.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 4.5, (got, time.monotonic() - started)


@pytest.mark.slow
def test_concurrent_readers_of_findings_all_get_the_same_answer(tmp_path):
    """The probe's item 6: four readers at once, eight requests each, on a store of 20,000 events
    with one incident: every answer 200, all equal, each saying the verdict in its headers."""
    db = tmp_path / "readers.duckdb"
    with Served(tmp_path, db, "--decoders", "0") as server:
        assert server.post(request(STALE, 1))[0] == 200
        for trace in range(2, 42):
            events = [{"kind": "progress", "workflow_key": f"busy-{trace}-{i % 7}", "epoch": 1, "seq": i + 1,
                       "worker": "w"} for i in range(500)]
            assert server.post(request(events, trace))[0] == 200
        answers: list[tuple[int, bytes, str | None]] = []

        def read() -> None:
            for _ in range(8):
                conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
                conn.request("GET", "/findings", headers={"Authorization": f"Bearer {server.token}"})
                r = conn.getresponse()
                answers.append((r.status, r.read(), r.getheader("Auditor-Verdict")))
                conn.close()

        readers = [threading.Thread(target=read) for _ in range(4)]
        for t in readers:
            t.start()
        for t in readers:
            t.join(300)
    assert len(answers) == 32 and {a[0] for a in answers} == {200}
    assert len({a[1] for a in answers}) == 1 and {a[2] for a in answers} == {"fail"}
    assert [f["grade"] for f in json.loads(answers[0][1])] == ["stale_commit"]
