"""The receiver's live audit: ``otel.core.LiveAudit`` over decoded requests, one audit across restarts.

At start the detector is fed everything the store holds (in the worker thread, before the first
request) and the alerts already raised are read back (``serve_alerts``), so a restarted receiver
goes on where it stopped: an incident alerted before is not alerted again for the same evidence
(a replay never alerts twice), one whose grade is raised, or whose finding at one position changed
grade (a stale attempt alerted before a restart and then resolved as rejected), alerts once more,
and an incident first seen after the restart alerts once. Every alert is stored with the next
append (``durable.Keeper.put_alert``).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from ..core.model import Finding, Grade
from ..detect.live.revisit import Revisiting
from ..otel.core import LiveAudit
from ..store import Store
from .durable import SQL, Keeper

_RANK = {g.value: g.rank for g in Grade}


class _Rebuild:
    """The queue item that rebuilds the detector from the store, run by the audit's worker thread."""

    def __init__(self, db: Path, wait: float) -> None:
        self.db, self.wait = db, wait
        self.done = threading.Event()
        self.events = 0
        self.error: BaseException | None = None

    def run(self, audit: "RecordAudit") -> None:
        try:
            with Store(self.db, lock_timeout=self.wait) as store:
                audit.known_alerts(store.con.execute(SQL["alerts"]).fetchall())
                audit.observed_from(store.con.execute(SQL["observed_keys"]).fetchall())
                feed, report = audit.detector.feed, audit._report  # noqa: SLF001
                for event in store.iter_events():
                    if event.seq is None:  # unplaced (SPEC revision 3): never judged, never fed
                        continue
                    self.events += 1
                    found = feed(event)
                    if found:
                        report(found)
        except BaseException as e:  # noqa: BLE001 - handed to the receiver, which refuses to start
            self.error = e
        finally:
            self.done.set()


class RecordAudit(LiveAudit):
    """The core over batches of canonical records: one item per accepted request, ``(records, their
    split for the store made by the decoder, or None)``; alerts stored through ``keeper``. A key is
    re-evaluated when evidence arrives below its newest seq (``Revisiting``)."""

    _detector_class = Revisiting

    def __init__(self, keeper: Keeper, **kwargs: Any) -> None:
        self._keeper = keeper
        self._alerted_at: OrderedDict[tuple[str, Any], str] = OrderedDict()  # (key, seq) -> grade alerted
        self.alerts_raised = 0  # alerts this process raised (each a line on stderr): /healthz "alerts"
        super().__init__(**kwargs)

    def rebuild(self, db: Path, wait: float, log: logging.Logger) -> int:
        """Feed the detector everything in ``db`` (blocking, in the worker thread); the events fed."""
        job = _Rebuild(db, wait)
        self._enqueue(job)
        while not job.done.wait(0.5):
            self.force_flush(500)
        if job.error is not None:
            raise job.error
        if job.events:
            log.info("auditor serve: the live audit goes on from the store's %d events", job.events)
        return job.events

    def known_alerts(self, rows: list[tuple]) -> None:
        """The alerts a receiver raised before this one started: ``(incident, grade, key, seq)``."""
        for incident, grade, key, seq in rows:
            rank = _RANK.get(grade, 0)
            if self._alerted.get(incident, -1) < rank:
                self._alerted[incident] = rank
            self._alerted_at[(key, seq)] = grade
        self._trim()

    def observed_from(self, rows: list[tuple[str, int]]) -> None:
        """The keys the store orders by observation, ``(key, last place)``: the live audit keeps
        numbering them from there. The core keeps them as a dict of last places (SPEC revision 2)
        or as a set beside one arrival count (revision 3); both are filled."""
        observed = self._observed
        for key, last in rows:
            if isinstance(observed, dict):
                observed[key] = int(last)
            else:
                observed.add(key)
                self._arrivals = max(getattr(self, "_arrivals", 0), int(last))

    def _records_of(self, item: Any) -> list[dict[str, Any]]:
        if isinstance(item, _Rebuild):
            item.run(self)
            return []
        return item[0]

    def _prepared_of(self, item: Any) -> Any:
        return None if isinstance(item, _Rebuild) else item[1]

    def _alert_due(self, f: Finding) -> bool:
        """An incident's first finding; one that raises its severity; or one whose position was
        alerted before under another grade (a correction, e.g. after a restart)."""
        incident = f.incident_id or f.id
        before = self._alerted.get(incident)
        at = (f.workflow_key, f.seq)
        was = self._alerted_at.get(at)
        due = before is None or f.grade.rank > before or (was is not None and was != f.grade.value)
        if before is not None:
            self._alerted.move_to_end(incident)
        if not due:
            return False
        self._alerted[incident] = max(f.grade.rank, before or 0)
        self._alerted.move_to_end(incident)
        self._alerted_at[at] = f.grade.value
        self._alerted_at.move_to_end(at)
        self._trim()
        self._keeper.put_alert((incident, f.id, f.grade.value, f.workflow_key, f.seq))
        self.alerts_raised += 1
        return True

    def _trim(self) -> None:
        while len(self._alerted) > self._max_findings:  # bounded: the oldest incidents go first
            self._alerted.popitem(last=False)
        while len(self._alerted_at) > self._max_findings:
            self._alerted_at.popitem(last=False)
