"""SPEC section 8 in the batch detector: the authority rules and compensation, per key.

Staleness and double commits are set operations over every event (``detect.sql``); authority is a
state machine over one key's events in seq order (``authority.AuthorityTracker``), the same one the
live detector feeds. Only keys that opt in (an authority kind, or an effect naming an
``authority_id``) and keys with compensation records are read back, so an ordinary log pays one
scan of two columns.
"""

from __future__ import annotations


import duckdb

from ...rules.authority import KeyAuthority, compensate, compensated, judged, resolves
from ...core.model import Diagnostic, DiagnosticKind, Finding, Grade, Kind
from ...rules import authority_incident_id, diagnostic_id, finding_id, finding_order
from ...core.sql import statements
from .timeline import authority_events

SQL = statements("detect/batch/detect.sql")
_ATTEMPT, _COMMIT, _COMPENSATED = Kind.EFFECT_ATTEMPTED, Kind.EFFECT_COMMITTED, Kind.EFFECT_COMPENSATED
_TWICE = Grade.DOUBLE_COMMIT


def authorize(con: duckdb.DuckDBPyConnection, findings: list[Finding],
              stamps: dict) -> tuple[list[Finding], list[Diagnostic]]:
    """``findings`` with the authority rules and compensation applied, and their diagnostics;
    ``stamps`` (finding id -> parsed ts) gains the findings it makes."""
    marks = con.execute(SQL["authority_keys"]).fetchall()
    if not marks:
        return findings, []
    opted = {k for k, is_opted in marks if is_opted}
    keys = sorted({k for k, _ in marks})
    by_key: dict[str, list[Finding]] = {k: [] for k in keys}
    rest = []
    for f in findings:
        (by_key[f.workflow_key] if f.workflow_key in by_key else rest).append(f)
    diagnostics: list[Diagnostic] = []
    for key, events in authority_events(con, keys):
        by_key[key] = _key(key, events, by_key[key], key in opted, diagnostics, stamps)
    out = rest + [f for fs in by_key.values() for f in fs]
    out.sort(key=finding_order)
    return out, diagnostics


def _key(key: str, events: list, findings: list[Finding], opted: bool,
         diagnostics: list[Diagnostic], stamps: dict) -> list[Finding]:
    if opted:
        tracker = KeyAuthority()
        at: dict[tuple[int, Kind], Finding] = {
            (f.place, f.kind): f for f in findings if f.grade is not _TWICE and f.kind in (_ATTEMPT, _COMMIT)}
        judged_at: dict[tuple[int, Kind, Grade], Finding] = {}
        receipts = {f.receipt_place for f in findings if f.receipt_place is not None}
        # Unauthorized attempts that are not stale wait for their resolution, as stale ones do.
        waiting: dict[tuple[int, str | None], list[tuple]] = {}

        def judge(e, verdict, ts, stale=None, resolution=None, receipt=None) -> None:
            f = judged(e, verdict, stale, finding_id, authority_incident_id, resolution, receipt)
            # Effects sharing a seq (an ordering conflict): one finding per grade, on the first in
            # order, as detect.sql picks them (and the live detector reports them).
            if judged_at.setdefault((e.seq, e.kind, f.grade), f) is f:
                stamps[f.id] = ts

        for e, ts in events:
            verdict, notes = tracker.feed(e, ts)
            for n in notes:
                kind = DiagnosticKind(n.kind)
                diagnostics.append(Diagnostic(diagnostic_id(key, kind, n.seq, n.epoch), kind, key,
                                              None if e.observed else n.seq, n.epoch, n.detail,
                                              position=n.position))
            resolved = waiting.pop((e.epoch, e.effect_key), []) if (resolution := resolves(e)) else []
            for a, a_verdict, a_ts in resolved:
                judge(a, a_verdict, a_ts, resolution=resolution, receipt=e)
            if verdict is None or e.kind not in (_ATTEMPT, _COMMIT):
                continue
            stale = at.get((e.seq, e.kind))
            if stale is not None or e.kind is _COMMIT:
                judge(e, verdict, ts, stale)
            elif resolution == "rejected":
                if not resolved and e.seq not in receipts:  # a refusal that resolved nothing is a
                    judge(e, verdict, ts)                   # finding of its own
            else:
                waiting.setdefault((e.epoch, e.effect_key), []).append((e, verdict, ts))
        for attempts in waiting.values():  # never resolved: the attempt's own verdict
            for a, a_verdict, a_ts in attempts:
                judge(a, a_verdict, a_ts)
        replaced = {(s, kind) for s, kind, _ in judged_at}
        findings = [f for f in findings if (f.place, f.kind) not in replaced or f.grade is _TWICE]
        findings += judged_at.values()
    doubles = [(f.effect_key, f.place) for f in findings if f.grade is _TWICE]
    compensations = [(e.effect_key, e.seq) for e, _ in events if e.kind is _COMPENSATED]
    if doubles and compensations:
        taken = compensate(doubles, compensations)
        out = []
        for f in findings:
            if f.grade is _TWICE and f.place in taken:
                c = compensated(f, finding_id)
                stamps[c.id] = stamps.get(f.id)
                f = c
            out.append(f)
        findings = out
    return findings
