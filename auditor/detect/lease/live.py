"""Lease health live (SPEC section 7): what ``health.sql`` measures over a store, measured one event at
a time for the span processor's OTel metrics.

``LeaseWatch`` follows the workflow keys that carry lease evidence (a ``lease_until`` or a
``heartbeat``); every other key costs nothing. Fed a tracked key's events (placed ones in
authoritative order, as the processor's reorder window releases them; unplaced ones, without seq in
a key ordered by seq, whenever they come), it returns the measurements of section 7 as data: the
lease left at each extension and takeover, the heartbeat gap at each heartbeat attempt and the
heartbeat age at each takeover, and the expired leases, failed extensions and reclaims, each with
the key's dimensions (``tool``, ``model``, ``provider`` from ``attrs`` by default). Durations come
from the events' own ``ts`` and ``lease_until``, never from the processor's clock, so late evidence
measures what happened, as the batch report does; what counts as an attempt, the order of gaps
(by ts) and what comes before a takeover are ``lease_rules``', the batch engine's too.

Each epoch keeps its last ``KEPT`` attempts and grants by ts, so an attempt that arrives after a
later one is still measured against the one before it in time; a gap measured before it arrived
is not taken back (a histogram only adds), so the live gaps equal the batch's exactly when an
epoch's attempts arrive in ts order, as the reorder window releases a seq-ordered log's.
Not thread-safe: one feeder (the live audit's worker). Memory is bounded by ``max_keys``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any, NamedTuple

from ...rules import lease as lease_rules
from ...rules.lease import DEFAULT_BY, Timeline
from ...core.model import Event, Kind
from ...core.instants import when
from ...core.fields import EPOCH_OPTIONAL_KINDS

#: Where a duration was measured: the ``auditor.measured_at`` attribute of the two histograms.
EXTENSION, HEARTBEAT, TAKEOVER = "extension", "heartbeat", "takeover"
MEASURED_AT = "auditor.measured_at"
#: Epochs remembered per key: the current owner and the few it displaced (whose late evidence
#: still counts as failed extensions).
EPOCHS_PER_KEY = 4
#: Heartbeat attempts and grants kept per epoch, the latest by ts: how far back in time a late
#: arrival is still put in its place.
KEPT = 4
#: Where an event without ts goes among the grants: first, as the batch orders them (NULLS FIRST).
UNTIMED = -(2 ** 62)

_ACQ = Kind.LEASE_ACQUIRED
_RECORDED = frozenset(Kind(k) for k in EPOCH_OPTIONAL_KINDS)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)


class Measurement(NamedTuple):
    """One section 7 measurement: ``metric`` is ``remaining``, ``heartbeat_age`` (seconds) or
    ``expired``, ``extension_failure``, ``reclaim`` (counts of 1); ``attributes`` are the key's
    dimensions, plus ``auditor.measured_at`` for the durations (``heartbeat_age`` at a heartbeat
    is the gap to the epoch's previous attempt)."""

    metric: str
    value: float
    attributes: dict[str, str]


class _Epoch:
    __slots__ = ("beats", "grants", "placed_until", "placed_ok", "unplaced_until", "unplaced_ok", "evidence")

    def __init__(self) -> None:
        self.beats = Timeline(KEPT)     # heartbeat attempts by ts (ms)
        self.grants = Timeline(KEPT)    # (ts, lease_until) of grants and extensions by ts (ms)
        self.placed_until = None        # (ts, lease_until) of the last placed grant or extension
        self.placed_ok = None           # (ts, ts) of the last placed heartbeat=ok
        self.unplaced_until = None      # Timeline of unplaced (ts, lease_until), made when needed
        self.unplaced_ok = None         # Timeline of unplaced heartbeat=ok, made when needed
        self.evidence = False           # any event of its own: a takeover of it is a reclaim


class _Key:
    __slots__ = ("dims", "epochs", "highest")

    def __init__(self) -> None:
        self.dims: dict[str, str] = {}
        self.epochs: dict[int, _Epoch] = {}
        self.highest: int | None = None  # the highest epoch acquired by a placed acquisition


def ms_of(ts: Any) -> int | None:
    """An event's ``ts`` (RFC 3339 or epoch text, OTel's nanoseconds, a datetime) as whole
    milliseconds since the epoch, the sub-millisecond part dropped as the store drops it."""
    if ts is None:
        return None
    if type(ts) is int:
        return ts // 1_000_000
    t = when(ts)
    return None if t is None else (t - _EPOCH) // _MS


class LeaseWatch:
    """Section 7's measurements, incrementally, for the keys ``track`` was called with."""

    def __init__(self, by: Iterable[str] | None = None, max_keys: int = 100_000) -> None:
        self.by = tuple(DEFAULT_BY if by is None else by)
        self.max_keys = max_keys
        self.keys: OrderedDict[str, _Key] = OrderedDict()
        self.evicted_keys = 0

    @staticmethod
    def evidence(event: Any) -> bool:
        """Whether ``event`` carries lease evidence (the typed shortcut's events never do)."""
        return type(event) is Event and (event.lease_until is not None or event.heartbeat is not None)

    def track(self, key: str) -> None:
        """Follow ``key`` from now on (its events still waiting to be fed included)."""
        if key in self.keys:
            return
        if len(self.keys) >= self.max_keys:
            self.keys.popitem(last=False)
            self.evicted_keys += 1
        self.keys[key] = _Key()

    def feed(self, event: Any, highest: int | None = None) -> list[Measurement]:
        """Apply one event of a tracked key; ``highest`` is the highest epoch the key had acquired
        before it (the live detector's, read before the detector is fed; None: the watch's own).
        An event with seq None is unplaced: it never takes over, and before a takeover it counts
        by its ts (``lease_rules``: order relative to a takeover)."""
        st = self.keys.get(event.workflow_key)
        if st is None:
            return []
        self.keys.move_to_end(event.workflow_key)
        attrs = getattr(event, "attrs", None)
        if attrs and len(st.dims) < len(self.by):
            for d in self.by:
                if d not in st.dims and attrs.get(d) is not None:
                    st.dims[d] = _text(attrs[d])
        p, kind = event.epoch, event.kind
        if p is None or kind in _RECORDED:
            return []
        placed = event.seq is not None
        ts = ms_of(event.ts)
        until_at = getattr(event, "lease_until", None)
        until = None if until_at is None else (until_at - _EPOCH) // _MS
        out: list[Measurement] = []
        if kind is _ACQ and placed:
            if highest is None:
                highest = st.highest
            if highest is not None and p > highest:
                self._takeover(st, st.epochs.get(highest), ts, out)
            if highest is None or p > highest:
                st.highest = p
                st.epochs[p] = ep = _Epoch()
                while len(st.epochs) > EPOCHS_PER_KEY:
                    del st.epochs[min(st.epochs)]
                if until is not None:
                    self._grant(ep, placed, ts, until)
            return out
        if kind is _ACQ:  # unplaced: no takeover; its lease is measured by ts like an extension's
            ep = st.epochs.get(p)
            if ep is not None and until is not None:
                self._grant(ep, placed, ts, until)
            return out
        ep = st.epochs.get(p)
        if ep is None:
            ep = st.epochs[p] = _Epoch()
        ep.evidence = True
        beat = getattr(event, "heartbeat", None)
        if beat == "lost":
            out.append(Measurement("extension_failure", 1, dict(st.dims)))
        if until is not None:
            before = self._grant(ep, placed, ts, until)
            if before is not None and ts is not None:
                out.append(Measurement("remaining", (before[1] - ts) / 1000.0, {**st.dims, MEASURED_AT: EXTENSION}))
        if lease_rules.is_attempt(beat) and ts is not None:
            before = ep.beats.insert(ts)
            if before is not None:
                out.append(Measurement("heartbeat_age", (ts - before[0]) / 1000.0,
                                       {**st.dims, MEASURED_AT: HEARTBEAT}))
            if beat == "ok":
                if placed:
                    ep.placed_ok = (ts, ts)
                else:
                    if ep.unplaced_ok is None:
                        ep.unplaced_ok = Timeline(KEPT)
                    ep.unplaced_ok.insert(ts, ts)
        return out

    @staticmethod
    def _grant(ep: _Epoch, placed: bool, ts: int | None, until: int) -> tuple[int, Any] | None:
        """Record a grant or extension; return the one before it by ts (``(ts, lease_until)``)."""
        at = UNTIMED if ts is None else ts
        before = ep.grants.insert(at, until)
        if placed:
            ep.placed_until = (ts, until)
        elif ts is not None:  # an unplaced event without ts has no place before or after a takeover
            if ep.unplaced_until is None:
                ep.unplaced_until = Timeline(KEPT)
            ep.unplaced_until.insert(at, until)
        return before

    @staticmethod
    def _takeover(st: _Key, displaced: _Epoch | None, ts: int | None, out: list[Measurement]) -> None:
        if displaced is None:  # nothing seen of it since the key was tracked
            return
        if displaced.evidence:
            out.append(Measurement("reclaim", 1, dict(st.dims)))
        if ts is None:
            return
        until = lease_rules.latest(displaced.placed_until, _before(displaced.unplaced_until, ts))
        if until is not None:
            left = (until - ts) / 1000.0
            out.append(Measurement("remaining", left, {**st.dims, MEASURED_AT: TAKEOVER}))
            if left <= 0:
                out.append(Measurement("expired", 1, dict(st.dims)))
        last_ok = lease_rules.latest(displaced.placed_ok, _before(displaced.unplaced_ok, ts))
        if last_ok is not None and ts >= last_ok:
            out.append(Measurement("heartbeat_age", (ts - last_ok) / 1000.0, {**st.dims, MEASURED_AT: TAKEOVER}))


def _before(unplaced: Timeline | None, ts: int) -> tuple[int, Any] | None:
    """The latest unplaced instant before a takeover at ``ts`` (``lease_rules``: order relative to
    a takeover)."""
    return None if unplaced is None else unplaced.last_before(ts)


def _text(value: Any) -> str:
    """An attrs value as the batch groups it (``json_extract_string``): text as is, else JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
