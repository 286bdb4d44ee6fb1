"""Issue 19, never lose or corrupt, and a library that can be used twice: foreign --db files,
read-only stores, one store opened many times in a process, only ``AuditorError``s, odd files in
directories, and small files batched with the same accounting as one by one."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from auditor import AuditorError, Store, StoreError, audit, ingest_paths, report
from auditor.ingest import discover
from auditor.store.feed import read_source

from ..conftest import FIXTURES, ROOT, run_cli
from ..helpers import without_dac_override as _without_dac_override

SEED = FIXTURES / "seed_split_brain.jsonl"


@pytest.mark.parametrize("name, content, what", [
    ("old.parquet", b"PAR1" + b"\0" * 64 + b"PAR1", "it is a Parquet file"),
    ("data.json", b'{"seq": 1}\n', "it is not a DuckDB file"),
    ("store.duckdb", b"\x1f\x8b\x08" + b"\0" * 20, "it is a gzip file"),
    ("new.parquet", None, "a .parquet name is for input, not a store"),
    ("new.jsonl", None, "a .jsonl name is for input, not a store"),
])
def test_a_db_that_is_not_duckdb_is_refused_and_left_alone(tmp_path, name, content, what):
    db = tmp_path / name
    if content is not None:
        db.write_bytes(content)
    p = run_cli("ingest", str(SEED), "--db", str(db))
    assert p.returncode == 2 and p.stderr.decode().startswith(f"Error: {db}: cannot open the DuckDB store ({what})")
    assert (db.read_bytes() if content is not None else db.exists()) == (content if content is not None else False)
    assert sorted(x.name for x in tmp_path.iterdir()) == ([name] if content is not None else [])


def test_an_input_given_as_db_is_never_written(tmp_path):
    log = tmp_path / "events.jsonl"
    shutil.copy(SEED, log)
    p = run_cli("audit", str(log), "--db", str(log))
    assert p.returncode == 2 and log.read_bytes() == SEED.read_bytes()


def test_report_reads_a_store_it_cannot_write(tmp_path):
    """Another user's store, or a CI artifact: a read-only file in a read-only folder."""
    folder = tmp_path / "artifact"
    folder.mkdir()
    db = folder / "audit.duckdb"
    assert run_cli("ingest", str(SEED), "--db", str(db)).returncode == 0
    db.chmod(0o444)
    folder.chmod(0o555)
    try:
        p = subprocess.run([sys.executable, "-m", "auditor", "report", "--db", str(db), "--json", "-"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120, preexec_fn=_without_dac_override())
    finally:
        folder.chmod(0o755)
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["summary"]["findings"]["double_commit"] == 1
    assert sorted(x.name for x in folder.iterdir()) == ["audit.duckdb"]


def test_one_store_opened_many_times_in_a_process(tmp_path):
    db = tmp_path / "audit.duckdb"
    first = audit([SEED], db=db)
    again = [report(db), report(db), audit([SEED], db=db)]
    assert all(r.expected_triples() == first.expected_triples() for r in again)
    assert report(db).input.events == 16  # the second audit added nothing: same digest
    with Store(db) as s, Store(db, read_only=True) as t:
        assert s.input_summary().events == t.input_summary().events == 16


def test_the_library_raises_only_auditor_errors(tmp_path):
    with pytest.raises(AuditorError):
        audit([tmp_path / "missing.jsonl"])
    with pytest.raises(AuditorError):
        report(tmp_path / "missing.duckdb")
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"x" * 4096)
    with pytest.raises(StoreError):
        report(bad)
    store = Store()
    store.close()
    with pytest.raises(AuditorError):  # DuckDB's "connection closed", wrapped at the edge
        ingest_paths([SEED], store)


@pytest.fixture
def odd_dir(tmp_path):
    d = tmp_path / "logs"
    d.mkdir()
    shutil.copy(SEED, d / "events.jsonl")
    os.mkfifo(d / "pipe.jsonl")
    (d / "loop.jsonl").symlink_to("loop.jsonl")
    sock = socket.socket(socket.AF_UNIX)
    short = f"/tmp/auditor-test-{os.getpid()}.sock"  # a socket path must be short
    sock.bind(short)
    os.rename(short, d / "agent.sock")
    yield d
    sock.close()


def test_fifos_sockets_and_loops_in_a_directory_are_reported(odd_dir):
    p = subprocess.run(
        [sys.executable, "-m", "auditor", "audit", str(odd_dir), "--json", "-"], cwd=ROOT, capture_output=True,
        text=True, timeout=60)
    assert p.returncode == 1, p.stderr
    inp = json.loads(p.stdout)["input"]
    assert inp["files"] == [str(odd_dir / "events.jsonl")]
    assert inp["skipped"] == [
        {"path": str(odd_dir / "agent.sock"), "reason": "a socket, not a file"},
        {"path": str(odd_dir / "loop.jsonl"), "reason": "symbolic link loop (the link leads back to itself)"},
        {"path": str(odd_dir / "pipe.jsonl"),
         "reason": "a FIFO (named pipe): reading it could wait forever; pass it on its own to read it as a stream"}]
    assert (f"skipped: 3 paths that are not a file to read (first: {odd_dir / 'agent.sock'}: a socket, "
            "not a file)") in p.stderr


def test_a_fifo_given_directly_is_read_as_a_stream(odd_dir):
    fifo = odd_dir / "pipe.jsonl"
    p = subprocess.Popen([sys.executable, "-m", "auditor", "audit", str(fifo), "--json", "-"], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with open(fifo, "wb") as w:
        w.write(SEED.read_bytes())
    out, err = p.communicate(timeout=60)
    assert p.returncode == 1, err
    assert json.loads(out)["input"]["files"] == [str(fifo)]
    p = run_cli("audit", str(odd_dir / "loop.jsonl"))
    assert p.stderr.decode() == (f"Error: {odd_dir / 'loop.jsonl'}: symbolic link loop (the link leads back to "
                                 "itself); point at the log file itself\n")


def _small_logs(folder, n):
    folder.mkdir()
    lines = SEED.read_text().splitlines(keepends=True)
    for i in range(n):  # overlapping slices: duplicates across files, and one file twice
        (folder / f"part-{i:03d}.jsonl").write_text("".join(lines[i % 10: i % 10 + 5]) + "not json\n")
    shutil.copy(folder / "part-000.jsonl", folder / "part-999.jsonl")


def test_small_files_batched_account_like_one_by_one(tmp_path):
    _small_logs(tmp_path / "logs", 30)
    batched = Store()
    counts = ingest_paths([tmp_path / "logs"], batched)
    single = Store()
    one_by_one = [read_source(single, s, idempotent=True) for s in discover([tmp_path / "logs"])]
    assert counts == one_by_one and counts[-1].skipped  # part-999: the same bytes as part-000
    assert all(c.lines_read == c.events + c.duplicates + c.quarantined for c in counts)
    rows = "SELECT * EXCLUDE (ord) FROM identified_events() ORDER BY event_id"
    assert batched.con.execute(rows).fetchall() == single.con.execute(rows).fetchall()
    assert (batched.con.execute("SELECT * FROM sources ORDER BY 1").fetchall()
            == single.con.execute("SELECT * FROM sources ORDER BY 1").fetchall())
    assert batched.input_summary() == single.input_summary()


def test_a_bad_small_file_keeps_the_ones_before_it_and_names_itself(tmp_path):
    logs = tmp_path / "logs"
    _small_logs(logs, 5)
    (logs / "part-002.jsonl.gz").write_bytes(b"\x1f\x8b\x08\x00garbage, not a gzip stream at all")
    db = tmp_path / "store.duckdb"
    p = run_cli("ingest", str(logs), "--db", str(db))
    assert p.returncode == 2 and p.stderr.decode().startswith(f"Error: {logs / 'part-002.jsonl.gz'}: ")
    with Store(db, read_only=True) as s:
        assert [r[0] for r in s.con.execute("SELECT name FROM sources ORDER BY 1").fetchall()] == [
            str(logs / "part-000.jsonl"), str(logs / "part-001.jsonl"), str(logs / "part-002.jsonl")]
