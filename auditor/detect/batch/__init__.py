"""Stage 4, detect: graded findings and diagnostics from the stored events (SPEC section 3).

``detect(store)`` runs ``detect.sql`` (the set-based detector) and returns findings as data. The
incremental detector for live audits is ``detect.live``; a test pins the two together.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, NamedTuple, TypeVar

import duckdb

from ...core.model import Diagnostic, DiagnosticKind, Finding, Grade, Kind, Outcome, build_finding
from ...rules import (attempt_grade, diagnostic_id, diagnostic_order, displaced_epoch, finding_id,
                      finding_order, incident_id)
from ...core.sql import statements
from ...store import Store

if TYPE_CHECKING:
    import pyarrow as pa

SQL = statements("detect/batch/detect.sql")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
T = TypeVar("T")

_BUILD = ("acquisitions", "records", "key_epochs", "displacement", "diagnostic_rows", "release_key_epochs",
          "key_counts", "stale", "commits", "resolutions",
          "first_commits", "step_commits", "findings", "finding_keys", "picked", "release",
          "evidence", "release_picked")


# Value -> member by dict: Grade(value) and friends cost a microsecond each on Python 3.11.
_GRADES = {g.value: g for g in Grade}
_KINDS = {k.value: k for k in Kind}
_OUTCOMES = {o.value: o for o in Outcome}
_REJECTED = Grade.REJECTED_ATTEMPT


class Handover(NamedTuple):
    """An acquisition that raised the key's highest epoch: a takeover when a finding names it as
    its transition, else a clean handover."""

    workflow_key: str
    seq: int  # position in the key's order
    epoch: int
    worker: str


@dataclass(slots=True)
class Detection:
    """What the detector saw: findings and diagnostics, plus the facts explain needs.

    ``take_workflows`` and ``release_timestamps`` hand the two big parts over (a million rows at
    ten million events), so their memory is freed as soon as explain is done with them.
    """

    findings: list[Finding]
    diagnostics: list[Diagnostic]
    # Every key, sorted by key: a pyarrow table of result.COUNTS (workflow_key, events,
    # acquisitions, observed: some event lacks seq, so the key is ordered by observation, and
    # handovers: acquisitions that raised the highest epoch after the first).
    workflows: "pa.Table"
    # The rest covers the keys with findings only: a big audit has a million clean keys.
    handovers: list[Handover]
    # (workflow_key, effect_key) -> the last outcome_verified: its place in the key's order, its position
    verifications: dict[tuple[str, str], tuple[int, int]]
    acquirers: dict[tuple[str, int], str]       # (workflow_key, epoch) -> worker who acquired it
    newest_ts: datetime | None
    finding_ts: dict[str, datetime | None] = field(default_factory=dict)  # finding id -> parsed ts
    transition_ts: dict[tuple[str, int], datetime | None] = field(default_factory=dict)
    capped: set[str] = field(default_factory=set)  # finding ids whose span was capped by limits

    def take_workflows(self) -> "pa.Table":
        table, self.workflows = self.workflows, self.workflows.slice(0, 0)
        return table

    def observed_keys(self) -> set[str]:
        """The keys ordered by observation (their log lacks seq)."""
        table = self.workflows
        return set(table.filter(table.column("observed")).column("workflow_key").to_pylist())

    def release_timestamps(self) -> None:
        self.finding_ts = {}
        self.transition_ts = {}


def detect(store: Store) -> Detection:
    con = store.con
    for name in _BUILD:
        con.execute(SQL[name])
    # The events' pages the build cached go before the findings arrive in Python (half a
    # million at ten million events), so the two never peak together; the scratch tables still
    # read are written out and read back as needed.
    store.shrink()
    try:
        findings, finding_ts, capped = lean(store, _findings, FINDINGS_MEMORY)
        from .authorize import authorize

        findings, authority_notes = authorize(con, findings, finding_ts)
        con.execute(SQL["release_evidence"])
        # The per-key facts, under a low limit: what their queries read back into DuckDB's cache
        # would otherwise sit on top of the findings.
        diagnosed, workflows, handovers, verifications, acquirers, transition_ts, newest = lean(store, _facts)
        diagnostics = sorted(
            [*(Diagnostic(diagnostic_id(k, kind, s, epoch), DiagnosticKind(kind), k, seq, epoch, detail,
                          position=pos)
               for kind, k, s, epoch, detail, seq, pos in diagnosed),
             *authority_notes],
            key=diagnostic_order)
    finally:
        con.execute(SQL["drop"])
        store.shrink()  # the SQL is done; the Python side (explain, render) grows from here
    return Detection(findings, diagnostics, workflows, handovers, verifications, acquirers, newest,
                     finding_ts, transition_ts, capped)


def _facts(con) -> tuple:
    """What explain needs besides the findings: diagnostic rows, per-key counts, handovers,
    verifications, acquirers, transition times and the newest event time."""
    return (con.execute(SQL["diagnostics"]).fetchall(),
            con.sql(SQL["workflows"]).to_arrow_table(),
            [Handover(*r) for r in con.execute(SQL["handovers"] + " ORDER BY k, s").fetchall()],
            {(k, e): (s, pos) for k, e, s, pos in con.execute(SQL["verifications"]).fetchall()},
            {(k, ep): w for k, ep, w, _ in con.execute(SQL["acquirers"]).fetchall()},
            {(k, s): t for k, s, t in con.execute(SQL["transitions"]).fetchall()},
            con.execute(SQL["newest_ts"]).fetchone()[0])


#: DuckDB's memory limit while a query reads a little from the whole store (see ``lean``)
LEAN_MEMORY = "128MB"
#: ... and while the finding rows come into Python: under the store's usual limit DuckDB kept the
#: evidence it read back cached beside the findings being built, 1.4 GB at ten million events
#: against 0.7 GB under this one (the sort spills what does not fit).
FINDINGS_MEMORY = "256MB"


def lean(store: Store, read: Callable[[duckdb.DuckDBPyConnection], T], limit: str = LEAN_MEMORY) -> T:
    """``read(store.con)`` under a low memory limit (``limit``, ``LEAN_MEMORY`` unless told), for
    queries that scan the store for a little: under the store's usual limit the pages they read
    stay cached, on top of the Python objects of a big audit (the timelines' query alone cached
    345 MB at ten million events). Should ``read`` need more, it runs again under the usual
    limit; ``shrink`` restores the limit either way."""
    try:
        with contextlib.suppress(duckdb.Error):  # pages it cannot evict: the usual limit then
            store.lower_memory(limit)
        try:
            return read(store.con)
        except duckdb.OutOfMemoryException:
            pass  # retried below, once the first try's partial results are gone
        store.shrink()
        return read(store.con)
    finally:
        store.shrink()


def _findings(con) -> tuple[list[Finding], dict[str, datetime | None], set[str]]:
    """The findings of the finding rows in ``finding_order``, their parsed ts by id, and the ids
    whose evidence was capped (``otel.capped``)."""
    # Arrow batches, a Python list per column: a third faster than fetching tuples.
    batches = con.sql(SQL["finding_rows"]).to_arrow_reader(50_000)
    rows = (row for batch in batches for row in zip(*(column.to_pylist() for column in batch.columns)))
    findings, finding_ts, capped = [], {}, set()
    # One string object per distinct key, worker, sink and reporter, not one per finding:
    # half a million findings repeat a few workers and share keys.
    shared: dict[str, str] = {}
    share = shared.setdefault
    for (grade, k, s, kind, epoch, worker, cur_epoch, cur_worker, t_seq, effect_key, step_id,
         sink, reporter, ts, outcome, receipt, epochs, unstable, ts_utc, attrs, sink_result, seq,
         file, line, position, t_pos, receipt_pos) in rows:
        k, worker, sink, reporter = share(k, k), share(worker, worker), share(sink, sink), share(reporter, reporter)
        file = share(file, file)
        if cur_worker is not None:
            cur_worker = share(cur_worker, cur_worker)
        if grade == "attempt":
            g, resolved = attempt_grade(outcome, sink_result)
            if g is not _REJECTED:
                receipt = receipt_pos = None
        else:
            g, resolved = _GRADES[grade], _OUTCOMES[outcome] if outcome else None
        epochs = tuple(epochs or ())
        if seq is None:  # a key ordered by observation: no seq is ever invented (SPEC rev 3)
            t_seq = receipt = None
        fid = finding_id(k, g, s)
        # Findings carry their incident id from the start, as the live detector fills it in:
        # explain then keeps the finding instead of copying it.
        findings.append(build_finding(
            id=fid, grade=g, workflow_key=k, seq=seq, position=position, kind=_KINDS[kind], epoch=epoch,
            worker=worker, current_epoch=cur_epoch, current_worker=cur_worker, transition_seq=t_seq,
            transition_position=t_pos,
            effect_key=effect_key, step_id=step_id, sink=sink, reporter=reporter, ts=ts,
            outcome=resolved, receipt_seq=receipt, receipt_position=receipt_pos, epochs=epochs,
            unstable_effect_key=bool(unstable),
            incident_id=incident_id(k, displaced_epoch(g, epoch, epochs)), file=file, line=line))
        finding_ts[fid] = None if ts_utc is None else _EPOCH + timedelta(microseconds=ts_utc)
        if attrs and '"otel.capped": true' in attrs:
            capped.add(fid)
    findings.sort(key=finding_order)
    # Two attempts of one seq (an ordering conflict) that grade alike are one finding.
    return [f for i, f in enumerate(findings) if not i or f.id != findings[i - 1].id], finding_ts, capped
