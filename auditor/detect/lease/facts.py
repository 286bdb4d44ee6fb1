"""Lease health as data (SPEC section 7): the metrics of a key or a dimension group, its
takeovers, and the whole measurement a result carries (``LeaseHealth``). Built by ``batch``,
rendered by every renderer; seconds rounded to the millisecond, so documents stay byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ...core.model import Diagnostic
from ...rules import lease as lease_rules

#: A dimension group: ``(("tool", "browser"), ("model", None))``.
Group = tuple[tuple[str, str | None], ...]


def seconds(ms: float | int | None) -> float | None:
    """Milliseconds as seconds, rounded to the millisecond: the document stays byte-identical."""
    return None if ms is None else round(float(ms) / 1000.0, 3)


@dataclass(frozen=True, slots=True)
class LeaseMetrics:
    """SPEC section 7's metrics over one workflow key or one group of keys; durations in seconds.

    ``None`` where the evidence is missing: no heartbeat gap, no ``lease_until``, no ``ts``.
    """

    leases: int
    reclaims: int
    expired_leases: int
    extension_failures: int
    heartbeat_gaps: int
    heartbeat_interval_median: float | None   # H
    heartbeat_interval_max: float | None
    lease_min: float | None                   # L (the minimum decides the rule)
    lease_median: float | None
    remaining_at_extension_min: float | None
    heartbeat_age_at_takeover_median: float | None
    heartbeat_age_at_takeover_max: float | None

    @property
    def heartbeat_jitter(self) -> float | None:
        """``J`` = maximum gap - median gap."""
        j = lease_rules.jitter(self.heartbeat_interval_median, self.heartbeat_interval_max)
        return None if j is None else round(j, 3)

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


def label(group: Group) -> str:
    """``tool=browser, model=m-large``; ``all keys`` without dimensions; ``-`` for a missing value."""
    return ", ".join(f"{k}={'-' if v is None else v}" for k, v in group) or "all keys"


@dataclass(frozen=True, slots=True)
class GroupHealth:
    """One dimension group (``{"tool": "browser"}``; ``{}`` when no dimension is used).

    ``threshold`` is ``R * H + J``; ``at_risk`` says the rule fails: at least ``MIN_GAPS`` heartbeat
    gaps and the shortest lease ``L`` at or below the threshold. ``gaps`` holds every heartbeat gap
    of the group and ``takeover_ages`` every heartbeat age at a takeover, sorted (the chart draws
    them; the JSON document's figures summarize them).
    """

    group: Group
    keys: int
    metrics: LeaseMetrics
    threshold: float | None
    at_risk: bool
    gaps: tuple[float, ...]
    takeover_ages: tuple[float, ...] = ()

    @property
    def label(self) -> str:
        return label(self.group)

    @property
    def margin(self) -> float | None:
        """``L - (R*H+J)`` in seconds: how far the shortest lease is above the threshold."""
        if self.metrics.lease_min is None or self.threshold is None:
            return None
        return round(self.metrics.lease_min - self.threshold, 3)

    def to_dict(self) -> dict[str, Any]:
        return {"group": dict(self.group), "keys": self.keys, **self.metrics.to_dict(),
                "threshold_s": self.threshold, "margin_s": self.margin, "at_risk": self.at_risk}


@dataclass(frozen=True, slots=True)
class Takeover:
    """One acquisition that displaced a lower epoch, as lease health sees it.

    ``remaining_s`` is the displaced owner's last ``lease_until`` minus the takeover's ``ts``:
    negative when the lease had expired that long before (``expired``), positive for a takeover
    before expiry. ``heartbeat_age_s`` is the age of the displaced owner's last ``heartbeat=ok``
    then. ``reclaim``: the displaced epoch had shown evidence of its own (it was working).
    """

    seq: int | None  # null where the key is ordered by observation (SPEC rev 3)
    epoch: int
    worker: str
    displaced_epoch: int
    displaced_worker: str | None
    reclaim: bool
    remaining_s: float | None
    heartbeat_age_s: float | None
    displaced_lease_until: str | None
    position: int | None = None  # global observation position (SPEC rev 3)

    @property
    def expired(self) -> bool | None:
        return None if self.remaining_s is None else self.remaining_s <= 0

    def to_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "position": self.position, "epoch": self.epoch, "worker": self.worker,
                "displaced_epoch": self.displaced_epoch, "displaced_worker": self.displaced_worker,
                "reclaim": self.reclaim, "expired": self.expired,
                "displaced_lease_until": self.displaced_lease_until, "remaining_s": self.remaining_s,
                "heartbeat_age_s": self.heartbeat_age_s}


@dataclass(frozen=True, slots=True)
class KeyHealth:
    workflow_key: str
    group: Group
    metrics: LeaseMetrics
    takeovers: tuple[Takeover, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"workflow_key": self.workflow_key, "group": dict(self.group), **self.metrics.to_dict(),
                "takeovers": [t.to_dict() for t in self.takeovers]}


@dataclass(frozen=True, slots=True)
class LeaseHealth:
    """The section: ``groups`` riskiest first, ``keys`` (those with lease evidence) by key, and
    the diagnostics (``model.Diagnostic``, in the document's order; the result lists them with
    the detector's)."""

    by: tuple[str, ...]
    heartbeat_misses: int
    groups: tuple[GroupHealth, ...]
    keys: tuple[KeyHealth, ...]
    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def at_risk(self) -> list[GroupHealth]:
        return [g for g in self.groups if g.at_risk]

    def to_dict(self) -> dict[str, Any]:
        return {"by": list(self.by), "heartbeat_misses": self.heartbeat_misses,
                "groups": [g.to_dict() for g in self.groups], "keys": [k.to_dict() for k in self.keys]}


EMPTY = LeaseHealth((), 1, (), ())


def instant_text(t: datetime | None) -> str | None:
    """An instant as RFC 3339 UTC, to the millisecond when it has one."""
    if t is None:
        return None
    t = t.astimezone(timezone.utc)
    ms = t.microsecond // 1000
    return t.strftime("%Y-%m-%dT%H:%M:%S") + (f".{ms:03d}Z" if ms else "Z")
