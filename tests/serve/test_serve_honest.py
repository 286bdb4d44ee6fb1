"""Never PASS over what was acknowledged (issue 44, items 1-3): a poison record, two receivers on
one store, a flipped byte in the spool. Each test runs real ``auditor serve`` processes on
127.0.0.1, kills them with ``kill -9`` and reads the store with ``auditor report --db`` in a process
of its own, as the probe did."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from auditor.serve.decode import decode_request
from auditor.store.spooled import FRAME, scan
from .serve_kit import ROOT, Served, request, stored, verdict

KEY = "ledger/export/2026-07-26"
STALE = [{"kind": "lease_acquired", "workflow_key": KEY, "epoch": 17, "seq": 1, "worker": "alpha"},
         {"kind": "lease_acquired", "workflow_key": KEY, "epoch": 18, "seq": 2, "worker": "beta"},
         {"kind": "effect_committed", "workflow_key": KEY, "epoch": 17, "seq": 3, "worker": "alpha",
          "effect_key": "release-index"}]
#: The probe's record: a timestamp past any calendar (OverflowError in the mapping).
POISON = json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [{
    "timeUnixNano": "10000000000000000000000000000", "body": {"stringValue": "x"},
    "attributes": [{"key": "ownership.event", "value": {"stringValue": "progress"}},
                   {"key": "ownership.workflow_key", "value": {"stringValue": "other"}},
                   {"key": "ownership.epoch", "value": {"intValue": "1"}},
                   {"key": "ownership.seq", "value": {"intValue": "1"}}]}]}]}]}).encode()


def quiet(n: int, trace: int) -> list[dict]:
    """``n`` progress events on a key of their own: nothing to find."""
    return [{"kind": "progress", "workflow_key": f"quiet-{trace}", "epoch": 1, "seq": i + 1, "worker": "w"}
            for i in range(n)]


@contextmanager
def store_held(server: Served):
    """Another process holds the store (as ``auditor report`` does), so the receiver's writer cannot
    append: what is acknowledged meanwhile stays in the spool only."""
    while server.json("/healthz")["unwritten"]:
        time.sleep(0.05)
    stored(server.db, "SELECT 1")  # waits until the receiver lets go of its idle store
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
                               "print('held', flush=True); time.sleep(120)", str(server.db)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.kill()
        holder.wait()


def test_the_poison_record_is_refused_per_request_and_never_raises():
    decoded = decode_request("logs", POISON, "application/json", "", 1 << 20)
    assert decoded == ("error", 400, "application/json", "the body could not be decoded (OverflowError)")


@pytest.mark.slow
def test_poison_then_kill_9_then_restart_never_reads_pass(tmp_path):
    """The probe's item 1: a stale commit and the poison record acknowledged, the receiver killed
    before its writer could append them. ``report --db`` says incomplete (2 requests pending, and
    since when); the restart appends the stale commit and quarantines the poison request, and the
    verdict is the stale commit's FAIL."""
    db = tmp_path / "poison.duckdb"
    server = Served(tmp_path, db, "--decoders", "1").start()
    assert server.post(request(quiet(3, 1), 1))[0] == 200  # the store exists, with a pass
    before = time.time()
    with store_held(server):
        assert server.post(request(STALE, 2))[0] == 200
        assert server.post(POISON, path="/v1/logs", ctype="application/json")[0] == 400
        server.kill()
    code, doc = verdict(db)
    assert (code, doc["verdict"]) == (3, "incomplete")
    assert doc["spool"]["pending_requests"] == 2 and doc["spool"]["lost_requests"] == 0
    since = time.mktime(time.strptime(doc["spool"]["pending_since"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert before - 2 <= since <= time.time()
    for attempt in range(2):  # every later start comes up; the second has nothing to replay
        server = Served(tmp_path, db, "--decoders", "0").start()
        server.kill()
    code, doc = verdict(db)
    assert (code, doc["verdict"]) == (1, "fail") and "spool" not in doc
    assert [f["grade"] for f in doc["findings"] if f["grade"] == "stale_commit"] == ["stale_commit"]
    assert stored(db, "SELECT reason FROM quarantine") == [
        ("logs request refused whole (400): the body could not be decoded (OverflowError)",)]


@pytest.mark.slow
def test_a_second_receiver_or_an_ingest_on_a_held_store_is_refused_naming_the_holder(tmp_path):
    """The probe's item 2: one receiver per store. A second ``serve`` and an ``ingest`` exit 2 naming
    the first receiver (its address and pid); after a ``kill -9`` of the holder the next starts."""
    db = tmp_path / "one.duckdb"
    first = Served(tmp_path, db, "--decoders", "0").start()
    assert first.post(request(quiet(5, 1), 1))[0] == 200
    second = subprocess.run([sys.executable, "-m", "auditor", "serve", "--db", str(db), "--port", "0", "-q"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    holder = f"auditor serve on 127.0.0.1:{first.port} (pid {first.proc.pid}, since "
    assert second.returncode == 2 and holder in second.stderr and "one receiver per store" in second.stderr
    log = tmp_path / "more.jsonl"
    log.write_text(json.dumps(quiet(1, 9)[0] | {"ts": "2026-01-01T00:00:00Z"}) + "\n")
    ingest = subprocess.run([sys.executable, "-m", "auditor", "ingest", str(log), "--db", str(db), "-q"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ingest.returncode == 2 and holder in ingest.stderr, ingest.stderr
    assert first.post(request(quiet(5, 2), 2))[0] == 200  # the holder is untouched
    first.kill()
    third = Served(tmp_path, db, "--decoders", "0").start()  # the kernel let go of the dead holder's lock
    assert third.stop() == 0
    ingest = subprocess.run([sys.executable, "-m", "auditor", "ingest", str(log), "--db", str(db), "-q"],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ingest.returncode == 0, ingest.stderr
    assert stored(db, "SELECT count(*) FROM events") == [(11,)]


def frames(spool: Path) -> list[tuple[Path, int, int]]:
    """``(segment, byte offset, number)`` of every frame of a spool, in number order."""
    out = []
    for segment in spool.glob("*.spool"):
        data, at = segment.read_bytes(), 0
        while at < len(data):
            _magic, length, _crc, number = FRAME.unpack_from(data, at)
            out.append((segment, at, number))
            at += FRAME.size + length
    return sorted(out, key=lambda f: f[2])


@pytest.mark.slow
@pytest.mark.parametrize("which", ["first", "middle"])
def test_a_flipped_byte_in_the_spool_is_named_and_counted_as_lost(tmp_path, which):
    """The probe's item 3: five acknowledged requests only in the spool, one bit flipped in the
    first or a middle frame's body. ``report --db`` says incomplete (4 pending, 1 lost); the restart
    appends the four readable requests, quarantines the lost one naming the damaged bytes, and
    keeps the damaged segment."""
    db = tmp_path / "flip.duckdb"
    server = Served(tmp_path, db, "--decoders", "0").start()
    assert server.post(request(quiet(2, 0), 100))[0] == 200
    with store_held(server):
        for trace in range(1, 6):
            assert server.post(request(quiet(50, trace), trace))[0] == 200
        server.kill()
    spool = tmp_path / "flip.duckdb.spool"
    pending = [f for f in frames(spool) if f[2] > 1]  # request 1 is in the store already
    assert [f[2] for f in pending] == [2, 3, 4, 5, 6]
    segment, offset, _number = pending[0 if which == "first" else 2]
    target = offset + FRAME.size + 200  # inside the body
    data = bytearray(segment.read_bytes())
    data[target] ^= 0x10
    segment.write_bytes(bytes(data))
    assert len(scan(spool, 1).entries) == 4
    code, doc = verdict(db)
    assert (code, doc["verdict"]) == (3, "incomplete")
    assert (doc["spool"]["pending_requests"], doc["spool"]["lost_requests"]) == (4, 1)
    assert doc["spool"]["damaged"][0]["file"] == str(segment)
    server = Served(tmp_path, db, "--decoders", "0").start()
    assert server.stop() == 0
    assert stored(db, "SELECT count(*) FROM events") == [(2 + 4 * 50,)]
    [(reason,)] = stored(db, "SELECT reason FROM quarantine")
    assert reason.startswith("acknowledged request ") and segment.name in reason and "checksum mismatch" in reason
    code, doc = verdict(db)
    assert (code, doc["verdict"], doc["input"]["quarantined"]) == (3, "incomplete", 1) and "spool" not in doc
    assert (spool / "damaged" / segment.name).is_file() and not list(spool.glob("*.spool"))


def write_spool(directory: Path, n: int) -> tuple[Path, list[int]]:
    """A segment of ``n`` frames written by the receiver's own spool; ``(path, frame offsets)``."""
    import threading

    from auditor.serve.spool import Spool

    spool = Spool(directory, 1)
    done = threading.Semaphore(0)
    for i in range(n):
        spool.submit({"signal": "traces", "i": i}, b"body %d " % i * 40, lambda number, e: done.release())
    for _ in range(n):
        done.acquire()
    spool.close()
    [segment] = directory.glob("*.spool")
    return segment, [f[1] for f in frames(directory)]


@pytest.mark.parametrize("damage, lost, tail", [
    ("cut", [], 0),                 # the write under way at a kill: never acknowledged, not evidence
    ("zeros", [], 0),               # a file extended and never written (a power cut)
    ("number", [3], 0),             # a bit of a frame's number: ASP2's checksum covers it
    ("length", [3], 0),             # a bit of a middle frame's length: the next frame is found again
    ("last-body", [], 1),           # the last frame's body: lost, its number unknown
])
def test_the_spool_scan_tells_a_torn_write_from_a_damaged_frame(tmp_path, damage, lost, tail):
    segment, offsets = write_spool(tmp_path, 5)
    data = bytearray(segment.read_bytes())
    if damage == "cut":
        data = data[:offsets[4] + 30]
    elif damage == "zeros":
        data += bytes(4096)
    elif damage == "number":
        data[offsets[2] + 12] ^= 0x04
    elif damage == "length":
        data[offsets[2] + 5] ^= 0x01
    else:
        data[offsets[4] + FRAME.size + 50] ^= 0x01
    segment.write_bytes(bytes(data))
    found = scan(tmp_path)
    assert (found.lost, found.tail_lost) == (lost, tail)
    assert [e.number for e in found.entries] == [n for n in range(1, 6) if n not in lost][:5 - tail - (damage == "cut")]
    assert [e.body for e in found.entries][:2] == [b"body 0 " * 40, b"body 1 " * 40]
