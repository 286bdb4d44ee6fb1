"""Lease health (SPEC section 7): is the lease configuration itself safe?

Seed 000's point: a chart of running jobs tells an operator nothing; ownership does. From the same
events the detector reads, this stage measures per workflow key and per dimension group (``tool``,
``model``, ``provider`` from ``attrs`` by default) how many leases were granted, reclaimed and let
expire, how many extensions failed, the heartbeat period ``H`` and jitter ``J``, the lease length
``L``, and checks the timing rule ``L > R * H + J``. The numbers are computed in DuckDB
(``health.sql``); this module hands them back as data, with the diagnostics they call for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import duckdb

from .sql import statements

SQL = statements("health.sql")

#: Grouping dimensions used when ``--by`` is not given, each only when some event carries it.
DEFAULT_BY = ("tool", "model", "provider")

#: What each lease-health diagnostic asks the operator to change.
ADVICE = {
    "lease_timing_risk": ("lengthen the lease above R*H+J (seed 000: heartbeats every 30 s, one miss "
                          "tolerated, 20 s of jitter: 90 s is a sensible buffer), or heartbeat more "
                          "often, or make the heartbeat path steadier"),
    "late_extension": "extend earlier: with at least one heartbeat interval and a retry's reserve left",
    "takeover_before_expiry": ("check the coordinator's reclaim condition (lease_until < now() on the "
                               "coordinator's clock) and clock agreement between coordinator and workers"),
    "effect_after_lease_expiry": ("a worker that cannot confirm its lease must start no new external "
                                  "action: check the lease before each effect, and fence the sink"),
}


def _r(x: float | None) -> float | None:
    """Seconds to the millisecond: the document stays byte-identical across platforms."""
    return None if x is None else round(float(x), 3)


@dataclass(frozen=True, slots=True)
class LeaseMetrics:
    """SPEC section 7's metrics over one workflow key or one group of keys; durations in seconds."""

    leases: int
    reclaims: int
    expired_leases: int
    extension_failures: int
    heartbeat_gaps: int
    heartbeat_interval_median: float | None   # H
    heartbeat_interval_max: float | None
    heartbeat_jitter: float | None            # J = max - median
    lease_min: float | None                   # L (the minimum decides the rule)
    lease_median: float | None
    remaining_at_extension_min: float | None
    heartbeat_age_at_takeover_median: float | None
    heartbeat_age_at_takeover_max: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "leases": self.leases, "reclaims": self.reclaims, "expired_leases": self.expired_leases,
            "extension_failures": self.extension_failures,
            "heartbeat_interval_s": {"gaps": self.heartbeat_gaps, "median": self.heartbeat_interval_median,
                                     "max": self.heartbeat_interval_max, "jitter": self.heartbeat_jitter},
            "lease_s": {"min": self.lease_min, "median": self.lease_median},
            "remaining_at_extension_s": {"min": self.remaining_at_extension_min},
            "heartbeat_age_at_takeover_s": {"median": self.heartbeat_age_at_takeover_median,
                                            "max": self.heartbeat_age_at_takeover_max},
        }


@dataclass(frozen=True, slots=True)
class GroupHealth:
    """One dimension group (``{"tool": "browser"}``; ``{}`` when the log has no dimension)."""

    group: tuple[tuple[str, str | None], ...]
    keys: int
    metrics: LeaseMetrics
    threshold: float | None        # R * H + J
    at_risk: bool                  # at least 3 gaps and L (minimum) <= R * H + J
    gaps: tuple[float, ...]        # every heartbeat gap of the group, sorted: the chart's strip

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={'-' if v is None else v}" for k, v in self.group) or "all keys"

    def to_dict(self) -> dict[str, Any]:
        return {"group": dict(self.group), "keys": self.keys, **self.metrics.to_dict(),
                "threshold_s": self.threshold, "at_risk": self.at_risk}


@dataclass(frozen=True, slots=True)
class KeyHealth:
    workflow_key: str
    group: tuple[tuple[str, str | None], ...]
    metrics: LeaseMetrics

    def to_dict(self) -> dict[str, Any]:
        return {"workflow_key": self.workflow_key, "group": dict(self.group), **self.metrics.to_dict()}


@dataclass(frozen=True, slots=True)
class HealthDiagnostic:
    """A lease-health diagnostic: ``workflow_key``/``seq``/``epoch`` for an event's, ``group`` for a
    group's; ``numbers`` are the figures it rests on, ``detail`` says them and what to change."""

    kind: str
    workflow_key: str | None
    seq: int | None
    epoch: int | None
    group: tuple[tuple[str, str | None], ...] | None
    numbers: dict[str, float | int | None]
    detail: str


@dataclass(frozen=True, slots=True)
class LeaseHealth:
    by: tuple[str, ...]
    heartbeat_misses: int
    groups: tuple[GroupHealth, ...]          # riskiest first
    keys: tuple[KeyHealth, ...]              # keys with lease evidence, sorted by key
    diagnostics: tuple[HealthDiagnostic, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"by": list(self.by), "heartbeat_misses": self.heartbeat_misses,
                "groups": [g.to_dict() for g in self.groups], "keys": [k.to_dict() for k in self.keys]}


def _path(name: str) -> str:
    """The JSON path of one attrs member, quoted so any name is a member name, never syntax."""
    return "$." + json.dumps(name)


def _metrics(row: tuple) -> LeaseMetrics:
    (leases, reclaims, expired, failures, gaps, h, h_max, jitter, lmin, lmed, rmin, amed, amax) = row
    return LeaseMetrics(int(leases or 0), int(reclaims or 0), int(expired or 0), int(failures or 0),
                        int(gaps or 0), _r(h), _r(h_max), _r(jitter), _r(lmin), _r(lmed), _r(rmin),
                        _r(amed), _r(amax))


def lease_health(con: duckdb.DuckDBPyConnection, by: tuple[str, ...] | None = None,
                 heartbeat_misses: int = 1) -> LeaseHealth:
    """Measure lease health over the ``events`` table of ``con`` (the store's connection).

    ``by`` names the ``attrs`` members to group by (``None``: ``tool``, ``model``, ``provider``,
    those that some event carries); ``heartbeat_misses`` is ``R`` in ``L > R * H + J``.
    Blocking; creates and drops ``lh_*`` temporary tables on ``con``.
    """
    if heartbeat_misses < 0:
        raise ValueError("heartbeat_misses is the number of heartbeats one is willing to miss: 0 or more")
    if by is None:
        paths = [_path(d) for d in DEFAULT_BY]
        (present,) = con.execute(SQL["presence"], {"paths": paths}).fetchone()
        by = tuple(d for i, d in enumerate(DEFAULT_BY, 1) if i in set(present or ()))
    by = tuple(by)
    params = {"paths": [_path(d) for d in by]}
    try:
        con.execute(SQL["keys"], params)
        for name in ("takeovers", "gaps", "grants", "key_metrics"):
            con.execute(SQL[name])
        con.execute(SQL["group_metrics"], [heartbeat_misses])
        groups = []
        for row in con.execute(SQL["group_rows"]).fetchall():
            dims, keys, *numbers, threshold, at_risk = row
            gaps = tuple(_r(g) for (g,) in con.execute(SQL["gap_rows"], [dims]).fetchall())
            groups.append(GroupHealth(tuple(zip(by, dims)), int(keys), _metrics(tuple(numbers)),
                                      _r(threshold), bool(at_risk), gaps))
        # Riskiest first: at risk, then the smallest margin L - (R*H+J), then the most expired
        # leases, then the label, so the order never depends on the engine's.
        groups.sort(key=lambda g: (not g.at_risk, _margin(g), -g.metrics.expired_leases, g.label))
        keys = tuple(KeyHealth(k, tuple(zip(by, dims)), _metrics(tuple(rest)))
                     for k, dims, *rest in con.execute(SQL["key_rows"]).fetchall())
        diagnostics = _diagnostics(con, groups, heartbeat_misses)
    finally:
        con.execute(SQL["drop"])
    return LeaseHealth(by, heartbeat_misses, tuple(groups), keys, diagnostics)


def _margin(g: GroupHealth) -> float:
    if g.metrics.lease_min is None or g.threshold is None:
        return float("inf")
    return g.metrics.lease_min - g.threshold


def _diagnostics(con: duckdb.DuckDBPyConnection, groups: list[GroupHealth],
                 r: int) -> tuple[HealthDiagnostic, ...]:
    out = []
    for g in groups:
        if not g.at_risk:
            continue
        m = g.metrics
        h, j, lmin = m.heartbeat_interval_median, m.heartbeat_jitter, m.lease_min
        out.append(HealthDiagnostic(
            "lease_timing_risk", None, None, None, g.group,
            {"L": lmin, "R": r, "H": h, "J": j, "threshold": g.threshold, "gaps": m.heartbeat_gaps},
            f"{g.label}: lease {_s(lmin)} <= R*H+J = {r} x {_s(h)} + {_s(j)} = {_s(g.threshold)} "
            f"(over {m.heartbeat_gaps} heartbeat gaps): an ordinary delay revokes a worker that is "
            f"still running; {ADVICE['lease_timing_risk']}"))
    for kind, k, s, epoch, a, b in con.execute(SQL["diagnostic_rows"]).fetchall():
        a, b = _r(a), _r(b)
        if kind == "late_extension":
            numbers = {"remaining_s": a, "H": b}
            left = (f"with {_s(a)} left" if a is None or a >= 0
                    else f"{_s(-a)} after it had expired")
            detail = (f"epoch {epoch} extended its lease {left}, less than one heartbeat interval "
                      f"(H = {_s(b)}); {ADVICE[kind]}")
        elif kind == "takeover_before_expiry":
            numbers = {"remaining_s": a, "epoch": b}
            detail = (f"epoch {b} took over while epoch {epoch}'s lease still had {_s(a)} to run; "
                      f"{ADVICE[kind]}")
        else:
            numbers = {"after_expiry_s": a}
            detail = (f"epoch {epoch} attempted an effect {_s(a)} after its own lease expired "
                      f"(by ts, so confidence medium); {ADVICE[kind]}")
        out.append(HealthDiagnostic(kind, k, s, epoch, None, numbers, detail))
    out.sort(key=lambda d: (d.workflow_key or "", d.seq if d.seq is not None else -1, d.kind))
    return tuple(out)


def _s(x: float | None) -> str:
    if x is None:
        return "?"
    return f"{x:g} s"
