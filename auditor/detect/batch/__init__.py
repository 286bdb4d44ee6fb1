"""Stage 4, detect: graded findings and diagnostics from the stored events (SPEC section 3).

``detect(store)`` runs ``detect.sql`` (the set-based detector) and returns findings as data. The
incremental detector for live audits is ``detect.live``; a test pins the two together.
"""

from __future__ import annotations

import contextlib
import os
from datetime import datetime
from typing import TYPE_CHECKING

from ...core.model import Diagnostic, DiagnosticKind
from ...rules import diagnostic_id, diagnostic_order
from ...store import Store
from .base import LEAN_MEMORY, SQL, Handover, KeyFindings, instant, lean  # noqa: F401 - re-exported

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    import duckdb

    import pyarrow as pa

_BUILD = ("acquisitions", "records", "key_epochs", "displacement", "diagnostic_rows", "release_key_epochs",
          "stale", "commits", "resolutions",
          "first_commits", "step_commits", "findings", "finding_keys", "picked", "release",
          "evidence", "release_picked", "scratch", "owners", "finding_rows", "release_evidence", "acquirers", "key_facts", "keys")

#: Workflow keys read (and explained) at a time. A batch's Python objects are most of an audit's
#: memory beside DuckDB's: at ten million events, batches of 65,536 keys and 50,000 finding rows
#: peaked at 1,191 MB, of 16,384 each at 908 MB, in the same time; on a log of fewer keys with more
#: findings each (10M events, 141,001 keys) ``report`` peaked at 1,054-1,068 MB with 16,384 keys
#: and 891 MB with 8,192, the 2M log's at 451-453 and 456 MB (bench/RESULTS.md).
KEY_BATCH = 8_192


class Detection:
    """What the detector saw, read key by key: ``batches()`` hands over every workflow key in key
    order, with the findings and facts of those that have any, so that nothing of a big audit is
    held for all keys at once. ``diagnostics`` is whole once the batches are read.

    Holds the detector's scratch tables in the store until ``close()`` (or the batches end).
    """

    def __init__(self, store: Store, diagnostics: list[Diagnostic], newest_ts: datetime | None) -> None:
        self.store = store
        self.diagnostics = diagnostics
        self.newest_ts = newest_ts
        self._open = True

    def batches(self, size: int = KEY_BATCH) -> "Iterator[tuple[pa.RecordBatch, list[KeyFindings]]]":
        """Every workflow key in key order, in Arrow batches of the columns of ``result.COUNTS``
        (and more), each with the ``KeyFindings`` of its keys that have findings or fall under
        the authority rules. Authority diagnostics join ``diagnostics`` as their keys are read."""
        from .rows import batches

        try:
            notes: list[Diagnostic] = []
            yield from batches(self.store, self.newest_ts, notes, size)
            self.diagnostics = sorted(self.diagnostics + notes, key=diagnostic_order)
        finally:
            self.close()

    def close(self) -> None:
        """Drop the scratch tables (idempotent)."""
        if self._open:
            self._open = False
            self.store.con.execute(SQL["drop"])
            self.store.shrink()
            if not (self.store.read_only or self.store.small):
                _remove(self.store.private_path("detect.duckdb"))


def detect(store: Store) -> Detection:
    """Run the set-based detector over ``store``: its scratch tables are built, the diagnostics
    read; the findings are read key by key from the ``Detection`` returned (close it when done)."""
    con = store.con
    # A file of its own beside a writable store: at ten million events its pages took 190 MB less
    # peak than in memory (bench/RESULTS.md). A read-only store (``report``) keeps it in memory,
    # so a report needs no file but its own; nor does a small store, held in memory itself.
    scratch = ":memory:" if store.read_only or store.small else store.private_path("detect.duckdb")
    try:
        _identify_keys(con, store.adapting)
        for name in _BUILD:  # each statement replaces its table: safe to run again with more memory
            store.adapting(lambda name=name: con.execute(SQL[name], [scratch] if name == "scratch" else []))
        store.shrink()
        diagnostics = sorted(
            (Diagnostic(diagnostic_id(k, kind, s, epoch), DiagnosticKind(kind), k, seq, epoch, detail, position=pos)
             for kind, k, s, epoch, detail, seq, pos in con.execute(SQL["diagnostics"]).fetchall()),
            key=diagnostic_order)
        ((newest,),) = con.execute(SQL["newest_ts"]).fetchall()
    except BaseException:
        con.execute(SQL["drop"])
        if scratch != ":memory:":
            _remove(scratch)
        raise
    return Detection(store, diagnostics, newest)


def _identify_keys(con: "duckdb.DuckDBPyConnection", run: "Callable[[Callable[[], object]], object]") -> None:
    """Detection's key ids (``detect.sql``'s ``key_of``, ``key_counts``) on ``con``: a 64-bit hash
    of each workflow key, checked unique over the store's keys; should two keys share one, the
    strings themselves, so that no two keys are ever taken for one. ``run`` runs the statement
    that builds ``key_counts`` (``Store.adapting``: again with more memory, should it run out)."""
    con.execute(SQL["hashed_keys"])
    run(lambda: con.execute(SQL["key_ids"]))
    if _ids_collide(con):
        con.execute(SQL["string_keys"])
        run(lambda: con.execute(SQL["key_ids"]))


def _ids_collide(con) -> bool:
    """Whether two workflow keys of ``key_counts`` share an id."""
    ((collide,),) = con.execute(SQL["ids_collide"]).fetchall()
    return bool(collide)


def _remove(database: str) -> None:
    for path in (database, database + ".wal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
