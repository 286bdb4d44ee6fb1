"""The receiver's store writer: spooled entries appended to the DuckDB store, in order, exactly once.

Each append is one transaction that holds the entries' records, their refused records
(quarantined with their reasons) and the number of the last entry, as the source's digest
(``serve-spool:<number>``): at start, the highest such number is where the spool's replay
begins, so an entry is never stored twice nor skipped. Entries are appended strictly in number
order and never given up: a store that another process holds (``auditor report --db``) or that
fails is retried, and while the writer is behind the receiver answers 429 (``behind``). The
store stays open while appends keep coming and is closed (checkpointed, so other processes can
open it) once they pause (``otel.persist.HOLD_IDLE``) and at least every ``HOLD_MAX`` seconds.

The incidents alerted are kept in the same store (``serve_alerts``), so a restarted receiver
alerts each incident once, and again only when its grade changes.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import StoreLocked
from ..otel.persist import HOLD_IDLE, HOLD_MAX
from ..core.sql import statements
from ..store import Store

_logger = logging.getLogger("auditor.serve")
SQL = statements("serve/serve.sql")
SOURCE = "otlp:serve"
MARK = "serve-spool:"
#: The store writer appends once the requests pause this long (seconds), or its batch is full,
#: or the oldest record it holds has waited MAX_DELAY.
PAUSE = 0.05
MAX_DELAY = 1.0
#: Beyond the last try's own wait, how long ``close`` waits for the writer thread (seconds).
STOP_GRACE = 5.0


@dataclass
class Item:
    """One spooled entry, decoded: ``records`` kept (with their split made ahead, or None) and the
    ``refused`` reasons, one per record (or per request refused whole)."""

    number: int
    records: Any
    prepared: Any
    refused: list[str]


def open_store(db: Path, vocabulary, wait: float, schema: bool = False) -> Store:
    """The store, waiting up to ``wait`` seconds for another process to let go of it; ``schema``
    adds the receiver's table (once, at start: not on every open of the writer)."""
    store = Store(db, lock_timeout=wait, vocabulary=vocabulary)
    if schema:
        store.con.execute(SQL["alerts_schema"])
    return store


def store_position(store: Store) -> tuple[int, int]:
    """``(the last spool entry stored, the last line numbered)`` of ``SOURCE`` in ``store``."""
    mark, lines = store.con.execute(SQL["position"], [SOURCE, MARK + "%"]).fetchone()
    return (int(mark[len(MARK):]) if mark else 0), int(lines or 0)


class Keeper:
    """The store writer thread (see the module docstring). ``put`` and ``put_alert`` are thread
    safe and O(1); ``drain`` waits until what was put is stored; ``close`` stops the thread and
    returns how many records are not in the store (they stay in the spool)."""

    def __init__(self, db: Path, vocabulary, line: int, on_stored, max_unwritten: int, wait: float,
                 batch: int = 131_072) -> None:
        self.db = db
        self._batch = batch
        self._flush = False
        self._vocabulary = vocabulary
        self._line = line
        self._on_stored = on_stored      # called with the last entry number stored
        self._max_unwritten = max_unwritten
        self._wait = wait
        self._queue: queue.Queue = queue.Queue()
        self._alerts: list[tuple] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._store: Store | None = None
        self._opened = 0.0
        self._stop = False
        self.unwritten = 0       # records put, not yet stored
        self.persisted = 0       # records stored
        self.quarantined = 0     # refused records stored in the quarantine
        self.stored_number = 0   # the last entry stored
        self.put_number = 0      # the last entry put
        self.retries = 0         # appends retried (the store was locked or failed)
        self._thread = threading.Thread(name="auditor.serve.store", target=self._run, daemon=True)
        self._thread.start()

    def put(self, item: Item) -> None:
        with self._lock:
            self.unwritten += len(item.records)
            self.put_number = max(self.put_number, item.number)
        self._queue.put(item)

    def put_alert(self, row: tuple) -> None:
        """``(incident_id, finding_id, grade, workflow_key, seq)`` of an alert, stored with the next append."""
        with self._lock:
            self._alerts.append(row)
        self._queue.put(None)

    def behind(self) -> bool:
        return self.unwritten > self._max_unwritten

    def drain(self, timeout: float, number: int | None = None) -> bool:
        """Wait until every entry put so far (or up to ``number``) is stored; False on timeout."""
        deadline = time.monotonic() + timeout
        self._flush = True
        self._queue.put(None)
        with self._cond:
            target = self.put_number if number is None else number
            while self.stored_number < target or self._alerts:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.5))
        return True

    def close(self, timeout: float) -> int:
        """Store what was put (waiting up to ``timeout`` seconds for a locked store), then stop;
        the count of records still not stored."""
        self.drain(timeout)
        self._stop = True
        self._queue.put(None)
        # The thread returns after one more try (opening the store waits up to 2 s when stopping):
        # wait for that try. A thread still inside DuckDB when the interpreter exits aborts the
        # process (SIGABRT, "terminate called ...") instead of the exit code that names the leftover.
        self._thread.join(timeout=max(1.0, timeout) + 2.0 + STOP_GRACE)
        return self.unwritten

    def _run(self) -> None:
        todo: list[Item] = []
        waiting, since = 0, 0.0  # records in todo, and since when the oldest waits
        while True:
            pending = bool(todo or self._alerts)
            try:
                got = self._queue.get(timeout=PAUSE if pending else HOLD_IDLE if self._store is not None else None)
            except queue.Empty:
                got = False
            while True:
                if got:
                    if not todo:
                        since = time.monotonic()
                    todo.append(got)
                    waiting += len(got.records)
                try:
                    got = self._queue.get_nowait() or None
                except queue.Empty:
                    break
            if self._stop and not todo and not self._alerts:
                self._close_store()
                return
            if not todo and not self._alerts:
                self._close_store()  # idle: checkpoint and let other processes in
                continue
            # Appends are batched (their cost is mostly fixed per append, and the acknowledgement
            # never waits for them: the spool has the records): written once the batch is full,
            # the requests pause, the oldest has waited MAX_DELAY, or someone waits (drain, stop).
            now = time.monotonic()
            if not (self._stop or self._flush or got is False or waiting >= self._batch
                    or now - since >= MAX_DELAY or not todo):
                continue
            self._flush = False
            todo = self._write(todo)
            if todo:
                if self._stop:
                    self._close_store()
                    return
                time.sleep(0.2)  # the store is locked or failing: try again shortly, in order
                continue
            waiting = 0
            if self._store is not None and now - self._opened >= HOLD_MAX:
                self._close_store()

    def _write(self, todo: list[Item]) -> list[Item]:
        """Append ``todo`` (and the alerts waiting) in one transaction; what is left to retry."""
        with self._lock:
            alerts, self._alerts = self._alerts, []
        if not todo and not alerts:
            return []
        try:
            if self._store is None:
                self._store = open_store(self.db, self._vocabulary, 2.0 if self._stop else 0.2)
                self._opened = time.monotonic()
            self._store.vocabulary = self._vocabulary  # a report in this process may have set its own
            if todo:
                self._append(todo)
            if alerts:
                self._store.con.executemany(SQL["alert"], alerts)
        except Exception as e:  # noqa: BLE001 - StoreLocked, StoreError, DuckDB's own: retried, never dropped
            with self._lock:
                self._alerts = alerts + self._alerts
            self.retries += 1
            if not isinstance(e, StoreLocked):
                self._close_store()
            if self.retries in (1, 10, 100) or self.retries % 1000 == 0:
                _logger.warning("auditor serve: cannot write %s yet (%s); acknowledged records are kept in the "
                                "spool and appended when it can be written", self.db, _first_line(e))
            return todo
        n = sum(len(i.records) for i in todo)
        last = todo[-1].number if todo else self.stored_number
        with self._cond:
            self.unwritten -= n
            self.persisted += n
            self.stored_number = max(self.stored_number, last)
            self._cond.notify_all()
        if todo:
            self._on_stored(last)
        return []

    def _append(self, todo: list[Item]) -> None:
        parts, refused = [], []
        line = self._line
        for item in todo:
            if item.records:
                parts.append((line + 1, item.records, item.prepared))
                line += len(item.records)
            for reason in item.refused:
                line += 1
                refused.append((line, reason))
        counts = self._store.append_parts(SOURCE, parts, refused, digest=f"{MARK}{todo[-1].number:020d}")
        self._line = line
        self.quarantined += len(refused) if not counts.skipped else 0

    def _close_store(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            try:
                store.close()
            except Exception as e:  # noqa: BLE001 - what was appended is committed already
                _logger.warning("auditor serve: could not close %s: %s", self.db, _first_line(e))


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
