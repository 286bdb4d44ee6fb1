"""The pipeline, end to end: read -> normalize -> store -> detect -> explain, for every door.

``audit(paths)`` runs the whole of it and returns an ``AuditResult``; ``report(db)`` runs detection
again over a stored DuckDB file; ``analyze(store)`` is their common second half. The CLI, the
Spark engine and the receiver call these; ``auditor/__init__.py`` re-exports them.
"""

from __future__ import annotations


import os
import shlex
from collections.abc import Iterable
from pathlib import Path

from .core.collector import no_gc
from .core.errors import AuditError, NoEvents, at_the_edge
from .ingest.sources import Progress
from .core.limits import Limits
from .core.model import Diagnostic, Grade
from .core.summary import InputSummary
from .detect.lease.facts import LeaseHealth
from .explain.result import AuditResult, AuditSession, WorkflowTable, narrow
from .explain.scope import Scope
from .explain.stream import Explained
from .store import Store
from .store.attribution import attribution
from .normalize.vocabulary import Vocabulary


@at_the_edge
def ingest_paths(paths: Iterable[str | os.PathLike], store: Store, fmt: str = "auto",
                 progress: Progress | None = None, idempotent: bool = True,
                 limits: Limits | None = None):
    """Read every path into ``store``; returns one ``SourceCounts`` per input file.

    ``limits`` bounds each input (``Limits.from_env()``, the ``AUDITOR_MAX_*`` variables, when
    None). What input directories hold that is not a file (FIFOs, sockets, link loops) is added to
    ``store.skipped`` and shows in the input summary.
    """
    from .ingest import discover
    from .store.feed import read_sources

    sources = discover(paths, limits or Limits.from_env(), store.skipped)
    return read_sources(store, sources, fmt, progress, idempotent)


@at_the_edge
def analyze(store: Store, fail_on: Grade | str = Grade.STALE_ATTEMPT,
            require_events: bool = True, allow_quarantined: int = 0, allow_unplaced: int = 0,
            scope: Scope | None = None, by: Iterable[str] | None = None,
            heartbeat_misses: int = 1) -> AuditResult:
    """Detect and explain over everything in ``store``, then keep what ``scope`` reports.

    The result owns ``store`` from here on (``result.close()`` closes it) and carries the
    timelines a report draws. ``allow_quarantined`` lost lines (quarantined, ``event_id``
    conflicts, unreadable values a finding rule reads) and, apart from them, ``allow_unplaced``
    unplaced events that could change a finding (SPEC revision 3.1) are accepted before the
    verdict says ``incomplete``. Lease health (SPEC section 7)
    is measured too (``result.lease_health``, its diagnostics among ``result.diagnostics``):
    grouped by the ``attrs`` members ``by`` (None: ``tool``, ``model``, ``provider`` when present),
    judged with ``heartbeat_misses`` as ``R`` in ``L > R*H+J``.
    """
    from .detect.batch.timeline import excerpts
    from .explain.incidents import MAX_TIMELINE_EVENTS, drawn_keys
    from .detect.lease.batch import check_options, lease_health

    by = check_options(by, heartbeat_misses)  # a bad option fails before any work
    summary = store.input_summary()
    if require_events:
        check_events(summary, store.quarantine_reasons() if summary.events == 0 else None)
    # The two whole-store queries first, while the Python side holds nothing: after detection,
    # DuckDB's buffers would grow back on top of a million findings, incidents and summaries.
    health = lease_health(store.con, by, heartbeat_misses)
    conflicts = store.id_conflicts() + store.malformed_fields()
    unplaced = store.unplaced_kinds()
    store.shrink()
    # The collector stays off until the result is whole: switched back on any earlier, its first
    # passes walk every finding, incident and summary just built (0.4 s at two million events).
    with no_gc():
        found = detect_and_explain(store)
        attributed = attribution(store.con, found.findings)  # ({}, ()) unless auditor serve stored it
        result = result_of(found, summary, conflicts, health, unplaced, fail_on=fail_on,
                           allow_quarantined=allow_quarantined, allow_unplaced=allow_unplaced, scope=scope,
                           session=AuditSession(store), attributed=attributed)
        result.timelines = excerpts(store, drawn_keys(result), result.findings, MAX_TIMELINE_EVENTS)
    return result


def result_of(found: "Explained", summary: InputSummary, about_input: list[Diagnostic], health: LeaseHealth,
              unplaced: dict[str, int], *, fail_on: Grade | str, allow_quarantined: int, scope: Scope | None,
              session: AuditSession, engine: str = "duckdb", allow_unplaced: int = 0,
              attributed: tuple[dict, tuple[str, ...]] = ({}, ())) -> AuditResult:
    """The ``AuditResult`` of what detection and explanation found, with the input's accounting,
    the diagnostics about the input (``event_id_conflict``, ``malformed_field``), lease health and
    the unplaced events by kind, narrowed to ``scope``: one assembly for every engine."""
    result = AuditResult(ordering=ordering_of(found.workflows), input=summary, workflows=found.workflows,
                         findings=found.findings, incidents=found.incidents,
                         diagnostics=with_conflicts(found.diagnostics, about_input + list(health.diagnostics)),
                         fail_on=Grade(fail_on), session=session, allow_quarantined=allow_quarantined,
                         allow_unplaced=allow_unplaced,
                         lease_health=health, unplaced=unplaced, engine=engine,
                         attribution=attributed[0], token_names=attributed[1])
    return narrow(result, scope)


def detect_and_explain(store: Store, newest_ts=None) -> Explained:
    """Detect, group into incidents, summarize each workflow key: ``analyze``'s work on the
    events, a batch of keys at a time, into spooled lists (``explain.stream``). ``newest_ts`` is
    the newest event time of the whole log when ``store`` holds only a part of it (one partition
    of a distributed audit): evidence freshness is measured against it."""
    from .detect.batch import detect
    from .explain.stream import explain

    with no_gc():
        det = detect(store)
        try:
            if newest_ts is not None:
                det.newest_ts = newest_ts
            return explain(det)
        finally:
            det.close()


def with_conflicts(diagnostics: list[Diagnostic], conflicts: list[Diagnostic]) -> list[Diagnostic]:
    """The detector's diagnostics with those about the input (``event_id_conflict``,
    ``malformed_field``) and lease health's among them, in the document's order."""
    if not conflicts:
        return diagnostics
    return sorted(diagnostics + conflicts, key=lambda d: (d.workflow_key, d.place, d.kind))


def check_events(summary, reasons: tuple[list[tuple[str, int, str, int]], int] | None = None) -> None:
    """Raise ``NoEvents`` when the input summary holds no event (nothing read, or all quarantined).

    When every line was quarantined, the error lists the reasons by count (``reasons``: the store's
    ``quarantine_reasons()``; else those of the summary's first quarantined lines) and the next
    step: a vocabulary (``--map``), which ``auditor map`` suggests (issue 45)."""
    if summary.events == 0:
        if summary.lines_read == 0:
            raise NoEvents("no event found in the input; check the path and the format")
        if summary.quarantined == 0:  # everything ignored by the vocabulary, or skipped
            raise NoEvents(f"no event in the input: {summary.lines_read} lines read, {summary.ignored} ignored")
        raise NoEvents(f"every line was quarantined ({summary.quarantined} of {summary.lines_read}); "
                       f"first: {_first_reason(summary)}", quarantine_details(summary, reasons))


def ordering_of(workflows) -> str:
    """The document's ``ordering``: authoritative, observed, or mixed over the workflow summaries
    (a ``WorkflowTable``, or a list of summaries)."""
    observed = (workflows.observed() if isinstance(workflows, WorkflowTable)
                else sum(1 for w in workflows if w.ordering == "observed"))
    return "authoritative" if observed == 0 else "observed" if observed == len(workflows) else "mixed"


@at_the_edge
def audit(paths: Iterable[str | os.PathLike] | str | os.PathLike, *, fmt: str = "auto",
          db: str | os.PathLike | None = None, fail_on: Grade | str = Grade.STALE_ATTEMPT,
          keep_payloads: bool = False, progress: Progress | None = None,
          allow_quarantined: int = 0, allow_unplaced: int = 0, scope: Scope | None = None,
          vocabulary: Vocabulary | str | os.PathLike | None = None,
          limits: Limits | None = None, by: Iterable[str] | None = None,
          heartbeat_misses: int = 1) -> AuditResult:
    """Audit event logs: ingest ``paths`` into a DuckDB store (a scratch one unless ``db``), detect, explain.

    ``vocabulary`` maps a team's own kind and field names onto the contract: a ``Vocabulary`` or
    the path of a ``--map`` TOML file (``VocabularyError`` when it cannot be used). ``by`` and
    ``heartbeat_misses`` are lease health's ``--by`` and ``--heartbeat-misses`` (see ``analyze``).
    ``progress`` is called with the number of input bytes just read; for a file over a megabyte,
    from the thread that reads it ahead of the store, so it must be safe to call from another
    thread (a ``rich`` progress bar's ``advance`` is). Blocking; returns an ``AuditResult`` whose store stays open for ``events_frame()`` and
    ``timeline()`` until ``close()``; use it as ``with audit(...) as result:`` to close it.
    Raises an ``AuditorError`` when the audit cannot run: ``NoEvents``, ``InputError``
    (``LimitExceeded`` for an input past ``limits``), ``StoreError``.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    from .detect.lease.batch import check_options

    check_options(by, heartbeat_misses)  # before the input is read
    if db is not None:
        store = Store(db, keep_payloads=keep_payloads, vocabulary=vocabulary)
        sources = None
    else:  # the input's size first: a small one is audited in memory
        from .ingest import discover

        skipped: list = []
        sources = discover(paths, limits or Limits.from_env(), skipped)
        store = Store(None, keep_payloads=keep_payloads, vocabulary=vocabulary, small=small_input(sources))
        store.skipped = skipped
    try:
        if sources is None:
            ingest_paths(paths, store, fmt, progress, idempotent=True, limits=limits)
        else:
            from .store.feed import read_sources

            read_sources(store, sources, fmt, progress, idempotent=False)
        return analyze(store, fail_on, allow_quarantined=allow_quarantined, allow_unplaced=allow_unplaced,
                       scope=scope, by=by,
                       heartbeat_misses=heartbeat_misses)
    except BaseException:
        store.close()
        raise


#: The most an input's bytes are taken to grow by once read, when they are compressed (gzip, zstd)
#: or Parquet.
PACKED_RATIO = 32


def small_input(sources: list) -> bool:
    """Whether ``sources`` (``ingest.discover``'s) are small enough to audit in memory:
    ``store.SMALL_INPUT`` bytes once read, a compressed or Parquet file (told by its first bytes,
    as the readers tell it) counted at ``PACKED_RATIO`` times its size."""
    from .ingest.compression import compression_of_head
    from .store import SMALL_INPUT

    total = 0
    for s in sources:
        total += s.size
        if total > SMALL_INPUT:
            return False
        try:
            with open(s.path, "rb") as f:  # the first bytes, once: as the readers tell the format
                head = f.read(4)
            packed = head == b"PAR1" or compression_of_head(head) is not None
        except OSError:  # the reader says what is wrong with it
            return False
        total += s.size * (PACKED_RATIO - 1) if packed else 0
    return total <= SMALL_INPUT


@at_the_edge
def report(db: str | os.PathLike, fail_on: Grade | str = Grade.STALE_ATTEMPT, *,
           allow_quarantined: int = 0, allow_unplaced: int = 0, scope: Scope | None = None,
           lock_timeout: float = 0.0,
           vocabulary: Vocabulary | str | os.PathLike | None = None,
           by: Iterable[str] | None = None, heartbeat_misses: int = 1) -> AuditResult:
    """Re-run detection over a persistent store written by ``ingest`` or the span processor.

    The store is opened read-only: another user's store, or a CI artifact, can be reported on.
    ``vocabulary`` is checked (``VocabularyError``) but changes nothing: it applies when lines are
    ingested, and the store holds them normalized. ``by`` and ``heartbeat_misses``: see ``analyze``."""
    from .store.spooled import backlog, store_mark

    check_store(db)
    store = Store(db, lock_timeout=lock_timeout, vocabulary=vocabulary, read_only=True)
    try:
        # What auditor serve acknowledged and the store lacks (read while the store is held: its
        # mark cannot move meanwhile) keeps the verdict from a pass.
        spool = backlog(db, store_mark(store.con))
        result = analyze(store, fail_on, allow_quarantined=allow_quarantined, allow_unplaced=allow_unplaced,
                         scope=scope, by=by, heartbeat_misses=heartbeat_misses)
        result.spool = spool
        return result
    except BaseException:
        store.close()
        raise


def check_store(db: str | os.PathLike) -> None:
    """Raise ``AuditError`` unless ``db`` exists (``report`` never creates an empty store)."""
    if not Path(db).exists():
        raise AuditError(f"{db}: no such DuckDB store; create it with 'auditor ingest PATH --db {db}'")


def _first_reason(summary) -> str:
    if not summary.quarantine:
        return "-"
    q = summary.quarantine[0]
    return f"{q.file}:{q.line}: {q.reason}"


def quarantine_details(summary, reasons: tuple[list[tuple[str, int, str, int]], int] | None) -> tuple[str, ...]:
    """The reasons, most frequent first, then the next step, one line each (``NoEvents.details``)."""
    if reasons is None:  # only the summary's first lines are known here (the Spark door)
        counted: dict[str, list] = {}
        for q in summary.quarantine:
            counted.setdefault(q.reason, [q.reason, 0, q.file, q.line])[1] += 1
        rows = sorted(counted.values(), key=lambda r: -r[1])[:5]
        head = f"reasons among the first {len(summary.quarantine)} quarantined lines, most frequent first:"
        total = len(counted)
    else:
        rows, total = reasons
        head = "reasons, most frequent first:"
    out = [head] + [f"  {n:,} {'line' if n == 1 else 'lines'}: {reason} (first {file}:{line})"
                    for reason, n, file, line in rows]
    if total > len(rows):
        out.append(f"  and {total - len(rows):,} other reasons")
    paths = shlex.join(dict.fromkeys(summary.files)) or "LOG"
    out += ["next: if the log is not in the contract's field and kind names, let 'auditor map' suggest a "
            f"vocabulary: auditor map {paths} --out vocabulary.toml; read and correct it, then audit "
            f"with --map vocabulary.toml (docs/FORMAT.md, section 3)"]
    return tuple(out)
