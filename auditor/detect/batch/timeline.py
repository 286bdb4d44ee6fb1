"""Stage 4, detect, for the eyes: the timeline facts of a few workflow keys, as data.

A timeline shows one key's events in authoritative order and what the rules made of each: which
events are stale evidence, which acquisitions were takeovers, clean handovers or epoch
regressions, and which earlier commits a double commit repeats. The detector decides all of it
here (H(k, s) and the acquisitions' running maximum come from ``detect.sql``'s ``timeline_rows``);
renderers only draw it. ``excerpts`` is called once, at the edge (``analyze``), for the keys a
report draws, so a result needs no open store to be rendered.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Any

import orjson

from ...core.model import Event, Finding, Kind
from ...core.rows import column_index, event_reader, names
from ...rules import TWICE
from ...store import Store
from .base import SQL, lean

_ACQ, _COMMIT = Kind.LEASE_ACQUIRED, Kind.EFFECT_COMMITTED


@dataclass(frozen=True, slots=True)
class Acquisition:
    """What one acquisition did to its key's ownership."""

    role: str  # "first", "takeover" (a finding names it), "clean" (a handover none names), "regression"
    displaced: int | None  # the highest epoch before it: the one a takeover or handover displaced


@dataclass(frozen=True, slots=True)
class TimelineEvent:
    event: Event
    stale: bool  # evidence under an epoch lower than H(k, s), whether or not it is a finding
    acquisition: Acquisition | None = None  # set on lease_acquired events


@dataclass(frozen=True, slots=True)
class KeyTimeline:
    """The first events of one workflow key (``events``, at most the fetch limit) and its facts.

    ``partners`` maps the position of each double commit to the positions of the earlier commits it
    repeats: the first commit of its effect key (or, for an unstable key, of its step) under each
    other epoch it names.
    """

    workflow_key: str
    events: tuple[TimelineEvent, ...]
    total: int  # events of the key in the store
    partners: dict[int, tuple[int, ...]] = field(default_factory=dict)

    @property
    def read_all(self) -> bool:
        return len(self.events) >= self.total


def iter_events(store: Store, batch: int = 100_000) -> Iterator[Event]:
    """Every stored event with its provenance, in order per key: what the live detector is fed
    when it is checked against the batch one."""
    cur = store.cursor()
    cur.execute(SQL["event_rows"])
    read = event_reader(names(cur.description), seq="ord")
    while rows := cur.fetchmany(batch):
        yield from map(read, rows)


def authority_events(con, keys: list[str]) -> Iterator[tuple[str, list[tuple[Event, Any]]]]:
    """``(key, [(event, its parsed ts), ...])`` of each of ``keys`` with events, in key order
    (``detect.sql``'s ``authority_events``, read by name)."""
    cur = con.execute(SQL["authority_events"], [keys])
    columns = names(cur.description)
    read, at = event_reader(columns, seq="ord"), column_index(columns)
    key_at, ts_at = at["workflow_key"], at["ts_utc"]
    for key, group in groupby(cur.fetchall(), key=itemgetter(key_at)):
        yield key, [(read(r), r[ts_at]) for r in group]


def excerpts(store: Store, keys: Iterable[str], findings: Iterable[Finding],
             limit: int) -> dict[str, KeyTimeline]:
    """The timelines of ``keys`` (each its first ``limit`` events), with the facts drawn from
    ``findings`` (those of these keys; others are ignored). One query for all keys."""
    keys = list(dict.fromkeys(keys))
    if not keys:
        return {}
    rows: dict[str, list[tuple]] = {k: [] for k in keys}
    # The query scans every column of the whole store for a few keys.
    columns, found = lean(store, lambda con: _named(con.execute(SQL["timeline_rows"], [keys, limit])))
    at = column_index(columns)
    for r in found:
        rows[r[at["workflow_key"]]].append(r)
    by_key: dict[str, list[Finding]] = {k: [] for k in keys}
    if hasattr(findings, "containing"):  # an explain.spool.Spool: decode only the lines of these keys
        findings = findings.containing(b'"workflow_key":' + orjson.dumps(k) for k in keys)
    for f in findings:
        if f.workflow_key in by_key:
            by_key[f.workflow_key].append(f)
    read = event_reader(columns, seq="ord")
    return {k: _timeline(k, rows[k], by_key[k], read, at) for k in keys if rows[k]}


def _named(cur) -> tuple[tuple[str, ...], list[tuple]]:
    """A query's column names and its rows."""
    return names(cur.description), cur.fetchall()


def takeovers(findings: Iterable[Finding]) -> set[int]:
    """Positions of the acquisitions some finding names as its transition: the takeovers. Every
    other handover is clean (SPEC section 3)."""
    return {f.transition_place for f in findings if f.transition_place is not None}


def _timeline(key: str, rows: list[tuple], findings: list[Finding], read, at: dict[str, int]) -> KeyTimeline:
    """One key's timeline from its ``timeline_rows`` (``read`` makes the event of one, ``at`` names
    the columns read beside it)."""
    named = takeovers(findings)
    out = []
    highest_at, prev_at = at["highest_before"], at["prev_max"]
    for r in rows:
        e = read(r)
        highest, prev = r[highest_at], r[prev_at]
        acq = None
        if e.kind is _ACQ:
            role = ("first" if prev is None else "regression" if e.epoch <= prev
                    else "takeover" if e.seq in named else "clean")
            acq = Acquisition(role, prev)
        stale = (e.kind is not _ACQ and e.epoch is not None and highest is not None and e.epoch < highest)
        out.append(TimelineEvent(e, stale, acq))
    return KeyTimeline(key, tuple(out), rows[0][at["total"]], _partners([t.event for t in out], findings))


def _partners(events: list[Event], findings: list[Finding]) -> dict[int, tuple[int, ...]]:
    out: dict[int, tuple[int, ...]] = {}
    for d in findings:
        if d.grade not in TWICE:
            continue
        found: list[int] = []
        for ep in d.epochs:
            if ep == d.epoch:
                continue
            for e in events:
                same_step = d.unstable_effect_key and d.step_id is not None and e.step_id == d.step_id
                if (e.kind is _COMMIT and e.epoch == ep and e.seq != d.place
                        and (e.effect_key == d.effect_key or same_step)):
                    found.append(e.seq)
                    break
        out[d.place] = tuple(found)
    return out
