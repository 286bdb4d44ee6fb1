"""The persistent store under an interrupted run and a second writer, with real processes.

An ``auditor ingest`` killed with SIGKILL leaves a DuckDB file that opens, holds whole files only
(each file is one transaction), and reaches the state of one clean run once the same command is
run again (files are skipped by digest, events deduplicated by event id). Two writers on one file:
the second fails at once with one ``Error:`` line, or waits with ``--wait``; the file stays
consistent either way.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import duckdb
import pytest

from ..conftest import FIXTURES, ROOT

SEED = FIXTURES / "seed_split_brain.jsonl"
LINE = ('{"seq": %d, "workflow_key": "%s/%d", "kind": "%s", "epoch": %d, "worker": "w%d", '
        '"effect_key": "e%d"}\n')

pytestmark = pytest.mark.slow  # real processes and sessions: the end-to-end part of the suite


def _write_log(path: Path, n: int, key: str) -> Path:
    """``n`` events over 1,000 workflow keys, with takeovers, written fast from a template."""
    kinds = ("lease_acquired", "progress", "effect_committed", "progress")
    with open(path, "w") as f:
        for start in range(0, n, 50_000):
            f.write("".join(LINE % (i, key, i % 1000, kinds[i % 4], i // 1000 + (i % 3 == 0), i % 5, i % 7)
                            for i in range(start + 1, min(n, start + 50_000) + 1)))
    return path


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "auditor", *args]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(cli(*args), cwd=ROOT, capture_output=True, text=True, timeout=300)


def state(db: Path, names: dict[str, str] | None = None) -> dict:
    """Everything an audit reads, independent of the order files were ingested in (``names``
    renames sources, for a file that was read from standard input)."""
    import hashlib

    rename = (names or {}).get
    con = duckdb.connect(str(db), read_only=True)
    try:
        sources = sorted((rename(name, name), *counts) for name, *counts in con.execute(
            "SELECT name, lines_read, events, duplicates, quarantined FROM sources").fetchall())
        rows = sorted(f"{eid} {rename(name, name)}:{line}" for eid, name, line in con.execute(
            "SELECT e.event_id, s.name, e.line FROM events e JOIN sources s USING (source_id)").fetchall())
        quarantine = con.execute("SELECT count(*) FROM quarantine").fetchone()
    finally:
        con.close()
    return {"sources": sources, "events": (len(rows), hashlib.md5(",".join(rows).encode()).hexdigest()),
            "quarantine": quarantine}


def findings(db: Path) -> list[str]:
    p = run("report", "--db", str(db), "--json", "-", "--fail-on", "double_commit")
    assert p.returncode in (0, 1), p.stderr
    return [f["id"] for f in json.loads(p.stdout)["findings"]]


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    d = tmp_path_factory.mktemp("store")
    ns = SimpleNamespace(small=_write_log(d / "small.jsonl", 5_000, "small"),
                         big=_write_log(d / "big.jsonl", 150_000, "big"), clean=d / "clean.duckdb")
    p = run("ingest", str(SEED), str(ns.small), str(ns.big), "--db", str(ns.clean))
    assert p.returncode == 0, p.stderr
    ns.state, ns.findings = state(ns.clean), findings(ns.clean)
    assert ns.state["events"][0] == 16 + 5_000 + 150_000
    return ns


def _wait_for(condition, proc: subprocess.Popen, what: str, timeout: float = 120,
              poll: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the ingest ended before {what}; make the big log bigger"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(poll)


@pytest.mark.parametrize("moment", ["mid-ingest", "mid-checkpoint"])
def test_sigkill_leaves_whole_files_and_a_rerun_completes(logs, tmp_path, moment):
    db, wal = tmp_path / "killed.duckdb", tmp_path / "killed.duckdb.wal"
    assert run("ingest", str(SEED), "--db", str(db)).returncode == 0
    assert not wal.exists()  # closed cleanly: checkpointed
    proc = subprocess.Popen(cli("ingest", str(logs.small), str(logs.big), "--db", str(db)), cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        # The first write to the log is the commit of small.jsonl; big.jsonl is then in flight.
        _wait_for(wal.exists, proc, "small.jsonl was committed")
        if moment == "mid-ingest":
            time.sleep(0.3)
        else:  # big.jsonl is committed and DuckDB is moving the log into the database file
            size = db.stat().st_size
            _wait_for(lambda: db.stat().st_size > size, proc, "the checkpoint started", poll=0.001)
        assert proc.poll() is None
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL

    after_kill = state(db)  # opens: the file is usable
    names = [s[0] for s in after_kill["sources"]]
    # whole files only: the one committed before big.jsonl, or all of them (state() sorts names)
    assert names in (sorted([str(logs.small), str(SEED)]), sorted([str(logs.small), str(SEED), str(logs.big)]))
    assert [s for s in logs.state["sources"] if s[0] in names] == after_kill["sources"]  # whole files
    assert after_kill["events"][0] == sum(s[2] for s in after_kill["sources"])
    findings(db)  # the report runs on what survived

    p = run("ingest", str(logs.small), str(logs.big), "--db", str(db))
    assert p.returncode == 0, p.stderr
    assert f"{logs.small}: already ingested, nothing added" in p.stdout
    assert state(db) == logs.state
    assert findings(db) == logs.findings


LOCKED = "another process is using this DuckDB store; wait for it to finish (or pass --wait SECONDS) " \
         "and run the command again"


def test_a_second_writer_fails_clearly_or_waits_and_the_file_stays_whole(logs, tmp_path):
    db, wal = tmp_path / "shared.duckdb", tmp_path / "shared.duckdb.wal"
    # The first writer reads big.jsonl from standard input: it holds the store from the moment it
    # opens it until the test closes the pipe, so "while it runs" is not a race against its speed.
    first = subprocess.Popen(cli("ingest", "-", "--db", str(db)), cwd=ROOT, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(wal.exists, first, "the first writer opened the store")  # its schema commit
        losers = [subprocess.Popen(cli(*args), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
                  for args in (("ingest", str(SEED), "--db", str(db), "--wait", "0"),
                               ("report", "--db", str(db)), ("audit", str(SEED), "--db", str(db)))]
        for p in losers:
            out, err = p.communicate(timeout=300)
            assert (p.returncode, err.strip(), out) == (2, f"Error: {db}: {LOCKED}", "")
        waiter = subprocess.Popen(cli("ingest", str(SEED), str(logs.small), "--db", str(db), "--wait", "300"),
                                  cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(3)
        assert waiter.poll() is None  # waiting for the store
        first.stdin.write(logs.big.read_bytes())
        first.stdin.close()
        out, err = waiter.communicate(timeout=300)
        assert first.poll() is not None, "the waiter should only get in once the first writer is done"
    finally:
        first.wait(timeout=300)
    assert first.returncode == 0, first.stderr.read()
    assert waiter.returncode == 0, err
    assert f"{SEED}: 16 lines read = 16 events + 0 duplicates + 0 quarantined" in out
    assert state(db, names={"<stdin>": str(logs.big)}) == logs.state
    assert findings(db) == logs.findings


def test_a_store_that_is_not_duckdb_is_an_error(tmp_path):
    for name, content in (("text.duckdb", b"not a database\n" * 100), ("empty.duckdb", b"")):
        db = tmp_path / name
        db.write_bytes(content)
        p = run("ingest", str(SEED), "--db", str(db))
        assert p.returncode == 2 and p.stderr.startswith(f"Error: {db}: cannot open the DuckDB store (")
        assert p.stderr.rstrip().endswith("; point --db at a file written by 'auditor ingest', or at "
                                          "a new path") and p.stderr.count("\n") == 1
        assert db.read_bytes() == content  # left as it was
