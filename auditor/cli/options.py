"""What the commands share: their options (declared once), the argument checks made before any
work, the progress shown on a terminal, and the one way results are written (``Reporting``).
``cli.py`` holds the commands themselves."""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Iterator, Optional

import typer

from ..ingest import NAMES
from ..core.model import Grade
from ..explain.scope import Scope
from ..simulate.parts import Mode

GRADES = [g.value for g in Grade]
MODES = [m.value for m in Mode]

PATHS = typer.Argument(..., metavar="PATH", show_default=False,
                       help="Files, directories or - (standard input); gzip/zstd welcome.")
FORMAT = typer.Option("auto", "--format", metavar="FORMAT", autocompletion=lambda: list(NAMES),
                      help=f"Input format: {', '.join(NAMES)}; auto detects from name and content.")
JSON_OUT = typer.Option(None, "--json", metavar="FILE", help="Write the JSON document to FILE, or - for stdout.")
HTML_OUT = typer.Option(None, "--html", metavar="FILE", help="Write the self-contained HTML incident report to FILE.")
JUNIT_OUT = typer.Option(None, "--junit", metavar="FILE",
                         help="Write JUnit XML to FILE: a test case per workflow key, a failure per "
                              "incident at or above --fail-on.")
MARKDOWN_OUT = typer.Option(None, "--markdown", metavar="FILE",
                            help="Write a Markdown summary to FILE (e.g. $GITHUB_STEP_SUMMARY).")
FAIL_ON = typer.Option(Grade.STALE_ATTEMPT.value, "--fail-on", metavar="GRADE", autocompletion=lambda: GRADES,
                       help=f"Exit 1 when a finding of this grade or worse exists: {', '.join(GRADES)}.")
EXPECT = typer.Option(None, "--expect", metavar="FILE",
                      help='Compare findings with {"findings": [[grade, workflow_key, seq], ...]}: exit 0 '
                           "when they match, 1 when they differ, 3 when they match but lines were lost.")
ALLOW = typer.Option(0, "--allow-quarantined", metavar="N", min=0,
                     help="Accept up to N lost lines (quarantined, or event_id conflicts) before the "
                          "verdict says incomplete (exit 3).")
ALLOW_UNPLACED = typer.Option(0, "--allow-unplaced", metavar="N", min=0,
                              help="Accept up to N unplaced events that could change a finding (no seq in a "
                                   "key ordered by seq); --allow-quarantined never accepts them.")
KEYS = typer.Option(None, "--key", metavar="GLOB",
                    help="Report only this workflow key (a glob such as 'ledger/*'); repeatable.")
KEYS_FROM = typer.Option(None, "--keys-from", metavar="FILE",
                         help="Report only the workflow keys (or globs) listed in FILE, one per line.")
SINCE = typer.Option(None, "--since", metavar="SEQ|TIME",
                     help="Report findings from this seq (an integer) or RFC 3339 ts on, inclusive; "
                          "detection still runs over everything, so earlier takeovers count.")
UNTIL = typer.Option(None, "--until", metavar="SEQ|TIME", help="Report findings up to this seq or ts, inclusive.")
QUIET = typer.Option(False, "--quiet", "-q", help="Print nothing but errors; the exit code says the verdict.")
KEEP = typer.Option(False, "--keep-payloads",
                    help="Keep payload-like attrs (prompt, input, output, ...) instead of their SHA-256.")
WAIT = typer.Option(0.0, "--wait", metavar="SECONDS",
                    help="Seconds to wait for another process holding the --db file.")
BY = typer.Option(None, "--by", metavar="ATTR",
                 help="Group lease health by this attrs member; repeatable (default: tool, model and "
                      "provider, those the log carries).")
HEARTBEAT_MISSES = typer.Option(1, "--heartbeat-misses", metavar="R", min=0,
                                help="Heartbeats one is willing to miss: R in the lease timing rule "
                                     "L > R*H+J (lease above R heartbeat periods plus jitter).")
MAP = typer.Option(None, "--map", metavar="FILE",
                   help="Vocabulary file (TOML): your kind and field names onto the contract, e.g. "
                        '[kinds] result_committed = "effect_committed".')
ENGINES = ["duckdb", "spark"]
ENGINE = typer.Option("duckdb", "--engine", metavar="ENGINE", autocompletion=lambda: ENGINES,
                      help="duckdb: this machine; spark: Apache Spark, partitioned by workflow key "
                           "(pip install 'split-brain-auditor[spark]').")
SPARK_MASTER = typer.Option(None, "--spark-master", metavar="URL",
                            help="Spark master URL for --engine spark (default local[*]).")


def fail(message: str) -> typer.Exit:
    from ..render.terminal import clean

    # Messages quote the input (a kind, a file name): an escape sequence in it must not reach the terminal.
    typer.echo(f"Error: {clean(message)}", err=True)
    return typer.Exit(code=2)


@contextmanager
def errors() -> Iterator[None]:
    """The one funnel from library exceptions to ``Error:`` lines and exit code 2."""
    from ..core.errors import AuditorError
    from ..core.interrupt import check

    try:
        try:
            yield
        except Exception:
            check()  # DuckDB turns a signal into "Query interrupted": report the signal instead
            raise
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


# Arguments, checked before any work.


def choice(option: str, value: str, choices: list[str], noun: str) -> str:
    """``value`` normalized, or one ``Error:`` line naming the option and every valid value."""
    normal = value.strip().lower()
    if normal not in choices:
        raise fail(f"{option} {value!r} is not {noun}; use one of {', '.join(choices)}")
    return normal


def grade(value: str) -> Grade:
    return Grade(choice("--fail-on", value, GRADES, "a grade"))


def input_format(value: str) -> str:
    return choice("--format", value, list(NAMES), "a format")


@dataclass(frozen=True)
class Outputs:
    """Where the renderings go; ``json`` may be ``-`` (standard output)."""

    json: Optional[str] = None
    html: Optional[Path] = None
    junit: Optional[Path] = None
    markdown: Optional[Path] = None

    def named(self) -> list[tuple[str, Path]]:
        pairs = [("--json", self.json), ("--html", self.html), ("--junit", self.junit),
                 ("--markdown", self.markdown)]
        return [(opt, Path(p)) for opt, p in pairs if p is not None and str(p) != "-"]

    def check(self, inputs: list[str], db: Optional[Path] = None) -> None:
        check_outputs(self.named() + ([("--db", db)] if db else []), inputs)


def check_outputs(named: list[tuple[str, Path]], inputs: list[str]) -> None:
    """Every output can be written and overwrites no input (else a ``fail`` exit)."""
    sources = {_same(p) for p in inputs if p != "-"}
    seen: dict[Path, str] = {}
    for opt, path in named:
        where = _same(path)
        if where in sources:
            raise fail(f"{opt} {path} is also an input; write the output somewhere else")
        if where in seen:
            raise fail(f"{opt} {path} is also the {seen[where]} file; give each its own file")
        seen[where] = opt
        if path.is_dir():
            raise fail(f"{opt} {path} is a directory; name a file")
        if not path.parent.is_dir():
            raise fail(f"{opt} {path}: the directory {path.parent} does not exist; create it first")


def _same(path: str | Path) -> Path:
    try:
        return Path(path).expanduser().resolve()
    except (OSError, RuntimeError):  # a link loop: the reader names it; compare it as written
        return Path(path).expanduser().absolute()


def scope_of(keys: Optional[list[str]], keys_from: Optional[Path], since: Optional[str],
             until: Optional[str]) -> Scope:
    with errors():
        return Scope.parse(keys or (), keys_from, since, until)


def expected_of(path: Optional[Path]):
    from ..explain.expect import load_expected

    if path is None:
        return None
    with errors():
        return load_expected(path)


# Progress on a terminal.


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
def progress_bar(paths: list[str], quiet: bool = False) -> Iterator[Optional[Callable[[int], None]]]:
    """A byte-count progress bar on a terminal; nothing when stderr is not one."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    total = _input_size(paths)
    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                  TimeRemainingColumn(), transient=True, disable=total < LONG_INPUT) as bar:
        task = bar.add_task("reading", total=total or None)
        yield lambda n: bar.advance(task, n)


@contextmanager
def step(paths: list[str], text: str, quiet: bool = False) -> Iterator[None]:
    """A spinner naming a long step after the reading (detection, writing the report), on a
    terminal and for a big input, like the progress bar; gone when the step ends."""
    if quiet or not sys.stderr.isatty() or _input_size(paths) < LONG_INPUT:
        yield
        return
    from rich.console import Console

    with Console(stderr=True).status(text):
        yield


# Results out.


def write_output(path: str | Path, content: str | Callable[[IO[str]], None], inputs: list[str]) -> None:
    """The one place an output file is written: atomically, never over one of ``inputs``
    (``-`` is standard output, where a closed pipe ends quietly)."""
    from ..core.interrupt import quiet_pipe
    from ..render.output import write_atomic

    if str(path) == "-":
        with quiet_pipe():
            if callable(content):
                content(sys.stdout)
            else:
                sys.stdout.write(content)
        return
    write_atomic(path, content, inputs)


def emit(result, outputs: Outputs, inputs: list[str], quiet: bool = False) -> None:
    """Write every requested rendering of ``result``, then the summary (stderr when the JSON
    document goes to stdout)."""
    if outputs.json:
        from ..render.json import write_json

        with step(inputs, f"writing {outputs.json}", quiet):
            write_output(outputs.json, lambda out: write_json(result, out), inputs)
    if outputs.html:
        from ..render.html import render_html

        write_output(outputs.html, render_html(result), inputs)
    if outputs.junit:
        from ..render.junit import render_junit

        write_output(outputs.junit, render_junit(result), inputs)
    if outputs.markdown:
        from ..render.markdown import render_markdown

        write_output(outputs.markdown, render_markdown(result), inputs)
    if not quiet:
        from ..core.interrupt import quiet_pipe
        from ..render.terminal import print_summary

        with quiet_pipe():
            print_summary(result, sys.stderr if outputs.json == "-" else sys.stdout)


@dataclass(frozen=True)
class Reporting:
    """The options ``audit`` and ``report`` share, parsed and checked before any work."""

    outputs: Outputs
    fail_on: Grade
    expect: Optional[Path]
    expected: Optional[tuple]
    allow_quarantined: int
    scope: Scope
    quiet: bool
    by: Optional[tuple[str, ...]] = None  # lease health's dimensions; None: the defaults
    heartbeat_misses: int = 1
    allow_unplaced: int = 0  # SPEC rev 3.1: unplaced events accepted, apart from lost lines

    @classmethod
    def parse(cls, json_out, html, junit, markdown, fail_on, expect, allow_quarantined, allow_unplaced, key,
              keys_from, since, until, quiet, by, heartbeat_misses) -> "Reporting":
        from ..detect.lease.batch import check_options

        with errors():
            by = check_options(by or None, heartbeat_misses)
        return cls(Outputs(json_out, html, junit, markdown), grade(fail_on), expect, expected_of(expect),
                   allow_quarantined, scope_of(key, keys_from, since, until), quiet, by, heartbeat_misses,
                   allow_unplaced)

    @property
    def lease(self) -> dict:
        """The library's lease health arguments."""
        return {"by": self.by, "heartbeat_misses": self.heartbeat_misses}

    @property
    def allowances(self) -> dict:
        """The library's allowances: lost lines, and unplaced events apart (SPEC revision 3.1)."""
        return {"allow_quarantined": self.allow_quarantined, "allow_unplaced": self.allow_unplaced}

    def finish(self, result, inputs: list[str]) -> typer.Exit:
        """Render, compare with --expect when given, and return the exit for the verdict."""
        with errors():
            emit(result, self.outputs, inputs, self.quiet)
        if self.expected is None:
            return typer.Exit(code=result.exit_code)
        from ..explain.expect import compare_expected
        from ..render.terminal import print_comparison

        comparison = compare_expected(result, self.expected, source=str(self.expect))
        if not self.quiet:
            print_comparison(result, comparison, sys.stderr if self.outputs.json == "-" else sys.stdout)
        return typer.Exit(code=comparison.exit_code)


#: The shared options, in the order ``Reporting.parse`` takes them (name, annotation, option).
REPORTING = [
    ("json_out", Optional[str], JSON_OUT), ("html", Optional[Path], HTML_OUT),
    ("junit", Optional[Path], JUNIT_OUT), ("markdown", Optional[Path], MARKDOWN_OUT),
    ("fail_on", str, FAIL_ON), ("expect", Optional[Path], EXPECT), ("allow_quarantined", int, ALLOW),
    ("allow_unplaced", int, ALLOW_UNPLACED),
    ("key", Optional[list[str]], KEYS), ("keys_from", Optional[Path], KEYS_FROM),
    ("since", Optional[str], SINCE), ("until", Optional[str], UNTIL), ("quiet", bool, QUIET),
    ("by", Optional[list[str]], BY), ("heartbeat_misses", int, HEARTBEAT_MISSES),
]


def reporting(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command`` the shared reporting options, handed to it as one ``rep: Reporting``:
    typer reads the wrapper's signature, so each option is declared once for both commands."""
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "rep"]
    shared = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=kind)
              for name, kind, option in REPORTING]

    @functools.wraps(command)
    def wrapper(**kwargs):
        from ..core.collector import no_gc

        rep = Reporting.parse(*(kwargs.pop(name) for name, _, _ in REPORTING))
        # A report command ends the process: the collector stays off from the audit to the last
        # rendering, where each pass would walk the whole (acyclic) result again. Not for a Spark
        # driver, whose py4j proxies and threads are no such result.
        spark = str(kwargs.get("engine", "")).strip().lower() == "spark"
        with contextlib.nullcontext() if spark else no_gc():
            return command(**kwargs, rep=rep)

    wrapper.__signature__ = inspect.Signature(own + shared)
    wrapper.__annotations__ = {}
    return wrapper
