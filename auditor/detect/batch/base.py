"""Stage 4, detect: what the batch detector's modules share, at the bottom of the package.

The named statements of ``detect.sql``, the records one workflow key's findings travel in
(``KeyFindings``, ``Handover``) and ``lean``, the low memory limit a query that reads a little of
the whole store runs under. ``__init__`` (the detector), ``rows`` (reading findings key by key),
``timeline`` and ``authorize`` import these from here, never from each other's package module,
so the package has no import circle.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import NamedTuple, TypeVar

import duckdb

from ...core.model import Finding
from ...core.sql import statements
from ...store import Store

SQL = statements("detect/batch/detect.sql")
T = TypeVar("T")


class Handover(NamedTuple):
    """An acquisition that raised the key's highest epoch: a takeover when a finding names it as
    its transition, else a clean handover."""

    workflow_key: str
    seq: int  # position in the key's order
    epoch: int
    worker: str


@dataclass(slots=True)
class KeyFindings:
    """One workflow key's findings (sorted, the authority rules applied) and the facts its
    incidents need: everything explain reads of one key, and nothing of any other.

    ``row`` is the key's row in the batch of keys it came with (see ``Detection.batches``).
    """

    row: int
    workflow_key: str
    observed: bool  # ordered by observation: its log lacks seq
    counts: tuple[int, int, int]  # events, acquisitions, handovers (acquisitions that raised the epoch)
    findings: list[Finding]
    handovers: list[Handover]
    # (workflow_key, effect_key) -> the last outcome_verified: its place in the key's order, its position
    verifications: dict[tuple[str, str], tuple[int, int]]
    acquirers: dict[tuple[str, int], str]       # (workflow_key, epoch) -> worker who acquired it
    newest_ts: datetime | None
    # finding id -> its ts, and (workflow_key, place of a handover) -> the handover's ts: parsed, or
    # as microseconds since the epoch (detection's rows; ``instant`` reads either). Explain reads one
    # of each per incident: a datetime made for every finding and handover cost 3 % of explain.
    finding_ts: dict[str, "datetime | int | None"] = field(default_factory=dict)
    transition_ts: dict[tuple[str, int], "datetime | int | None"] = field(default_factory=dict)
    capped: set[str] = field(default_factory=set)  # finding ids whose span was capped by limits


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def instant(value: "datetime | int | None") -> datetime | None:
    """A ``KeyFindings`` time as a datetime (see ``finding_ts``)."""
    return value if value is None or isinstance(value, datetime) else _EPOCH + timedelta(microseconds=value)


#: DuckDB's memory limit while a query reads a little from the whole store (see ``lean``)
LEAN_MEMORY = "128MB"


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
        return store.adapting(lambda: read(store.con))
    finally:
        store.shrink()
