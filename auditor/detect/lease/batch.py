"""Lease health (SPEC section 7): is the lease configuration itself safe?

Seed 000's point: a chart of running jobs tells an operator nothing; ownership does. From the same
events the detector reads, this stage measures per workflow key and per dimension group (``tool``,
``model``, ``provider`` from ``attrs`` by default) how many leases were granted, reclaimed and let
expire, how many extensions failed, the heartbeat period ``H`` and jitter ``J``, the lease length
``L``, and checks the timing rule ``L > R * H + J``. The numbers are computed in DuckDB
(``health.sql``) over the keys that carry lease evidence (a ``lease_until`` or a ``heartbeat``);
this module hands them back as data, with the diagnostics they call for.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from typing import Any

import duckdb

from ...rules import lease as lease_rules
from ...core.errors import AuditError
from ...rules.lease import DEFAULT_BY, MIN_GAPS, LateExtensions, LateLease
from ...core.model import Diagnostic, DiagnosticKind
from ...rules import diagnostic_id, diagnostic_order, stable_id
from ...core.sql import statements
from .facts import (Group, GroupHealth, KeyHealth, LeaseHealth, LeaseMetrics, Takeover, instant_text, label,
                    seconds)
from ...core.fields import EPOCH_OPTIONAL_KINDS

SQL = statements("detect/lease/health.sql")


#: What each lease-health diagnostic asks the operator to change.
ADVICE = {
    DiagnosticKind.LEASE_TIMING_RISK: (
        "lengthen the lease above R*H+J (seed 000: heartbeats every 30 s, one miss tolerated, 20 s of "
        "jitter: 90 s is a sensible buffer), or heartbeat more often, or make the heartbeat path steadier"),
    DiagnosticKind.LATE_EXTENSION: "extend earlier: with at least one heartbeat interval and a retry's reserve left",
    DiagnosticKind.TAKEOVER_BEFORE_EXPIRY: (
        "check the coordinator's reclaim condition (lease_until < now() on the coordinator's clock) "
        "and clock agreement between coordinator and workers"),
    DiagnosticKind.EFFECT_AFTER_LEASE_EXPIRY: (
        "a worker that cannot confirm its lease must start no new external action: check the lease "
        "before each effect, and fence the sink"),
}


def _path(name: str) -> str:
    """The JSON path of one attrs member, quoted so any name is a member name, never syntax."""
    return "$." + json.dumps(name)


def check_options(by: Iterable[str] | None, heartbeat_misses: int) -> tuple[str, ...] | None:
    """``by`` as a tuple (None: the defaults); ``AuditError`` for a blank name or a bad ``R``."""
    if isinstance(heartbeat_misses, bool) or not isinstance(heartbeat_misses, int) or heartbeat_misses < 0:
        raise AuditError(f"--heartbeat-misses is {heartbeat_misses!r}, expected a whole number of "
                         "heartbeats one is willing to miss (0 or more; default 1)")
    if by is None:
        return None
    if isinstance(by, str):
        by = (by,)
    names = tuple(by)
    for name in names:
        if not isinstance(name, str) or not name.strip():
            raise AuditError(f"--by {name!r}: expected the name of an attrs member, e.g. --by tool")
    return tuple(dict.fromkeys(names))  # a dimension named twice is one dimension


def lease_health(con: duckdb.DuckDBPyConnection, by: Iterable[str] | None = None,
                 heartbeat_misses: int = 1) -> LeaseHealth:
    """Measure lease health over the ``events`` table of ``con`` (the store's connection).

    ``by`` names the ``attrs`` members to group by (``None``: ``tool``, ``model``, ``provider``,
    those that some event with lease evidence carries); ``heartbeat_misses`` is ``R`` in
    ``L > R * H + J``. Blocking; creates and drops ``lh_*`` temporary tables on ``con``.
    Raises ``AuditError`` for a bad option.
    """
    chosen = check_options(by, heartbeat_misses)
    r = heartbeat_misses
    try:
        con.execute(SQL["lease_events"])
        (evidence,) = con.execute("SELECT count(*) FROM lh_events").fetchone()
        if not evidence:
            return LeaseHealth(chosen or (), r, (), ())
        if chosen is None:
            (present,) = con.execute(SQL["presence"], {"paths": [_path(d) for d in DEFAULT_BY]}).fetchone()
            chosen = tuple(d for i, d in enumerate(DEFAULT_BY, 1) if i in set(present or ()))
        con.execute(SQL["keys"], {"paths": [_path(d) for d in chosen]})
        con.execute(SQL["takeovers"], {"recorded": sorted(EPOCH_OPTIONAL_KINDS)})
        con.execute(SQL["gaps"], {"attempts": list(lease_rules.ATTEMPTS)})
        for name in ("grants", "key_metrics", "group_metrics"):
            con.execute(SQL[name])
        groups = []
        anchors: dict[Group, tuple[str, int | None, int]] = {}
        for row in con.execute(SQL["group_rows"]).fetchall():
            dims, keys, *numbers, at_k, at_s, at_epoch, gaps, ages = row
            group = tuple(zip(chosen, dims))
            m = _metrics(tuple(numbers))
            limit = lease_rules.threshold(r, m.heartbeat_interval_median, m.heartbeat_jitter)
            limit = None if limit is None else round(limit, 3)
            at_risk = lease_rules.at_risk(m.heartbeat_gaps, m.lease_min, limit)
            groups.append(GroupHealth(group, int(keys), m, limit, at_risk, tuple(seconds(g) for g in gaps),
                                      tuple(seconds(a) for a in ages)))
            if at_k is not None:
                anchors[group] = (at_k, _position(at_s), int(at_epoch))
        # Riskiest first: at risk, then the smallest margin L - (R*H+J), then the most expired
        # leases, then the label, so the order never depends on the engine's.
        groups.sort(key=lambda g: (not g.at_risk, _inf(g.margin), -g.metrics.expired_leases, g.label))
        takeovers: dict[str, list[Takeover]] = {}
        for k, s, epoch, worker, displaced, displaced_worker, reclaim, rem, age, until in con.execute(
                SQL["takeover_rows"]).fetchall():
            takeovers.setdefault(k, []).append(Takeover(
                int(s), int(epoch), worker, int(displaced), displaced_worker, bool(reclaim), seconds(rem),
                seconds(age), instant_text(until)))
        keys = tuple(KeyHealth(k, tuple(zip(chosen, dims)), _metrics(tuple(rest)), tuple(takeovers.get(k, ())))
                     for k, dims, *rest in con.execute(SQL["key_rows"]).fetchall())
        group_of = {k.workflow_key: k.group for k in keys}
        late = _late(con, chosen, {g.group: g for g in groups})
        diagnostics = _risks(groups, anchors, r) + late + _event_diagnostics(con, group_of)
        keys, diagnostics = _placed(con, keys, diagnostics)
    finally:
        con.execute(SQL["drop"])
    diagnostics.sort(key=diagnostic_order)
    return LeaseHealth(chosen, r, tuple(groups), keys, tuple(diagnostics))


def _placed(con: duckdb.DuckDBPyConnection, keys: tuple[KeyHealth, ...],
            diagnostics: list[Diagnostic]) -> tuple[tuple[KeyHealth, ...], list[Diagnostic]]:
    """``keys`` and ``diagnostics`` with what SPEC revision 3 shows of a place: its seq only where
    the key is ordered by seq (null where by observation: never an invented seq) and its global
    position. Lease health works in places (the rules' order); ids keep hashing them."""
    wanted = {(d.workflow_key, d.seq) for d in diagnostics if d.seq is not None}
    wanted |= {(k.workflow_key, t.seq) for k in keys for t in k.takeovers}
    for d in diagnostics:
        for x in (d.numbers or {}).get("worst", ()):
            if x.get("seq") is not None:
                wanted.add((x["workflow_key"], x["seq"]))
    if not wanted:
        return keys, diagnostics
    ks, places = zip(*sorted(wanted))
    at = {(k, s): (seq, pos) for k, s, seq, pos in
          con.execute(SQL["places"], {"keys": list(ks), "places": list(places)}).fetchall()}
    out = []
    for d in diagnostics:
        numbers = d.numbers
        if numbers and "worst" in numbers:
            numbers = {**numbers, "worst": [{**x, "seq": at.get((x["workflow_key"], x["seq"]), (None, None))[0],
                                             "position": at.get((x["workflow_key"], x["seq"]), (None, None))[1]}
                                            for x in numbers["worst"]]}
        seq, pos = at.get((d.workflow_key, d.seq), (None, None)) if d.seq is not None else (None, d.position)
        out.append(dataclasses.replace(d, seq=seq, position=pos, numbers=numbers))
    keys = tuple(dataclasses.replace(k, takeovers=tuple(
        dataclasses.replace(t, seq=at.get((k.workflow_key, t.seq), (None, None))[0],
                            position=at.get((k.workflow_key, t.seq), (None, None))[1])
        for t in k.takeovers)) if k.takeovers else k for k in keys)
    return keys, out


def _metrics(row: tuple) -> LeaseMetrics:
    (leases, reclaims, expired, failures, gaps, h, h_max, lmin, lmed, rmin, amed, amax) = row
    return LeaseMetrics(int(leases or 0), int(reclaims or 0), int(expired or 0), int(failures or 0),
                        int(gaps or 0), seconds(h), seconds(h_max), seconds(lmin), seconds(lmed),
                        seconds(rmin), seconds(amed), seconds(amax))


def _inf(x: float | None) -> float:
    return float("inf") if x is None else x


def _position(s: Any) -> int | None:
    """A position from the SQL: None for an unplaced event (no seq in a key ordered by seq)."""
    return None if s is None else int(s)


def _diagnostic(kind: DiagnosticKind, key: str, position: int | None, epoch: int | None, detail: str,
                group: Group, numbers: dict[str, Any]) -> Diagnostic:
    return Diagnostic(diagnostic_id(key, kind, position, epoch), kind, key, position, epoch,
                      f"{detail}; {ADVICE[kind]}", dict(group), numbers)


def _risks(groups: list[GroupHealth], anchors: dict[Group, tuple[str, int | None, int]],
           r: int) -> list[Diagnostic]:
    """One ``lease_timing_risk`` per group at risk, at the event that granted its shortest lease."""
    out = []
    for g in groups:
        if not g.at_risk or g.group not in anchors:
            continue
        m = g.metrics
        h, j, lmin = m.heartbeat_interval_median, m.heartbeat_jitter, m.lease_min
        key, position, epoch = anchors[g.group]
        out.append(_diagnostic(
            DiagnosticKind.LEASE_TIMING_RISK, key, position, epoch,
            f"{g.label}: the shortest lease L = {_s(lmin)} is not above R*H+J = {r} x {_s(h)} + {_s(j)} "
            f"= {_s(g.threshold)} (H the median of {m.heartbeat_gaps} heartbeat gaps, J = max - median): "
            f"an ordinary delay revokes a worker that is still running (shortest lease granted here)",
            g.group, {"L": lmin, "R": r, "H": h, "J": j, "threshold": g.threshold, "gaps": m.heartbeat_gaps}))
    return out


def _late(con: duckdb.DuckDBPyConnection, chosen: tuple[str, ...],
          groups: dict[Group, GroupHealth]) -> list[Diagnostic]:
    """One ``late_extension`` per group with late extensions (SPEC section 7, revision 3), at the
    worst one: how many leases and extensions, the least time left, the worst leases."""
    leases: dict[Group, list[LateLease]] = {}
    rows = con.execute(SQL["late_leases"], {"min_gaps": MIN_GAPS}).fetchall()
    for dims, k, epoch, n, least, at_s, worker in rows:
        leases.setdefault(tuple(zip(chosen, dims)), []).append(
            LateLease(k, int(epoch), worker, _position(at_s), int(n), int(least)))
    out = []
    for group, found in leases.items():
        late = lease_rules.late_extensions(found)
        h = groups[group].metrics.heartbeat_interval_median
        worst = late.worst[0]
        out.append(_diagnostic(DiagnosticKind.LATE_EXTENSION, worst.workflow_key, worst.position, worst.epoch,
                               _late_detail(group, late, h), group, _late_numbers(late, h)))
    return out


def _left(ms: int) -> str:
    x = seconds(ms)
    return f"{_s(x)} left" if x >= 0 else f"{_s(-x)} after it had expired"


def _late_detail(group: Group, late: LateExtensions, h: float | None) -> str:
    worst = late.worst[0]
    n, leases = late.extensions, late.leases
    return (f"{label(group)}: {n} extension{'s' * (n != 1)} in {leases} lease{'s' * (leases != 1)} came with less "
            f"than one heartbeat interval (H = {_s(h)}) left; the least: {_left(late.least_left)}, by epoch "
            f"{worst.epoch} ({worst.worker}) of {worst.workflow_key}")


def _late_numbers(late: LateExtensions, h: float | None) -> dict[str, Any]:
    return {"leases": late.leases, "extensions": late.extensions, "least_left_s": seconds(late.least_left), "H": h,
            "worst": [{"workflow_key": x.workflow_key, "epoch": x.epoch, "worker": x.worker, "seq": x.position,
                       "extensions": x.extensions, "least_left_s": seconds(x.least_left)} for x in late.worst]}


def _event_diagnostics(con: duckdb.DuckDBPyConnection, group_of: dict[str, Group]) -> list[Diagnostic]:
    out = []
    for kind, k, s, epoch, worker, a, b, until, effect_key, pos in con.execute(SQL["diagnostic_rows"]).fetchall():
        kind, s, a = DiagnosticKind(kind), _position(s), seconds(a)
        owner = f"epoch {epoch} ({worker})"
        if kind is DiagnosticKind.TAKEOVER_BEFORE_EXPIRY:
            detail = (f"epoch {int(b)} took over while the lease of {owner} still had {_s(a)} to run "
                      f"(until {instant_text(until)})")
            numbers = {"remaining_s": a, "current_epoch": int(b)}
        else:
            detail = (f"{owner} attempted {effect_key} {_s(a)} after its own lease expired "
                      f"(at {instant_text(until)}; by ts, so confidence medium)")
            numbers = {"after_expiry_s": a}
        if s is None:  # an unplaced attempt (SPEC rev 3.1): its global position, never a seq
            detail = detail.replace(f"attempted {effect_key} ", f"attempted {effect_key} (unplaced: position {pos}, no seq) ", 1)
            d = _diagnostic(kind, k, None, epoch, detail, group_of.get(k, ()), numbers)
            d = dataclasses.replace(d, id=stable_id("d-", k, str(kind), "position", int(pos), epoch), position=int(pos))
        else:
            d = _diagnostic(kind, k, s, epoch, detail, group_of.get(k, ()), numbers)
        out.append(d)
    return out


def _s(x: float | None) -> str:
    return "?" if x is None else f"{x:g} s"
