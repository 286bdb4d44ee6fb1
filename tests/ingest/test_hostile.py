"""Hostile input: every file in tests/corpus/ and a few generated monsters, through the real CLI.

Each case must end without a crash or a traceback, with exit code and message as SPEC section 4
says, and with ``lines read = events + duplicates + quarantined``. The decisions this file pins:

- A compressed stream that is *cut short* (a log copied off a crashed host, a file still being
  written) keeps every line before the cut; the cut line and everything after it count as one
  quarantined line, "the gzip stream is cut short ...", so the accounting holds and the summary
  says what was lost. The evidence before the cut is exactly what the operator came for; the lost
  tail makes the verdict ``incomplete`` (exit 3) unless a finding fails it, like every quarantined
  line (SPEC section 4, revision 2): nothing here can pass over a line it could not read.
- A compressed stream that is *corrupt* (bad data, checksum mismatch, garbage after a member)
  fails its file with ``Error: FILE: line N: ...`` and exit 2: corruption is found late, by a
  checksum, so the lines already decoded may be wrong and none of them is trusted as evidence.
- An unreadable file or directory under a directory argument is an ``Error`` naming it (exit 2,
  before anything is ingested), never a silent skip: SPEC section 4 lists unreadable input under
  exit 2, and an audit that quietly skipped the one log it could not read would pass on missing
  evidence.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from auditor import audit
from auditor.cli.app import app

from ..conftest import FIXTURES, ROOT
from ..helpers import without_dac_override

CORPUS = ROOT / "tests" / "corpus"
CASES = sorted(CORPUS.glob("*.expected.json"))
ACQ = '{"seq": 1, "workflow_key": "k", "kind": "lease_acquired", "epoch": 1}'


def run(*args: str):
    """The real CLI app in-process; returns (exit code, stdout, stderr) and fails on any traceback."""
    result = CliRunner().invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.stdout + result.stderr
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("expected", CASES, ids=[c.name[: -len(".expected.json")] for c in CASES])
def test_corpus_file(expected):
    log = CORPUS / expected.name[: -len(".expected.json")]
    want = json.loads(expected.read_text())
    code, out, err = run("audit", str(log), "--json", "-", "--fail-on", "double_commit")
    assert code == want["exit"], err
    if code == 2:
        first, *details = err.strip().splitlines()
        assert first == want["error"].replace("{file}", str(log))
        assert "\x1b" not in err
        if "every line was quarantined" in first:  # issue 45: the reasons by count, then the next step
            assert details[0] == "  reasons, most frequent first:" and details[-1].startswith("  next: ")
        else:
            assert details == []
        return
    inp = json.loads(out)["input"]
    assert inp["lines_read"] == inp["events"] + inp["duplicates"] + inp["quarantined"]
    assert [inp["lines_read"], inp["events"], inp["duplicates"], inp["quarantined"]] == want["input"]
    assert [[q["line"], q["reason"]] for q in inp["quarantine"]] == want["quarantine"]
    assert all(q["file"] == str(log) for q in inp["quarantine"])


def test_every_corpus_file_has_an_expectation():
    logs = {p.name for p in CORPUS.iterdir() if p.suffix not in (".json", ".py")}
    assert logs == {c.name[: -len(".expected.json")] for c in CASES}


def _accounting(r) -> tuple[int, int, int, int]:
    i = r.input
    assert i.lines_read == i.events + i.duplicates + i.quarantined
    return i.lines_read, i.events, i.duplicates, i.quarantined


@pytest.mark.slow
def test_ten_megabyte_lines(tmp_path):
    """A 10 MB attrs value is kept, a 10 MB prompt is hashed, a 10 MB line of junk is quarantined."""
    big = "x" * (10 << 20)
    lines = [ACQ,
             json.dumps({"seq": 2, "workflow_key": "k", "kind": "progress", "epoch": 1, "attrs": {"blob": big}}),
             json.dumps({"seq": 3, "workflow_key": "k", "kind": "progress", "epoch": 1, "prompt": big}),
             "y" * (10 << 20),
             json.dumps({"seq": 5, "workflow_key": "k", "kind": "progress", "epoch": 1})]
    path = tmp_path / "ten_mb_lines.jsonl"
    path.write_text("\n".join(lines) + "\n")
    r = audit([path])
    assert _accounting(r) == (5, 4, 0, 1)
    assert [(q.line, q.reason) for q in r.input.quarantine] == [
        (4, "line is not valid JSON; write one JSON object per line")]
    by_seq = {e.seq: e for e in r.timeline("k")}
    assert by_seq[2].attrs == {"blob": big}
    assert by_seq[3].attrs["prompt"].startswith("sha256:")

    csv = tmp_path / "ten_mb_cell.csv"
    csv.write_text(f"seq,workflow_key,kind,epoch,note\n1,k,lease_acquired,1,a\n2,k,progress,1,{big}\n"
                   "3,k,progress,1,c\n")
    r = audit([csv])
    assert _accounting(r) == (3, 3, 0, 0)
    assert {e.seq: len(e.attrs["note"]) for e in r.timeline("k")} == {1: 1, 2: 10 << 20, 3: 1}


def test_hundred_thousand_deep_nesting(tmp_path):
    """DuckDB's JSON functions and the attrs UDF both survive; attrs too deep to decode are marked."""
    depth = 100_000
    head = '{"seq": %d, "workflow_key": "k", "kind": "progress", "epoch": 1, "attrs": '
    lines = [ACQ,
             head % 2 + '{"a": ' * depth + "1" + "}" * depth + "}",
             head % 3 + "[" * depth + "]" * depth + "}",
             head % 4 + "[" * depth + "}",
             "[" * depth + "]" * depth,
             '{"seq": 6, "workflow_key": ' + "[" * depth + "]" * depth + ', "kind": "progress", "epoch": 1}',
             '{"seq": 7, "workflow_key": "k", "kind": "progress", "epoch": 1, "prompt": '
             + "[" * depth + '"secret"' + "]" * depth + "}"]
    path = tmp_path / "deep.jsonl"
    path.write_text("\n".join(lines) + "\n")
    r = audit([path])
    assert _accounting(r) == (7, 4, 0, 3)
    assert [(q.line, q.reason) for q in r.input.quarantine] == [
        (4, "line is not valid JSON; write one JSON object per line"),
        (5, "line is JSON but not an object; write one JSON object per line"),
        (6, '"workflow_key" is an array, expected a single value; its content is not stored (write the value '
            'itself, or move the structure into "attrs")')]
    attrs = {e.seq: e.attrs for e in r.timeline("k")}
    assert attrs[2] == attrs[3] == attrs[7] == {"attrs_error": "attrs could not be decoded"}
    stored = r.store.con.execute("SELECT count(*) FROM events WHERE attrs LIKE '%secret%'").fetchone()
    assert stored == (0,)




def _cli_as_user(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auditor", *args], cwd=ROOT, capture_output=True,
                          timeout=120, preexec_fn=without_dac_override(), text=True)


@pytest.fixture
def logs_dir(tmp_path):
    d = tmp_path / "logs"
    (d / "host-a").mkdir(parents=True)
    (d / "host-b").mkdir()
    seed = FIXTURES / "seed_split_brain.jsonl"
    (d / "host-a" / "events.jsonl").write_bytes(seed.read_bytes())
    (d / "host-b" / "events.jsonl").write_bytes(seed.read_bytes())
    yield d
    for p in [d, *d.rglob("*")]:
        if not p.is_symlink():
            p.chmod(0o755)


def test_unreadable_file_in_a_directory_is_an_error_naming_it(logs_dir):
    locked = logs_dir / "host-b" / "events.jsonl"
    locked.chmod(0)
    p = _cli_as_user("audit", str(logs_dir))
    assert (p.returncode, p.stderr.strip()) == (2, f"Error: {locked}: cannot read this file (Permission "
                                                   f"denied); check its permissions, or move it out of {logs_dir}")
    assert p.stdout == ""


def test_unreadable_directory_is_an_error_naming_it(logs_dir):
    (logs_dir / "host-b").chmod(0)
    p = _cli_as_user("audit", str(logs_dir))
    assert (p.returncode, p.stderr.strip()) == (
        2, f"Error: {logs_dir / 'host-b'}: cannot list this directory (Permission denied); check its "
           f"permissions, or move it out of {logs_dir}")


def test_broken_link_is_an_error_and_other_files_are_still_found(logs_dir):
    link = logs_dir / "host-b" / "current.jsonl"
    link.symlink_to(logs_dir / "rotated-away.jsonl")
    code, _, err = run("audit", str(logs_dir))
    assert (code, err.strip()) == (2, f"Error: {link}: broken symbolic link (its target "
                                      f"{logs_dir / 'rotated-away.jsonl'} is missing); restore the "
                                      f"target, or remove the link from {logs_dir}")
    link.unlink()
    (logs_dir / "host-b" / "notes.txt").symlink_to(logs_dir / "nowhere.txt")  # not a log: ignored
    code, out, _ = run("audit", str(logs_dir), "--json", "-")
    assert code == 1 and json.loads(out)["input"]["files"] == [
        str(logs_dir / "host-a" / "events.jsonl"), str(logs_dir / "host-b" / "events.jsonl")]


def test_unreadable_explicit_file(tmp_path):
    f = tmp_path / "events.jsonl"
    f.write_text(ACQ + "\n")
    f.chmod(0)
    p = _cli_as_user("audit", str(f))
    assert (p.returncode, p.stderr.strip()) == (
        2, f"Error: {f}: cannot read this file (Permission denied); check its permissions")


SECRETS = [f"TOPSECRET-{i}" for i in range(1, 10)]


def _with_payloads(tmp_path) -> list[Path]:
    """The seed scenario with payload-like fields everywhere a log puts them, in three formats."""
    events = [json.loads(line) for line in (FIXTURES / "seed_split_brain.jsonl").read_text().splitlines()]
    events[5].update({"prompt": SECRETS[0], "attrs": {
        "Body": SECRETS[1], "payload": {"card": SECRETS[2]}, "rows": 3,
        "nested": [{"deeper": {"output": SECRETS[3]}}], "gen_ai.tool.call.arguments": SECRETS[4],
        "tool_input": SECRETS[5]}})
    events[7]["attrs"] = json.dumps({"result": SECRETS[6], "input": [SECRETS[6]]})
    events[8]["arguments"] = {"amount": SECRETS[7]}
    log = tmp_path / "payloads.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in events))
    csv = tmp_path / "payloads.csv"
    csv.write_text(f"seq,workflow_key,kind,epoch,body\n1,csv/k,lease_acquired,1,{SECRETS[8]}\n")
    return [log, csv, CORPUS / "parquet_uint64_and_struct_attrs.parquet"]


def _texts_in_store(db: Path) -> str:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        columns = con.execute("SELECT table_name, column_name FROM duckdb_columns() "
                              "WHERE data_type = 'VARCHAR' AND NOT internal").fetchall()
        return "\n".join(str(v) for t, c in columns
                         for (v,) in con.execute(f'SELECT "{c}" FROM "{t}"').fetchall())
    finally:
        con.close()


@pytest.mark.slow
def test_no_payload_text_reaches_duckdb_the_json_or_the_html(tmp_path):
    paths = [str(p) for p in _with_payloads(tmp_path)]
    db, doc, page = tmp_path / "audit.duckdb", tmp_path / "audit.json", tmp_path / "audit.html"
    p = subprocess.run([sys.executable, "-m", "auditor", "audit", *paths, "--db", str(db), "--json",
                        str(doc), "--html", str(page)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    stored = _texts_in_store(db)
    assert "sha256:" in stored and '"rows": 3' in stored  # attrs are there, payloads hashed
    outputs = {"duckdb": stored, "duckdb file": db.read_bytes().decode("latin-1"),
               "json": doc.read_text(), "html": page.read_text(), "terminal": p.stdout + p.stderr}
    assert {name: [s for s in SECRETS + ["SECRET-PARQUET"] if s in text]
            for name, text in outputs.items()} == {name: [] for name in outputs}

    # The control: with --keep-payloads the same texts do reach the store and the report, so the
    # absence above is the hashing at work, not a search that cannot see.
    kept_db, kept_page = tmp_path / "kept.duckdb", tmp_path / "kept.html"
    p = subprocess.run([sys.executable, "-m", "auditor", "audit", *paths, "--db", str(kept_db),
                        "--html", str(kept_page), "--keep-payloads"], cwd=ROOT, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    kept = _texts_in_store(kept_db)
    assert [s for s in SECRETS + ["SECRET-PARQUET"] if s not in kept] == []
    assert SECRETS[1] in kept_page.read_text()


EVIL_KEY = "\x1b[31mEVIL\x1b[0m"


def _injection_log(tmp_path) -> Path:
    events = [json.loads(line) for line in (FIXTURES / "seed_split_brain.jsonl").read_text().splitlines()]
    swap = {"ledger/export/2026-07-26": EVIL_KEY, "alpha": "<script>alert(1)</script>",
            "beta": "[bold red]beta[/bold red]\x1b]8;;https://evil.example\x07link\x1b]8;;\x07",
            "release-index/2026-07-26": "release\x9b2J\u202e\u2028index"}
    for e in events:
        for field in ("workflow_key", "worker", "effect_key"):
            if e.get(field) in swap:
                e[field] = swap[e[field]]
    log = tmp_path / "evil\x1b[2J.jsonl"
    log.write_text("".join(json.dumps(e) + "\n" for e in events)
                   + json.dumps({"seq": 99, "workflow_key": "k", "kind": "\x1b[5mBLINK", "epoch": 1}) + "\n")
    return log


def test_terminal_summary_neutralizes_escapes_and_markup(tmp_path):
    log = _injection_log(tmp_path)
    outputs = []
    for args in (["audit", str(log)], ["ingest", str(log), "--db", str(tmp_path / "x.duckdb")],
                 ["audit", str(log), "--expect", str(FIXTURES / "seed_split_brain.expected.json")]):
        p = subprocess.run([sys.executable, "-m", "auditor", *args], cwd=ROOT, capture_output=True,
                           timeout=120)
        assert p.returncode in (0, 1), p.stderr
        outputs.append(p.stdout + p.stderr)
    summary = outputs[0].decode()
    for out in outputs:
        assert not set(out.decode()) & {"\x1b", "\x07", "\x9b", "\u202e", "\u2028"}, out
    assert "\\x1b[31mEVIL\\x1b[0m  displaced epoch 17 (<script>alert(1)</script>) -> current epoch 18 " \
           "([bold red]beta[/bold red]\\x1b]8;;https://evil.example\\x07link\\x1b]8;;\\x07)" in summary
    assert '"kind" is "\\x1b[5mBLINK", not a kind the auditor knows' in summary
    assert "release\\x9b2J\\u202e\\u2028index" in summary
    assert "missing:    stale_activity ledger/export/2026-07-26 seq 6" in outputs[2].decode()
    assert "unexpected: stale_activity \\x1b[31mEVIL\\x1b[0m seq 6" in outputs[2].decode()


def test_colour_terminal_gets_only_the_summary_own_styles(tmp_path):
    """On a colour terminal rich styles the summary; the data still arrives as visible text."""
    from rich.console import Console

    from auditor.render.terminal import summary_lines

    console = Console(force_terminal=True, color_system="standard", width=400, record=False,
                      file=open(os.devnull, "w"))
    with console.capture() as cap:
        for line in summary_lines(audit([_injection_log(tmp_path)])):
            console.print(line)
    out = cap.get()
    assert "\x1b[31mEVIL" not in out and "\\x1b[31mEVIL" in out
    assert "\x1b]8;;" not in out and "\x07" not in out
    assert "[bold red]beta[/bold red]" in out


def test_html_report_neutralizes_markup(tmp_path):
    from auditor.render.html import render_html

    page = render_html(audit([_injection_log(tmp_path)]))
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "[bold red]beta[/bold red]" in page


def test_html_report_neutralizes_ansi_escapes(tmp_path):
    from auditor.render.html import render_html

    page = render_html(audit([_injection_log(tmp_path)]))
    assert not set(page) & {"\x1b", "\x07", "\x9b"}


@pytest.mark.slow
def test_csv_line_numbers_hold_in_a_big_file_and_around_refused_lines(tmp_path):
    """Rows are numbered by position (header = line 1); lines DuckDB refuses keep their own number."""
    # 46 MB: DuckDB's parallel scanner would hand the rows back out of order. The padding is a
    # field of the contract (worker), so the lines stay on the SQL fast path, as most of a real log.
    pad = "p" * 200
    rows = ["seq,workflow_key,kind,epoch,worker"] + [f"{i},k{i % 100},progress,1,{pad}" for i in range(1, 200_001)]
    rows[1] = f"1,k1,lease_acquired,1,{pad}"
    rows[150_000] = f"150000,k0,progress,bad,{pad}"
    path = tmp_path / "big.csv"
    path.write_text("\n".join(rows) + "\n")
    r = audit([path], fail_on="double_commit")
    assert [(q.line, q.reason) for q in r.input.quarantine] == [
        (150_001, '"epoch" is "bad", expected an integer in int64 range')]
    assert r.store.con.execute("SELECT count(*) FROM events WHERE line <> seq + 1").fetchone() == (0,)

    raw = path.read_bytes().replace(b"\n180000,k0,", b"\n180000,k\xff,").replace(b"\n190000,k0,", b"\n190000,k0\xfe,")
    path.write_bytes(raw)
    r = audit([path], fail_on="double_commit")
    assert [(q.line, q.reason) for q in r.input.quarantine] == [
        (150_001, '"epoch" is "bad", expected an integer in int64 range'),
        (180_001, "line is not valid UTF-8; re-encode the file as UTF-8"),
        (190_001, "line is not valid UTF-8; re-encode the file as UTF-8")]
    assert r.store.con.execute("SELECT count(*) FROM events WHERE line <> seq + 1").fetchone() == (0,)


def test_parquet_line_numbers_are_row_numbers_across_row_groups(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 300_000
    seqs = list(range(1, n + 1))
    epochs = [1] * n
    epochs[250_000] = -5
    path = tmp_path / "row_groups.parquet"
    pq.write_table(pa.table({"seq": seqs, "workflow_key": [f"k{i % 100}" for i in seqs],
                             "kind": ["progress"] * n, "epoch": epochs}), path, row_group_size=20_000)
    r = audit([path], fail_on="double_commit")
    assert [(q.line, q.reason) for q in r.input.quarantine] == [(250_001, '"epoch" is -5, expected an integer >= 0')]
    assert r.store.con.execute("SELECT count(*) FROM events WHERE line <> seq").fetchone() == (0,)


def test_standard_input_leaves_no_copy_behind(tmp_path):
    """The spooled copy of standard input holds raw payloads: it goes once read, even on an Error."""
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    seed = (FIXTURES / "seed_split_brain.jsonl").read_bytes()
    for args in (["audit", "-"], ["audit", "-", str(tmp_path / "missing.jsonl")], ["audit", "-", "--format", "parquet"]):
        p = subprocess.run([sys.executable, "-m", "auditor", *args], cwd=ROOT, input=seed, env=env,
                           capture_output=True, timeout=120)
        assert p.returncode in (1, 2) and b"Traceback" not in p.stderr
    assert list(tmp_path.glob("auditor-stdin-*")) == []
