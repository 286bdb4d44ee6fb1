"""The command-line door: ``auditor audit | ingest | report | simulate``.

Each command builds the library objects, makes one call and renders the result; errors from the
library are turned into one ``Error: ...`` line and exit code 2 here and nowhere else.
Exit codes: 0 nothing at or above --fail-on, 1 findings at or above it (or --expect differs),
2 the audit could not run.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Iterator, Optional

import typer

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Audit event logs for split-brain execution: a displaced owner that kept "
                       "acting after a newer owner epoch took over.")


class Fmt(str, Enum):
    auto = "auto"
    jsonl = "jsonl"
    csv = "csv"
    parquet = "parquet"
    otlp = "otlp"


class GradeOpt(str, Enum):
    stale_activity = "stale_activity"
    rejected_attempt = "rejected_attempt"
    stale_attempt = "stale_attempt"
    stale_commit = "stale_commit"
    double_commit = "double_commit"


PATHS = typer.Argument(..., help="Files, directories or - (standard input); gzip/zstd welcome.")
FORMAT = typer.Option(Fmt.auto, "--format", help="Input format; auto detects from name and content.")
JSON_OUT = typer.Option(None, "--json", help="Write the JSON document to FILE, or - for stdout.")
HTML_OUT = typer.Option(None, "--html", help="Write the self-contained HTML incident report to FILE.")
FAIL_ON = typer.Option(GradeOpt.stale_attempt, "--fail-on", case_sensitive=False,
                       help="Exit 1 when a finding of this grade or worse exists.")
KEEP = typer.Option(False, "--keep-payloads",
                    help="Keep payload-like attrs (prompt, input, output, ...) instead of their SHA-256.")
WAIT = typer.Option(0.0, "--wait", help="Seconds to wait for another process holding the --db file.")


def fail(message: str) -> typer.Exit:
    from .render.terminal import clean

    # Messages quote the input (a kind, a file name): an escape sequence in it must not reach the terminal.
    typer.echo(f"Error: {clean(message)}", err=True)
    return typer.Exit(code=2)


@contextmanager
def errors() -> Iterator[None]:
    """The one funnel from library exceptions to ``Error:`` lines and exit code 2."""
    from .errors import AuditorError

    try:
        yield
    except AuditorError as e:
        raise fail(str(e))
    except OSError as e:
        raise fail(f"{e.filename or ''}: {e.strerror or e}".lstrip(": "))
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as e:  # never a traceback for the operator; AUDITOR_DEBUG=1 shows it
        if os.environ.get("AUDITOR_DEBUG"):
            raise
        raise fail(f"unexpected {type(e).__name__}: {e} (set AUDITOR_DEBUG=1 for the traceback)")


LONG_INPUT = 64 << 20  # bytes of input from which the steps of a run are shown on a terminal


def _input_size(paths: list[str]) -> int:
    total = 0
    for p in paths:
        path = Path(p)
        if path.is_file():
            total += path.stat().st_size
        elif path.is_dir():
            total += sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return total


@contextmanager
def progress_bar(paths: list[str]) -> Iterator[Optional[callable]]:
    """A byte-count progress bar on a terminal; nothing when stderr is not one."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    total = _input_size(paths)
    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                  TimeRemainingColumn(), transient=True, disable=total < LONG_INPUT) as bar:
        task = bar.add_task("reading", total=total or None)
        yield lambda n: bar.advance(task, n)


@contextmanager
def step(paths: list[str], text: str) -> Iterator[None]:
    """A spinner naming a long step after the reading (detection, writing the report), on a
    terminal and for a big input, like the progress bar; gone when the step ends."""
    if not sys.stderr.isatty() or _input_size(paths) < LONG_INPUT:
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(text):
        yield


def emit(result, json_out: Optional[str], html_out: Optional[Path], inputs: list[str] = ()) -> None:
    from .render.terminal import print_summary

    if json_out:
        from .render.json import write_json

        if json_out == "-":
            write_json(result, sys.stdout)
        else:
            with step(list(inputs), f"writing {json_out}"), open(json_out, "w", encoding="utf-8") as out:
                write_json(result, out)
    if html_out:
        from .render.html import render_html

        Path(html_out).write_text(render_html(result), encoding="utf-8")
    print_summary(result, sys.stderr if json_out == "-" else sys.stdout)


def compare_expected(result, expect: Path) -> bool:
    """Print PASS when the findings equal the expected (grade, workflow_key, seq) set, else FAIL."""
    from .render.terminal import clean

    try:
        wanted = {tuple(x) for x in json.loads(expect.read_text())["findings"]}
        if not all(len(t) == 3 and isinstance(t[0], str) and isinstance(t[1], str)
                   and isinstance(t[2], int) for t in wanted):
            raise ValueError("each finding is [grade, workflow_key, seq]")
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise fail(f"{expect}: cannot read the expected findings ({e}); expected "
                   '{"findings": [["stale_activity", "workflow/key", 6], ...]}')
    found = result.expected_triples()
    out = sys.stdout
    if found == wanted:
        print(f"PASS: all {len(wanted)} expected findings found, nothing else", file=out)
        return True
    print("FAIL: findings differ from " + str(expect), file=out)
    for g, k, s in sorted(wanted - found, key=lambda t: (t[1], t[2], t[0])):
        print(f"  missing:    {clean(g)} {clean(k)} seq {clean(s)}", file=out)
    for g, k, s in sorted(found - wanted, key=lambda t: (t[1], t[2], t[0])):
        print(f"  unexpected: {clean(g)} {clean(k)} seq {clean(s)}", file=out)
    return False


@app.command()
def audit(
    paths: list[str] = PATHS,
    format: Fmt = FORMAT,
    json_out: Optional[str] = JSON_OUT,
    html: Optional[Path] = HTML_OUT,
    db: Optional[Path] = typer.Option(None, "--db", help="Persistent DuckDB store to extend (default: a scratch store deleted afterwards)."),
    fail_on: GradeOpt = FAIL_ON,
    expect: Optional[Path] = typer.Option(
        None, "--expect", help='Compare findings with {"findings": [[grade, workflow_key, seq], ...]}; '
                               "exit 0 on PASS, 1 on FAIL."),
    keep_payloads: bool = KEEP,
    wait: float = WAIT,
) -> None:
    """Ingest PATHS, detect, and report findings (exit 1 at or above --fail-on)."""
    from . import analyze, ingest_paths
    from .store import Store

    with errors():
        store = Store(db, keep_payloads=keep_payloads, lock_timeout=wait)
        with progress_bar(paths) as progress:
            ingest_paths(paths, store, format.value, progress, idempotent=db is not None)
        with step(paths, "detecting"):
            result = analyze(store, fail_on.value)
        emit(result, json_out, html, paths)
    if expect is not None:
        raise typer.Exit(code=0 if compare_expected(result, expect) else 1)
    raise typer.Exit(code=result.exit_code)


@app.command("ingest")
def ingest_cmd(
    paths: list[str] = PATHS,
    db: Path = typer.Option(..., "--db", help="The DuckDB store to append to (created if missing)."),
    format: Fmt = FORMAT,
    keep_payloads: bool = KEEP,
    wait: float = WAIT,
) -> None:
    """Append PATHS to a persistent DuckDB store, idempotently (the same file twice adds nothing)."""
    from . import ingest_paths
    from .render.terminal import clean
    from .store import Store

    with errors():
        with Store(db, keep_payloads=keep_payloads, lock_timeout=wait) as store:
            with progress_bar(paths) as progress:
                counts = ingest_paths(paths, store, format.value, progress, idempotent=True)
            total = store.input_summary()
    for c in counts:
        if c.skipped:
            typer.echo(f"{clean(c.name)}: already ingested, nothing added")
        else:
            typer.echo(f"{clean(c.name)}: {c.lines_read} lines read = {c.events} events + "
                       f"{c.duplicates} duplicates + {c.quarantined} quarantined")
    typer.echo(f"{db}: {total.events} events from {len(total.files)} files")


@app.command()
def report(
    db: Path = typer.Option(..., "--db", help="A DuckDB store written by 'auditor ingest'."),
    json_out: Optional[str] = JSON_OUT,
    html: Optional[Path] = HTML_OUT,
    fail_on: GradeOpt = FAIL_ON,
    wait: float = WAIT,
) -> None:
    """Re-run detection over a persistent store and report (exit 1 at or above --fail-on)."""
    from . import AuditError, analyze
    from .store import Store

    with errors():
        if not db.exists():
            raise AuditError(f"{db}: no such DuckDB store; create it with 'auditor ingest PATH --db {db}'")
        with step([str(db)], "detecting"):
            result = analyze(Store(db, lock_timeout=wait), fail_on.value)
        emit(result, json_out, html, [str(db)])
    raise typer.Exit(code=result.exit_code)


class Mode(str, Enum):
    fenced = "fenced"
    unfenced = "unfenced"
    key_includes_epoch = "key-includes-epoch"


@app.command()
def simulate(
    runs: int = typer.Option(200, "--runs", min=1, help="Workflow runs to simulate (one preemption each)."),
    seed: int = typer.Option(0, "--seed", help="Random seed: the same seed writes the same log."),
    mode: Mode = typer.Option(Mode.fenced, "--mode", help="The tool gateway under test."),
    out: Path = typer.Option(..., "--out", help="Where to write the event log (.gz compresses)."),
    expect_out: Optional[Path] = typer.Option(
        None, "--expect-out", help="Also write the simulation's ground truth in the --expect format."),
    lease_s: Optional[float] = typer.Option(
        None, "--lease-s", help="Heartbeat-driven leases of this many seconds instead of injected "
                                "preemptions: a lease too short for the heartbeat rhythm revokes live workers."),
    heartbeat_s: float = typer.Option(30.0, "--heartbeat-s", help="With --lease-s: the heartbeat period H."),
    jitter_s: float = typer.Option(20.0, "--jitter-s", help="With --lease-s: a heartbeat's extra delay, up to J."),
    missed: float = typer.Option(0.0, "--missed-heartbeats",
                                 help="With --lease-s: the share of heartbeats that never arrive (0 to 1)."),
) -> None:
    """Simulate preemptions against a tool gateway and write the log with its ground truth."""
    from .simulate import LeaseTiming, SimulateError, run_cli

    with errors():
        try:
            lease = None if lease_s is None else LeaseTiming(
                round(lease_s * 1000), round(heartbeat_s * 1000), round(jitter_s * 1000), missed)
            typer.echo(run_cli(runs, seed, mode.value, out, expect_out, lease))
        except SimulateError as e:
            raise typer.BadParameter(str(e))


def main() -> None:
    app(prog_name="auditor")
