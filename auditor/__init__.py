"""Split-brain auditor: did a displaced owner keep acting after a newer epoch took over?

The Python door. ``audit(paths)`` runs the whole pipeline (read -> normalize -> store -> detect ->
explain) and returns an ``AuditResult``; ``report(db)`` re-runs detection over a stored DuckDB file.

    >>> from auditor import audit
    >>> result = audit(["fixtures/seed_split_brain.jsonl"])
    >>> result.verdict, [f.grade.value for f in result.findings]
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import AuditError, AuditorError, InputError, NoEvents, StoreError, StoreLocked
from .model import Diagnostic, Event, Finding, Grade, Incident, Kind
from .result import AuditResult
from .store import Store

__all__ = ["audit", "ingest_paths", "report", "analyze", "AuditResult", "Finding", "Incident",
           "Diagnostic", "Event", "Grade", "Kind", "Store", "AuditorError", "AuditError", "InputError",
           "NoEvents", "StoreError", "StoreLocked"]


Progress = Callable[[int], None]


def ingest_paths(paths: Iterable[str | os.PathLike], store: Store, fmt: str = "auto",
           progress: Progress | None = None, idempotent: bool = True):
    """Read every path into ``store``; returns one ``SourceCounts`` per input file."""
    from .ingest import discover, read_source

    sources = discover(paths)
    return [read_source(store, src, fmt, progress, idempotent) for src in sources]


def analyze(store: Store, fail_on: Grade | str = Grade.STALE_ATTEMPT,
            require_events: bool = True, newest_ts=None) -> AuditResult:
    """Detect and explain over everything in ``store``.

    ``newest_ts`` is the newest event time of the whole log when ``store`` holds only a part of
    it (one partition of a distributed audit): evidence freshness is measured against it.
    """
    from .detect import detect
    from .explain import incidents, workflows

    summary = store.input_summary()
    if require_events:
        check_events(summary)
    with _no_gc():
        det = detect(store)
        if newest_ts is not None:
            det.newest_ts = newest_ts
        findings, incs = incidents(det)
        # The timestamps served the incidents: free them before the workflow summaries (a million
        # at ten million events) take the memory back. workflows() consumes det.workflows itself.
        det.finding_ts.clear()
        det.transition_ts.clear()
        wfs = workflows(det, findings)
    return AuditResult(ordering=ordering_of(wfs), input=summary, workflows=wfs, findings=findings,
                       incidents=incs, diagnostics=det.diagnostics, fail_on=Grade(fail_on),
                       store=store)


def check_events(summary) -> None:
    """Raise ``NoEvents`` when the input summary holds no event (nothing read, or all quarantined)."""
    if summary.events == 0:
        if summary.lines_read == 0:
            raise NoEvents("no event found in the input; check the path and the format")
        raise NoEvents(f"every line was quarantined ({summary.quarantined} of {summary.lines_read}); "
                       f"first: {_first_reason(summary)}")


def ordering_of(workflows) -> str:
    """The document's ``ordering``: authoritative, observed, or mixed over the workflow summaries."""
    observed = sum(1 for w in workflows if w.ordering == "observed")
    return "authoritative" if observed == 0 else "observed" if observed == len(workflows) else "mixed"


def audit(paths: Iterable[str | os.PathLike] | str | os.PathLike, *, fmt: str = "auto",
          db: str | os.PathLike | None = None, fail_on: Grade | str = Grade.STALE_ATTEMPT,
          keep_payloads: bool = False, progress: Progress | None = None) -> AuditResult:
    """Audit event logs: ingest ``paths`` into a DuckDB store (a scratch one unless ``db``), detect, explain.

    Blocking; returns an ``AuditResult`` whose ``store`` stays open for ``events_frame()`` and
    ``timeline()``. Raises ``AuditError`` (``NoEvents``, ``InputError``) when the audit cannot run.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    store = Store(db, keep_payloads=keep_payloads)
    ingest_paths(paths, store, fmt, progress, idempotent=db is not None)
    return analyze(store, fail_on)


def report(db: str | os.PathLike, fail_on: Grade | str = Grade.STALE_ATTEMPT) -> AuditResult:
    """Re-run detection over a persistent store written by ``ingest`` or the span processor."""
    if not Path(db).exists():
        raise AuditError(f"{db}: no such DuckDB store; create it with 'auditor ingest PATH --db {db}'")
    return analyze(Store(db), fail_on)


@contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a big audit builds its objects, then restore it.

    A ten-million-event audit creates millions of long-lived findings, incidents and workflow
    summaries, none of them in a reference cycle; with the collector running, each generation-2
    pass walks all of them again (a quarter of detect + explain at 1M events). It is a process-wide
    switch, so it is switched back on however the block ends, and left off if it was off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _first_reason(summary) -> str:
    if not summary.quarantine:
        return "-"
    q = summary.quarantine[0]
    return f"{q.file}:{q.line}: {q.reason}"
