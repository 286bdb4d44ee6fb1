"""The live audit's store writer: records handed to a thread of its own that appends them to the
DuckDB store (``db=``), batching what waits and retrying while another process holds the file.

The store stays open between appends while they keep coming: it is closed (which checkpoints it
and lets another process open the file) once no batch has come for ``HOLD_IDLE`` seconds, and at
least every ``HOLD_MAX`` seconds. Opening and checkpointing per append cost more than the append.

A mixin of ``core.LiveAudit``, which owns the state it reads (``_records``: parts, see ``Part``; ``_writes``,
``_write_lock``, ``_unwritten``, the counters); split from ``core.py`` along that seam.
"""

from __future__ import annotations

import os
import queue
import time
from typing import Any

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value

HOLD_IDLE = 0.25
HOLD_MAX = 2.0


#: What the writer appends: ``(first line, records, their split made ahead or None)`` (``Store.append_parts``).
Part = tuple[int, list[dict[str, Any]], Any]


def _count(parts: list[Part]) -> int:
    return sum(len(p[1]) for p in parts)


class StoreWriter:
    """Persistence for ``LiveAudit`` (see the module docstring)."""

    def _persist(self, force: bool) -> None:
        """Hand the records gathered so far to the store writer (a thread of its own, so the audit
        worker keeps draining the queue while DuckDB writes); ``force`` waits until they are
        written. When the writer falls more than ``max_unwritten`` records behind (default
        ``8 * max_queue_size``), the audit worker waits for it: the queue then fills and drops are
        counted (or refused, in serve), memory stays bounded."""
        if self._records:
            batch, self._records = self._records, []
            count, self._unpersisted = self._unpersisted, 0
            with self._write_lock:
                self._unwritten += count
                behind = self._unwritten > self._max_unwritten
            self._writes.put(batch)
            self._last_persist = time.monotonic()
            if behind and not force:
                self._writes.join()
        if force:
            self._writes.join()

    def _writer_run(self) -> None:
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        retry: list[Part] = []
        try:
            while True:
                try:
                    batch = self._writes.get(timeout=HOLD_IDLE if self._store is not None else None)
                except queue.Empty:  # idle: checkpoint and let other processes in
                    self._close_store()
                    continue
                try:
                    if batch is None:
                        self._close_store()
                        self.persist_failures += _count(retry)  # the store stayed locked to the end
                        return
                    while True:  # one append for everything waiting: batched writes
                        try:
                            more = self._writes.get_nowait()
                        except queue.Empty:
                            break
                        self._writes.task_done()
                        if more is None:
                            self._writes.put(None)
                            break
                        batch += more
                    retry = self._write(retry + batch)
                    if self._store is not None and time.monotonic() - self._store_opened >= HOLD_MAX:
                        self._close_store()
                finally:
                    self._writes.task_done()
        finally:
            self._close_store()
            detach(token)

    def _close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            try:
                store.close()
            except Exception as e:  # noqa: BLE001 - what was appended is committed already
                self._once("close:" + type(e).__name__, "auditor: could not close %s: %s", self._db, e)

    def _write(self, batch: list[Part]) -> list[Part]:
        """Append ``batch`` to the store; return what must be retried (the store was locked)."""
        from ..store import Store, StoreError, StoreLocked

        count = _count(batch)
        with self._write_lock:
            self._unwritten -= count
        try:
            if self._store is None:
                self._store = Store(self._db, lock_timeout=2.0 if self._stop else 0.2, vocabulary=self._vocabulary)
                self._store_opened = time.monotonic()
            # A Store opened on this file meanwhile in this process (GET /findings' report) shares
            # the database and put its own vocabulary in the shared box: ours again, per append.
            self._store.vocabulary = self._vocabulary
            self._store.append_parts(self._store_source(), batch)
            self.persisted += count
        except StoreLocked:
            # The oldest records past half the limit go, as many as that and no more: a part the
            # cut falls in keeps its newer records (without its split made ahead, which numbers
            # the whole part: the store splits what is left itself).
            over = count - self._max_unwritten // 2
            while batch and over > 0:
                first, records, _prepared = batch[0]
                dropped = min(over, len(records))
                if dropped == len(records):
                    batch.pop(0)
                else:
                    batch[0] = (first + dropped, records[dropped:], None)
                over -= dropped
                count -= dropped
                self.persist_failures += dropped
            self._once("locked", "auditor: %s is locked by another process; records are kept and "
                       "appended when it is free", self._db)
            with self._write_lock:
                self._unwritten += count
            return batch
        except Exception as e:  # noqa: BLE001 - StoreError, OSError, ValueError, DuckDB's own
            self._close_store()
            self.persist_failures += count
            self._once("persist:" + type(e).__name__, "auditor: could not persist to %s: %s", self._db, e)
        return []

    def _store_source(self) -> str:
        return self._source_name or f"otel:pid-{os.getpid()}"
