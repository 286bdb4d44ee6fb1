"""Lease health live (SPEC section 7): what ``health.sql`` measures over a store, measured one event at
a time for the span processor's OTel metrics.

``LeaseWatch`` follows the workflow keys that carry lease evidence (a ``lease_until`` or a
``heartbeat``); every other key costs nothing. Fed a tracked key's events in authoritative order,
it returns the measurements of section 7 as data: the lease left at each extension and takeover,
the heartbeat age at each successful heartbeat and takeover, and the expired leases, failed
extensions and reclaims, each with the key's dimensions (``tool``, ``model``, ``provider`` from
``attrs`` by default). Durations come from the events' own ``ts`` and ``lease_until``, never from
the processor's clock, so late evidence measures what happened, as the batch report does.
Not thread-safe: one feeder (the live audit's worker). Memory is bounded by ``max_keys``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, NamedTuple

from .health import DEFAULT_BY
from .model import Event, Kind
from .normalize import instant
from .vocabulary import EPOCH_OPTIONAL_KINDS

#: Where a duration was measured: the ``auditor.measured_at`` attribute of the two histograms.
EXTENSION, HEARTBEAT, TAKEOVER = "extension", "heartbeat", "takeover"
MEASURED_AT = "auditor.measured_at"
#: Epochs remembered per key: the current owner and the few it displaced (whose late evidence
#: still counts as failed extensions).
EPOCHS_PER_KEY = 4

_ACQ = Kind.LEASE_ACQUIRED
_RECORDED = frozenset(Kind(k) for k in EPOCH_OPTIONAL_KINDS)


class Measurement(NamedTuple):
    """One section 7 measurement: ``metric`` is ``remaining``, ``heartbeat_age`` (seconds) or
    ``expired``, ``extension_failure``, ``reclaim`` (counts of 1); ``attributes`` are the key's
    dimensions, plus ``auditor.measured_at`` for the durations."""

    metric: str
    value: float
    attributes: dict[str, str]


class _Epoch:
    __slots__ = ("until", "last_ok", "evidence")

    def __init__(self, until: float | None = None) -> None:
        self.until = until        # the lease granted or last extended, seconds since the epoch
        self.last_ok = None       # ts of the last heartbeat=ok
        self.evidence = False     # any event of its own: a takeover of it is a reclaim


class _Key:
    __slots__ = ("dims", "epochs")

    def __init__(self) -> None:
        self.dims: dict[str, str] = {}
        self.epochs: dict[int, _Epoch] = {}


def seconds_of(ts: Any) -> float | None:
    """An event's ``ts`` (RFC 3339 text, or OTel's nanoseconds) as seconds since the epoch."""
    if ts is None:
        return None
    if type(ts) is int:
        return ts / 1e9
    t = instant(ts)
    return None if t is None else t.timestamp()


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

    def feed(self, event: Any, highest: int | None) -> list[Measurement]:
        """Apply one event of a tracked key (in seq order); ``highest`` is the highest epoch the
        key had acquired before it (the live detector's, read before the detector is fed)."""
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
        ts = seconds_of(event.ts)
        until_at = getattr(event, "lease_until", None)
        until = None if until_at is None else until_at.timestamp()
        out: list[Measurement] = []
        if kind is _ACQ:
            if highest is not None and p > highest:
                self._takeover(st, st.epochs.get(highest), ts, out)
            if highest is None or p > highest:
                st.epochs[p] = _Epoch(until)
                while len(st.epochs) > EPOCHS_PER_KEY:
                    del st.epochs[min(st.epochs)]
            return out
        ep = st.epochs.get(p)
        if ep is None:
            ep = st.epochs[p] = _Epoch()
        ep.evidence = True
        beat = getattr(event, "heartbeat", None)
        if beat == "lost":
            out.append(Measurement("extension_failure", 1, dict(st.dims)))
        if until is not None:
            if ep.until is not None and ts is not None:
                out.append(Measurement("remaining", ep.until - ts, {**st.dims, MEASURED_AT: EXTENSION}))
            ep.until = until
        if beat == "ok" and ts is not None:
            if ep.last_ok is not None and ts >= ep.last_ok:
                out.append(Measurement("heartbeat_age", ts - ep.last_ok, {**st.dims, MEASURED_AT: HEARTBEAT}))
            ep.last_ok = ts
        return out

    @staticmethod
    def _takeover(st: _Key, displaced: _Epoch | None, ts: float | None, out: list[Measurement]) -> None:
        if displaced is None:  # nothing seen of it since the key was tracked
            return
        if displaced.evidence:
            out.append(Measurement("reclaim", 1, dict(st.dims)))
        if ts is None:
            return
        if displaced.until is not None:
            left = displaced.until - ts
            out.append(Measurement("remaining", left, {**st.dims, MEASURED_AT: TAKEOVER}))
            if left <= 0:
                out.append(Measurement("expired", 1, dict(st.dims)))
        if displaced.last_ok is not None and ts >= displaced.last_ok:
            out.append(Measurement("heartbeat_age", ts - displaced.last_ok, {**st.dims, MEASURED_AT: TAKEOVER}))


def _text(value: Any) -> str:
    """An attrs value as the batch groups it (``json_extract_string``): text as is, else JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
