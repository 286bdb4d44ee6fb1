"""Lease health's rules (SPEC section 7, revision 3), stated once and engine-free.

The batch engine (``health.sql`` + ``detect/lease/batch.py``, also the Spark engine's, on its
driver) and the live one (``detect/lease/live.py``, the span processor's) measure lease health each
in its own way (window functions over a table, state per key over a stream). What they must agree on is here, as data and
small functions over plain numbers: what counts as a heartbeat attempt, in which order heartbeat
gaps are taken, which evidence comes before a takeover, the timing rule ``L > R*H+J``, and how late
extensions are reported (one diagnostic per group). ``health.sql`` gets ``ATTEMPTS`` as a bound
parameter; the rest of the SQL is pinned to these definitions by ``tests/detect/test_lease_engines.py``,
which runs the batch, live and Spark engines on one table of cases.

Durations are whole milliseconds here; the engines write seconds.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

#: Grouping dimensions used when ``--by`` is not given, each only when some event carries it.
DEFAULT_BY = ("tool", "model", "provider")
#: ``heartbeat`` values that are heartbeat attempts (revision 3): a lost heartbeat is a late
#: attempt, so the gaps that ``H`` and ``J`` are measured over include it. Without it, a lease that
#: is already too short hides its own late heartbeats (they are refused, and never become gaps).
ATTEMPTS = ("ok", "lost")
#: A group needs this many heartbeat gaps before the timing rule is judged.
MIN_GAPS = 3
#: How many leases a ``late_extension`` diagnostic names (the worst, least time left first).
WORST_LEASES = 5


def is_attempt(heartbeat: str | None) -> bool:
    """Whether an event's ``heartbeat`` makes it a heartbeat attempt (``ok`` or ``lost``)."""
    return heartbeat in ATTEMPTS


# Heartbeat gaps: between consecutive attempts of one (workflow key, epoch), by ts. Arrival order,
# seq order and whether the event has a seq at all never matter: only the attempts' ts do. Ties
# need no rule (two attempts at one instant give a gap of 0 either way), and an attempt without ts
# has no place in time and gives no gap.


def heartbeat_gaps(times: Iterable[int | None]) -> list[int]:
    """The heartbeat gaps of one (key, epoch), given its attempts' times (ms, any order)."""
    ordered = sorted(t for t in times if t is not None)
    return [b - a for a, b in zip(ordered, ordered[1:])]


def median(values: Sequence[float]) -> float | None:
    """The median as DuckDB's ``median`` computes it: the mean of the two middle values of an even
    count."""
    ordered = sorted(values)
    n = len(ordered)
    if not n:
        return None
    mid = n // 2
    return float(ordered[mid]) if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def jitter(h: float | None, h_max: float | None) -> float | None:
    """``J`` = the longest gap minus the median gap ``H``."""
    return None if h is None or h_max is None else h_max - h


def threshold(r: int, h: float | None, j: float | None) -> float | None:
    """``R * H + J``: the shortest lease must be above it."""
    return None if h is None or j is None else r * h + j


def at_risk(gaps: int, lease_min: float | None, limit: float | None) -> bool:
    """The timing rule fails: at least ``MIN_GAPS`` gaps and the shortest lease ``L`` at or below
    ``R*H+J`` (the lease revokes a worker that is merely slow)."""
    return gaps >= MIN_GAPS and lease_min is not None and limit is not None and lease_min <= limit


def is_late(remaining: float | None, h: float | None, gaps: int) -> bool:
    """An extension is late when less than one heartbeat interval ``H`` (its group's) was left.
    Judged only where ``H`` is (``MIN_GAPS`` gaps or more): two gaps, one of them a pause before a
    refused heartbeat, are no heartbeat interval, and would call every extension of the log late."""
    return remaining is not None and h is not None and gaps >= MIN_GAPS and remaining < h


# Order relative to a takeover. A placed event (it has a seq, or its key is
# ordered by observation) is before a takeover when its position is lower; an unplaced one (no seq
# in a key ordered by seq, SPEC section 4) has only its ts, and is before the takeover when its ts
# is earlier than the takeover's (an unplaced event without ts is neither). Of the displaced
# owner's evidence before a takeover, the latest is the last placed one, unless an unplaced one has
# a later ts (``latest``). health.sql's takeovers statement and LeaseWatch._takeover apply it.


def latest(placed: tuple[int | None, Any] | None, unplaced: tuple[int | None, Any] | None) -> Any:
    """Of the last placed candidate and the latest unplaced one, each ``(ts, value)`` or None, the
    value that is latest: the placed one unless the unplaced one's ts is later (or the placed one
    has none)."""
    if unplaced is None or unplaced[0] is None:
        return None if placed is None else placed[1]
    if placed is None or placed[0] is None or unplaced[0] > placed[0]:
        return unplaced[1]
    return placed[1]


# Late extensions: one diagnostic per dimension group (revision 3), not one per extension. A lease
# is one (workflow key, epoch); its late extensions are counted, and the worst leases are those
# with the least time left at a late extension.


@dataclass(frozen=True, slots=True)
class LateLease:
    """One lease with late extensions: where its worst one was (``position`` None when that
    extension was unplaced), how many, and the least time left (ms; negative: after it expired)."""

    workflow_key: str
    epoch: int
    worker: str | None
    position: int | None
    extensions: int
    least_left: int

    def order(self) -> tuple:
        return (self.least_left, self.workflow_key, self.epoch)


@dataclass(frozen=True, slots=True)
class LateExtensions:
    """A group's late extensions: how many leases and extensions, the least time left (ms), and the
    ``WORST_LEASES`` worst leases, least time left first."""

    leases: int
    extensions: int
    least_left: int
    worst: tuple[LateLease, ...]


def late_extensions(leases: Iterable[LateLease]) -> LateExtensions | None:
    """One group's late extensions, summed from its leases (None when it has none)."""
    ranked = sorted(leases, key=LateLease.order)
    if not ranked:
        return None
    return LateExtensions(len(ranked), sum(x.extensions for x in ranked), ranked[0].least_left,
                          tuple(ranked[:WORST_LEASES]))


class Timeline:
    """The latest ``capacity`` instants (ms) of one series, each with a value, in ts order: what an
    incremental engine keeps of one epoch's heartbeat attempts or lease grants so that arrival
    order never decides which one came before which. Not thread-safe."""

    __slots__ = ("times", "values", "capacity")

    def __init__(self, capacity: int = 64) -> None:
        self.times: list[int] = []
        self.values: list[Any] = []
        self.capacity = capacity

    def insert(self, t: int, value: Any = None) -> tuple[int, Any] | None:
        """Add one instant; return the one before it by ts (the latest at or before ``t`` already
        held), or None."""
        i = bisect.bisect_right(self.times, t)
        before = (self.times[i - 1], self.values[i - 1]) if i else None
        self.times.insert(i, t)
        self.values.insert(i, value)
        if len(self.times) > self.capacity:  # the oldest by ts goes: memory stays bounded
            del self.times[0], self.values[0]
        return before

    def last_before(self, t: int) -> tuple[int, Any] | None:
        """The latest instant strictly before ``t``, with its value, or None."""
        i = bisect.bisect_left(self.times, t)
        return (self.times[i - 1], self.values[i - 1]) if i else None

    def gaps(self) -> list[int]:
        return heartbeat_gaps(self.times)
