"""The command-line door: ``auditor audit | ingest | report | map | simulate | serve``.

Each command parses its arguments, checks them all before any work (a missing --expect file or
an output directory that does not exist is reported before a long audit, not after), makes one
library call and prints the result; errors from the library are turned into one ``Error: ...``
line and exit code 2 here and nowhere else. Exit codes: 0 pass, 1 findings at or above --fail-on
(or --expect differs), 2 the audit could not run, 3 incomplete (nothing reaches --fail-on but
more lines were lost than --allow-quarantined accepts, so a pass cannot be claimed).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from ..normalize.sample import SAMPLE_LINES
from .options import (BY, DEBUG, ENGINE, ENGINES, FORMAT, KEEP, MAP, MODES, PATHS, QUIET, SPARK_ARCHIVE,
                      SPARK_CONF, SPARK_MASTER, WAIT,
                      Reporting, check_outputs, choice, errors, fail, input_format, one_map, progress_bar,
                      reporting, step)

if TYPE_CHECKING:
    from ..serve import ServeConfig

app = typer.Typer(no_args_is_help=True, rich_markup_mode=None,
                  context_settings={"help_option_names": ["-h", "--help"]},
                  help="Audit event logs for split-brain execution: a displaced owner that kept "
                       "acting after a newer owner epoch took over. Exit codes: 0 pass, 1 fail, "
                       "2 could not run, 3 incomplete (evidence lost).")

def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"auditor {version('split-brain-auditor')}")
        except PackageNotFoundError:
            typer.echo("auditor (not installed)")
        raise typer.Exit()


@app.callback()
def _main(_: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=_version,
                                 help="Print the version and exit.")) -> None:
    pass


# Commands.


@app.command()
@reporting
def audit(
    paths: list[str] = PATHS,
    format: str = FORMAT,
    db: Optional[Path] = typer.Option(None, "--db", metavar="FILE",
                                      help="Persistent DuckDB store to extend (default: a scratch store "
                                           "deleted afterwards)."),
    keep_payloads: bool = KEEP,
    wait: float = WAIT,
    vocabulary: Optional[list[Path]] = MAP,
    engine: str = ENGINE,
    spark_master: Optional[str] = SPARK_MASTER,
    spark_conf: Optional[list[str]] = SPARK_CONF,
    spark_archive: Optional[str] = SPARK_ARCHIVE,
    debug: bool = DEBUG,
    *,
    rep: Reporting,
) -> None:
    """Ingest PATH..., detect, and report findings (exit 1 at or above --fail-on, 3 incomplete)."""
    from .. import analyze, ingest_paths
    from ..store import Store
    from ..store.spooled import held_while

    fmt = input_format(format)
    vocabulary = one_map(vocabulary)
    spark = choice("--engine", engine, ENGINES, "an engine") == "spark"
    if spark and db is not None:
        raise fail("--db keeps a DuckDB store, which --engine spark does not build; drop --db, "
                   "or use --engine duckdb")
    for given, flag in ((spark_master, "--spark-master"), (spark_conf, "--spark-conf"),
                        (spark_archive, "--spark-archive")):
        if given and not spark:
            raise fail(f"{flag} needs --engine spark")
    if debug:
        import os

        os.environ["AUDITOR_DEBUG"] = "1"
    rep.outputs.check(paths, db)
    with errors():
        if spark:
            from ..spark import audit as spark_audit
            from ..spark.cluster import conf_of, quiet_jvm

            conf = conf_of(spark_conf)
            if rep.quiet:
                quiet_jvm()
            result = spark_audit(paths, fmt=fmt, fail_on=rep.fail_on, keep_payloads=keep_payloads,
                                 vocabulary=vocabulary, master=spark_master, spark_conf=conf,
                                 archive=spark_archive,
                                 scope=rep.scope, **rep.allowances, **rep.lease)
        else:
            with held_while(db, "auditor audit --db"):
                store = Store(db, keep_payloads=keep_payloads, lock_timeout=wait, vocabulary=vocabulary)
                with progress_bar(paths, rep.quiet) as progress:
                    ingest_paths(paths, store, fmt, progress, idempotent=db is not None)
            with step(paths, "detecting", rep.quiet):
                result = analyze(store, rep.fail_on, scope=rep.scope, **rep.allowances, **rep.lease)
    raise rep.finish(result, paths)


@app.command("ingest")
def ingest_cmd(
    paths: list[str] = PATHS,
    db: Path = typer.Option(..., "--db", metavar="FILE", help="The DuckDB store to append to (created if missing)."),
    format: str = FORMAT,
    quiet: bool = QUIET,
    keep_payloads: bool = KEEP,
    wait: float = WAIT,
    vocabulary: Optional[list[Path]] = MAP,
) -> None:
    """Append PATH... to a persistent DuckDB store, idempotently (the same file twice adds nothing)."""
    from .. import ingest_paths
    from ..render.terminal import print_ingested
    from ..store import Store
    from ..store.spooled import held_while

    fmt = input_format(format)
    vocabulary = one_map(vocabulary)
    check_outputs([("--db", db)], paths)
    with errors(), held_while(db, "auditor ingest"):
        with Store(db, keep_payloads=keep_payloads, lock_timeout=wait, vocabulary=vocabulary) as store:
            with progress_bar(paths, quiet) as progress:
                counts = ingest_paths(paths, store, fmt, progress, idempotent=True)
            total = store.input_summary()
    if not quiet:
        from ..core.interrupt import quiet_pipe

        with quiet_pipe():
            print_ingested(db, counts, total)


@app.command()
@reporting
def report(
    db: Path = typer.Option(..., "--db", metavar="FILE", help="A DuckDB store written by 'auditor ingest'."),
    wait: float = WAIT,
    vocabulary: Optional[list[Path]] = typer.Option(
        None, "--map", metavar="FILE",
        help="Vocabulary file (TOML); checked here, applied when lines are ingested."),
    *,
    rep: Reporting,
) -> None:
    """Re-run detection over a persistent store and report (exit 1 at or above --fail-on, 3 incomplete)."""
    from .. import check_store
    from .. import report as report_db

    vocabulary = one_map(vocabulary)
    rep.outputs.check([str(db)])
    with errors():
        check_store(db)
        with step([str(db)], "detecting", rep.quiet):
            result = report_db(db, rep.fail_on, scope=rep.scope, **rep.allowances,
                               lock_timeout=wait, vocabulary=vocabulary, **rep.lease)
    raise rep.finish(result, [str(db)])


@app.command("map")
def map_cmd(
    paths: list[str] = PATHS,
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE",
                                       help="Write the vocabulary to FILE (default: standard output)."),
    force: bool = typer.Option(False, "--force", help="Overwrite --out when it exists."),
    lines: int = typer.Option(SAMPLE_LINES, "--lines", metavar="N", min=1,
                              help="Read the first N lines of the input (across its files)."),
    format: str = FORMAT,
    quiet: bool = QUIET,
) -> None:
    """Suggest a vocabulary (--map FILE) for PATH... from its first lines; never audits (exit 0)."""
    from ..normalize.suggest import suggest
    from ..normalize.suggest.writer import render
    from ..render.output import write_atomic

    fmt = input_format(format)
    if out is not None:
        check_outputs([("--out", out)], paths)
        if out.exists() and not force:
            raise fail(f"--out {out} exists; pass --force to overwrite it, or name another file")
    with errors():
        with _sampling(lines, quiet) as progress:
            found = suggest(paths, lines, fmt, progress=progress)
        text = render(found)
        if out is not None:
            write_atomic(out, text, paths)
    if out is None:
        from ..core.interrupt import quiet_pipe

        with quiet_pipe():
            typer.echo(text, nl=False)
    elif not quiet:
        c = found.check
        typer.echo(f"{out}: {len([f for f in found.fields if f.path])} fields, "
                   f"{len(found.kinds)} kind entries, {len(found.ignore)} ignore entries, "
                   f"{len(found.undecided)} to decide; on the first {len(found.sample.lines):,} lines it "
                   f"reads {c.events:,} events, {c.ignored:,} ignored, {c.quarantined:,} quarantined", err=True)


@contextmanager
def _sampling(lines: int, quiet: bool):
    """``auditor map``'s progress bar, in lines read, then a spinner while it weighs them: on a
    terminal only (nothing when stderr is not one, or with --quiet)."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    with Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task("sampling lines", total=lines)
        yield lambda n: bar.advance(task, n)


@app.command()
def simulate(
    runs: int = typer.Option(200, "--runs", metavar="N", min=1, help="Workflow runs to simulate (one preemption each)."),
    seed: int = typer.Option(0, "--seed", metavar="N", help="Random seed: the same seed writes the same log."),
    mode: str = typer.Option("fenced", "--mode", metavar="MODE", autocompletion=lambda: MODES,
                             help=f"The tool gateway under test: {', '.join(MODES)}."),
    out: Path = typer.Option(..., "--out", metavar="FILE", help="Where to write the event log (.gz compresses)."),
    expect_out: Optional[Path] = typer.Option(
        None, "--expect-out", metavar="FILE", help="Also write the simulation's ground truth in the --expect format."),
    mandates: str = typer.Option("none", "--mandates", metavar="KIND",
                                 help="Runs hold mandates that expire or are revoked during preemptions, behind a "
                                      "gateway that checks them (checked) or not (unchecked); none: no mandates."),
    lease_s: Optional[float] = typer.Option(
        None, "--lease-s", metavar="S", help="Heartbeat-driven leases of this many seconds instead of injected "
                                "preemptions: a lease too short for the heartbeat rhythm revokes live workers."),
    heartbeat_s: float = typer.Option(30.0, "--heartbeat-s", metavar="S", help="With --lease-s: the heartbeat period H."),
    jitter_s: float = typer.Option(20.0, "--jitter-s", metavar="S", help="With --lease-s: a heartbeat's extra delay, up to J."),
    missed: float = typer.Option(0.0, "--missed-heartbeats", metavar="SHARE",
                                 help="With --lease-s: the share of heartbeats that never arrive (0 to 1)."),
) -> None:
    """Simulate preemptions against a tool gateway and write the log with its ground truth."""
    from ..simulate import LeaseTiming, SimulateError, run_cli

    mode = choice("--mode", mode, MODES, "a mode")
    try:
        lease = None if lease_s is None else LeaseTiming(
            round(lease_s * 1000), round(heartbeat_s * 1000), round(jitter_s * 1000), missed)
    except SimulateError as e:
        raise fail(f"--lease-s/--heartbeat-s/--jitter-s/--missed-heartbeats: {e}") from None
    check_outputs([("--out", out)] + ([("--expect-out", expect_out)] if expect_out else []), [])
    with errors():
        try:
            typer.echo(run_cli(runs, seed, mode, out, expect_out, lease, mandates))
        except SimulateError as e:
            raise fail(f"{'--mandates' if 'mandates' in str(e) else '--mode'}: {e}") from None


@app.command()
def serve(
    db: Optional[Path] = typer.Option(None, "--db", metavar="FILE",
                                      help="DuckDB store to keep everything received (default: a temporary one)."),
    host: str = typer.Option("127.0.0.1", "--host", metavar="ADDR", help="Address to listen on."),
    port: int = typer.Option(4318, "--port", metavar="N", min=0, max=65535, help="Port (4318 is OTLP/HTTP's)."),
    vocabulary: Optional[list[Path]] = MAP,
    tokens: Optional[Path] = typer.Option(None, "--tokens", metavar="FILE",
                                          help="Bearer tokens, one 'TOKEN ROLE[,ROLE...]' per line; roles: worker, "
                                               "sink, coordinator, verifier, reader, any."),
    tls_cert: Optional[Path] = typer.Option(None, "--tls-cert", metavar="FILE", help="TLS certificate (PEM)."),
    tls_key: Optional[Path] = typer.Option(None, "--tls-key", metavar="FILE", help="TLS private key (PEM)."),
    tls_client_ca: Optional[Path] = typer.Option(None, "--tls-client-ca", metavar="FILE",
                                                 help="Require client certificates signed by this CA (PEM)."),
    allow_host: Optional[list[str]] = typer.Option(None, "--allow-host", metavar="NAME",
                                                   help="Host header to answer (repeatable; default: the bind "
                                                        "address and localhost); others get 421."),
    insecure: bool = typer.Option(False, "--insecure", help="Listen beyond loopback without --tokens."),
    max_queue: int = typer.Option(64, "--max-queue", metavar="N", min=1,
                                  help="Requests waiting for the audit before 429 Too Many Requests."),
    max_body: int = typer.Option(16, "--max-body-mb", metavar="MB", min=1, help="Largest request body, decompressed."),
    max_inflight: int = typer.Option(128, "--max-inflight-mb", metavar="MB", min=1,
                                     help="Request bodies held at once, all connections (429 past it)."),
    max_header: int = typer.Option(64, "--max-header-kb", metavar="KB", min=1,
                                   help="Largest request line and headers (431 past it)."),
    max_key: int = typer.Option(1024, "--max-key-bytes", metavar="N", min=16,
                                help="Longest workflow_key or effect_key; a longer one is quarantined."),
    max_members: int = typer.Option(1024, "--max-gzip-members", metavar="N", min=1,
                                    help="Most gzip members in one body (413 past it)."),
    decode_seconds: float = typer.Option(10.0, "--decode-seconds", metavar="SECONDS", min=0.1,
                                         help="A body must be decompressed within this (413 past it)."),
    idle_timeout: float = typer.Option(15.0, "--idle-timeout", metavar="SECONDS", min=0.1,
                                       help="Close a connection idle, or sending its headers, this long."),
    body_timeout: float = typer.Option(60.0, "--body-timeout", metavar="SECONDS", min=0.1,
                                       help="A request body must arrive whole within this (408)."),
    max_connections: int = typer.Option(1024, "--max-connections", metavar="N", min=1,
                                        help="Open connections before 503."),
    store_wait: float = typer.Option(30.0, "--store-wait", metavar="SECONDS", min=0.0,
                                     help="How long start and shutdown wait for a store another process holds."),
    decoders: int = typer.Option(2, "--decoders", metavar="N", min=0,
                                 help="Processes decoding requests (and splitting them for the store) beside the "
                                      "receiver (0: in the receiver)."),
    by: Optional[list[str]] = BY,
    quiet: bool = QUIET,
) -> None:
    """Receive OTLP/HTTP spans and log records (POST /v1/traces, /v1/logs) and audit them live.

    A request is answered 200 only once it is on disk (an fsynced spool beside --db, replayed at start)."""
    vocabulary = one_map(vocabulary)
    with errors():
        by = _before_binding(vocabulary, by)
        from ..serve import ServeConfig, ServeRefused, check_exposure, load_tokens, serve as run

        config = ServeConfig(
            db=db, vocabulary=vocabulary, max_queue=max_queue, max_body_bytes=max_body << 20, decoders=decoders,
            lease_by=tuple(by) if by else None, tokens=load_tokens(tokens) if tokens is not None else None,
            max_key_bytes=max_key, max_gzip_members=max_members, decode_seconds=decode_seconds,
            max_header_bytes=max_header << 10, idle_timeout=idle_timeout,
            body_timeout=body_timeout, max_inflight_bytes=max_inflight << 20, max_connections=max_connections,
            store_wait=store_wait,
            allow_hosts=tuple(allow_host or ()), tls_cert=tls_cert, tls_key=tls_key, tls_client_ca=tls_client_ca)
        try:
            check_exposure(host, config, insecure)
        except ServeRefused as e:
            raise fail(str(e)) from None
        if not quiet:
            _announce(host, port, config, allow_host)
        from ..core.interrupt import default_signals

        # The server shuts down gracefully on SIGINT/SIGTERM/SIGHUP (storing everything
        # acknowledged): the batch commands' one-line handling is not for it.
        default_signals()
        leftover = run(config, host=host, port=port)
    if leftover:
        typer.echo(f"Error: {leftover} acknowledged records are not in {db} yet (the store stayed locked); "
                   "they are kept in its spool and appended at the next start", err=True)
        raise typer.Exit(code=75)


def _before_binding(vocabulary: Optional[Path], by: Optional[list[str]]) -> Optional[list[str]]:
    """What must fail before the port is bound: a missing 'serve' extra, a bad --map file, a bad --by."""
    try:
        from ..serve import Receiver  # noqa: F401
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise fail(f"serve needs the 'serve' extra ({e.name} is missing): pip install 'split-brain-auditor[serve]'")
    if vocabulary is not None:
        from ..normalize.vocabulary import vocabulary_of

        vocabulary_of(vocabulary)
    if by:
        from ..detect.lease.batch import check_options

        by = check_options(by, 1)
    return by


def _announce(host: str, port: int, config: "ServeConfig", allow_host: list[str] | None) -> None:
    """Where the receiver listens and what it answers, on standard error."""
    from ..serve.config import allowed_hosts, is_loopback

    scheme = "https" if config.tls_cert is not None else "http"
    typer.echo(f"auditor serve: OTLP/HTTP on {scheme}://{host}:{port}/v1/traces and /v1/logs; "
               f"findings at /findings, store {config.db or 'temporary'}"
               f"{'' if config.tokens is not None else '; no --tokens: every sender may report anything'}", err=True)
    if not is_loopback(host) and not allow_host:
        typer.echo(f"auditor serve: answering only Host {', '.join(sorted(allowed_hosts(host, config)))}; "
                   "name the receiver's DNS names with --allow-host", err=True)


def main() -> None:
    from ..core.interrupt import handled

    command = typer.main.get_command(app)
    _plain_paths(command)
    with handled():
        command(prog_name="auditor")


def _plain_paths(group) -> None:
    """Help shows ``PATH...`` for the path arguments, not typer's ``{paths}...`` and ``<list[str]>``
    (typer has no setting for an argument's type label or its usage braces)."""
    for command in group.commands.values():
        for param in command.params:
            if isinstance(param, typer.core.TyperArgument):
                label = f"{param.metavar or param.name.upper()}..."
                param.metavar = label
                param.display_type_rich = lambda ctx: None
                param.get_usage_pieces = lambda ctx, label=label: [label]
