"""Issue 19, the process edge: real signals, closed pipes, full disks and atomic reports.

Every case runs the real CLI in a subprocess. A full disk is a file size limit (RLIMIT_FSIZE, with
SIGXFSZ ignored so the write fails with EFBIG instead of killing the process): no tmpfs mount is
needed, and DuckDB sees a failing write just as on a full disk.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from auditor import OutputError
from auditor.render.output import write_atomic

from ..conftest import FIXTURES, ROOT

SEED = FIXTURES / "seed_split_brain.jsonl"


def _cli(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "auditor", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_while_reading_stdin_removes_the_spool(tmp_path, sig, code):
    """Standard input half read: the spool (raw payloads) must not outlive the process."""
    p = _cli("audit", "-", stdin=subprocess.PIPE, env={**os.environ, "TMPDIR": str(tmp_path)})
    p.stdin.write(SEED.read_text())
    p.stdin.flush()
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("auditor-stdin-*")) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    name = signal.Signals(sig).name
    assert (p.returncode, err) == (code, f"Error: interrupted by {name}; temporary copies and the scratch store "
                                         "are removed; files ingested into --db before it are kept\n")
    assert out == "" and list(tmp_path.iterdir()) == []


def test_sigint_during_a_query_says_interrupted_not_query_interrupted(tmp_path):
    """A signal while DuckDB works: one line, exit 130, and the scratch store is gone."""
    log = tmp_path / "logs" / "big.jsonl"
    log.parent.mkdir()
    line = ('{"seq": %d, "workflow_key": "k%d", "kind": "progress", "epoch": 1, "worker": "w", '
            '"attrs": {"note": "%s"}}\n')
    with open(log, "w") as f:
        for i in range(0, 600_000):
            f.write(line % (i, i % 1000, "x" * (i % 50)))
    spill = tmp_path / "tmp"
    spill.mkdir()
    p = _cli("audit", str(log.parent), env={**os.environ, "TMPDIR": str(spill)})
    deadline = time.monotonic() + 60
    while not list(spill.glob("auditor-*")) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    if p.returncode in (0, 1):
        pytest.skip("the audit finished before the signal; this machine is faster than the test assumed")
    assert (p.returncode, err.splitlines()) == (130, [
        "Error: interrupted by SIGINT; temporary copies and the scratch store are removed; files ingested "
        "into --db before it are kept"])
    assert list(spill.iterdir()) == []


@pytest.mark.parametrize("args, earned", [(["audit", "fixtures/"], 1), (["audit", "fixtures/", "--json", "-"], 1),
                                          (["audit", str(SEED), "--fail-on", "double_commit", "--json", "-"], 1),
                                          (["audit", "fixtures/clean_handover.jsonl", "--json", "-"], 0)])
def test_a_closed_pipe_ends_quietly_with_the_earned_exit_code(args, earned):
    """``auditor audit fixtures/ | head -1``: head closes the pipe; no "Broken pipe", no traceback."""
    p = subprocess.Popen([sys.executable, "-m", "auditor", *args], cwd=ROOT, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    first = p.stdout.readline()
    p.stdout.close()  # what head does after its line
    err = p.stderr.read().decode()
    p.wait(timeout=120)
    assert first and p.returncode == earned
    assert "Broken pipe" not in err and "Traceback" not in err and "Exception ignored" not in err


def _file_size_limit(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.fixture(scope="module")
def sim_log(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("sim") / "sim.jsonl"
    subprocess.run([sys.executable, "-m", "auditor", "simulate", "--runs", "3000", "--out", str(path)], cwd=ROOT,
                   check=True, capture_output=True, timeout=300)
    return path


def test_a_full_disk_names_the_real_cause(tmp_path, sim_log):
    """Not "cannot rollback - no transaction is active": the write that failed, and where."""
    db = tmp_path / "full.duckdb"
    p = subprocess.run([sys.executable, "-m", "auditor", "ingest", str(sim_log), "--db", str(db)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, preexec_fn=_file_size_limit(2 << 20))
    assert p.returncode == 2 and "rollback" not in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert p.stderr.startswith(f"Error: {db}: cannot write the DuckDB store (")
    assert "File too large" in p.stderr and p.stderr.endswith(
        "nothing of this input was kept; free space or fix the cause, then run again\n")

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    p = subprocess.run([sys.executable, "-m", "auditor", "audit", str(sim_log)], cwd=ROOT, capture_output=True,
                       text=True, timeout=300, preexec_fn=_file_size_limit(2 << 20),
                       env={**os.environ, "TMPDIR": str(scratch)})
    assert p.returncode == 2 and p.stderr.startswith(f"Error: the scratch store in {scratch}: cannot write "
                                                     "the DuckDB store (") and "File too large" in p.stderr
    assert list(scratch.iterdir()) == []


def test_a_report_that_cannot_be_written_leaves_nothing_and_names_the_file(tmp_path):
    db = tmp_path / "store.duckdb"
    subprocess.run([sys.executable, "-m", "auditor", "ingest", str(SEED), "--db", str(db)], cwd=ROOT, check=True,
                   capture_output=True, timeout=120)
    html = tmp_path / "report.html"
    html.write_text("the previous report\n")
    p = subprocess.run([sys.executable, "-m", "auditor", "report", "--db", str(db), "--html", str(html)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, preexec_fn=_file_size_limit(8 << 10))
    assert (p.returncode, p.stderr) == (2, f"Error: {html}: cannot write the report (File too large); nothing "
                                           "was written; free space or choose another place\n")
    assert html.read_text() == "the previous report\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["report.html", "store.duckdb"]


def test_write_atomic(tmp_path):
    out = tmp_path / "doc.json"
    write_atomic(out, lambda f: f.write('{"a": 1}'))
    assert json.loads(out.read_text()) == {"a": 1} and oct(out.stat().st_mode & 0o777) != "0o600"

    def fails(f) -> None:
        f.write("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OutputError, match=rf"^{out}: cannot write the report \(No space left on device\)"):
        write_atomic(out, fails)
    assert json.loads(out.read_text()) == {"a": 1} and [p.name for p in tmp_path.iterdir()] == ["doc.json"]

    log = tmp_path / "events.jsonl"
    log.write_text("evidence\n")
    with pytest.raises(OutputError, match="is one of the inputs; write the report to another file"):
        write_atomic(log, "{}", inputs=[str(tmp_path / "." / "events.jsonl")])
    assert log.read_text() == "evidence\n"
    with pytest.raises(OutputError, match="check that its folder exists"):
        write_atomic(tmp_path / "missing" / "r.html", "<html>")


@pytest.mark.parametrize("args, earned", [
    (["audit", "fixtures/clean_handover.jsonl"], 0), (["audit", str(SEED)], 1),
    (["audit", "fixtures/clean_handover.jsonl", "--expect", "fixtures/clean_handover.expected.json"], 0),
    (["map", str(SEED)], 0)])
def test_a_pipe_closed_before_the_first_line_keeps_the_earned_exit_code(args, earned):
    """Issue 45: the reader is gone before anything is written (rich's console turned that into
    exit 1): every run, not most of them, ends with the verdict's code and no traceback."""
    for _ in range(3):
        p = subprocess.Popen([sys.executable, "-m", "auditor", *args], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        p.stdout.close()  # nobody reads: the first write meets a closed pipe
        err = p.stderr.read().decode()
        p.wait(timeout=120)
        assert (p.returncode, err) == (earned, "")


def test_audit_piped_into_head_exits_with_the_audit_code():
    """The shell's own pipe, as an operator types it: ``auditor audit clean | head -c 1``, three times."""
    auditor = Path(sys.executable).with_name("auditor")
    for _ in range(3):
        shell = subprocess.run(["bash", "-c", f"'{auditor}' audit fixtures/clean_handover.jsonl | head -c 1; "
                                "echo \" ${PIPESTATUS[0]}\""], cwd=ROOT, capture_output=True, text=True,
                               timeout=120)
        assert (shell.stdout, shell.stderr) == ("s 0\n", "")
