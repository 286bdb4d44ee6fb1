"""How the live audit takes events in: a record checked (``convert``) or taken as typed, each held
in its key's reorder heap (seq order) until the window passes; a key whose first event had no seq
ordered by arrival; an event without seq on a key ordered by seq unplaced (SPEC rev 3). A mixin of
``core.LiveAudit``, reading the state that class keeps."""

from __future__ import annotations

import dataclasses
import heapq
from typing import Any

from ..core.model import Confidence, Event
from ..detect.lease.live import LeaseWatch
from ..detect.live.detector import LiveEvent
from ..normalize.reference import Ignored
from .convert import MappingError, checked_event, event_from_record, record_event, typed_events


class Admission:
    """Taking events in for ``LiveAudit`` (its attributes: ``detector``, ``lease``, ``_pending``,
    ``_observed``, ``_arrivals``, ``_counter``, ``_lowered``, ``_typed``, ``_vocabulary`` and the counters)."""

    def _split_events(self, item: Any, n: int) -> list[LiveEvent | None] | None:
        """The events of an item whose records its door split ahead for the store, else None."""
        prepared = self._prepared_of(item) if self._typed else None
        if prepared is None:
            return None
        try:
            return typed_events(prepared, n)
        except Exception:  # noqa: BLE001 - the records themselves are still there: the record way
            self._once("typed", "auditor: typed columns could not be read; auditing the records", exc_info=True)
            return None

    def _admit_all(self, records: list[dict[str, Any]], now: float,
                   events: list[LiveEvent | None] | None = None) -> None:
        """``_admit`` for each record, with its typed shortcut inlined (this loop runs per event):
        a record ``record_event`` takes (or whose event ``events`` already holds, built from the
        store's typed columns: ``convert.typed_events``), on a key ordered by seq, goes straight
        to its heap; the others go through ``_admit``."""
        if not self._typed:
            for rec in records:
                self._admit(rec, now)
            return
        if events is None:
            events = [_typed_or_none(rec) for rec in records]
        observed, pending, counter, push = self._observed, self._pending, self._counter, heapq.heappush
        for i, event in enumerate(events):
            if event is None or event.workflow_key in observed:
                self._admit(records[i], now)
                continue
            key = event.workflow_key
            if event.attrs is not None:  # only otel.capped: a span that lost evidence
                self._lower((key, event.seq), Confidence.MEDIUM)
            heap = pending.get(key)
            if heap is None:
                heap = pending[key] = []
            push(heap, (event.seq, "", next(counter), now, event))

    def _admit(self, rec: dict[str, Any], now: float) -> None:
        """One record from span_records: checked, then queued for the detector."""
        try:
            if self._typed:
                key = rec.get("workflow_key")
                observed = key in self._observed or (rec.get("seq") is None and isinstance(key, str))
                event = event_from_record(rec, seq=0, vocabulary=self._vocabulary) if observed else None
            else:  # a vocabulary's names: the key and the seq are known once it has read them
                event, placed = checked_event(rec, self._vocabulary)
                observed = event.workflow_key in self._observed or not placed
                if not placed:
                    event = dataclasses.replace(event, seq=0)
            if observed:
                key = event.workflow_key
                if key not in self._observed and (key in self._pending or self._last_fed_seq(key) is not None):
                    # SPEC rev 3: a key ordered by seq stays so; this event is unplaced, never judged
                    self.unplaced += 1
                    return
                self._admit_observed(key, event)
            else:
                event = event or record_event(rec) or event_from_record(rec, vocabulary=self._vocabulary)
                self._admit_event(event, now)
        except Ignored:
            self.ignored += 1  # declared irrelevant by the vocabulary: counted, never a warning
        except MappingError as e:
            self.unmapped += 1
            self._limited("auditor: ownership evidence not audited live: %s "
                          "(the store quarantines it with this reason)", e)
        except Exception:  # noqa: BLE001 - e.g. an unhashable key: skip this record, keep the batch
            self.unmapped += 1
            self._once("admit", "auditor: a record could not be audited live", exc_info=True)

    def _admit_event(self, event: Event, now: float) -> None:
        """Hold ``event`` in its key's reorder heap (seq order) until the window passes."""
        if LeaseWatch.evidence(event):
            self.lease.track(event.workflow_key)
        if event.attrs is not None and event.attrs.get("otel.capped"):
            self._lower((event.workflow_key, event.seq), Confidence.MEDIUM)
        heap = self._pending.get(event.workflow_key)
        if heap is None:
            heap = self._pending[event.workflow_key] = []
        heapq.heappush(heap, (event.seq, event.event_id or "", next(self._counter), now, event))

    def _admit_observed(self, key: str, event: Event) -> None:
        """A key whose first event had no seq is ordered by arrival, as the batch audit orders a key
        without any seq by position: each event's place is its arrival number (its position)."""
        self._observed.add(key)
        self._arrivals += 1
        n = self._arrivals
        event = (event._replace(seq=n, observed=True, position=n) if isinstance(event, LiveEvent)
                 else dataclasses.replace(event, seq=n, observed=True, position=n))
        self._lower((key, event.seq), Confidence.LOW)
        if LeaseWatch.evidence(event):
            self.lease.track(key)
        self._feed(event)  # arrival order is the order: nothing to wait for

    def _lower(self, where: tuple[str, int], confidence: Confidence) -> None:
        if len(self._lowered) > 100_000:  # bounded: old marks go first
            self._lowered.clear()
        if self._lowered.get(where) is not Confidence.LOW:
            self._lowered[where] = confidence

    def _last_fed_seq(self, key: str) -> int | None:
        st = self.detector._keys.get(key)  # noqa: SLF001 - same package, read-only
        return None if st is None else st.last_seq


def _typed_or_none(rec: dict[str, Any]) -> LiveEvent | None:
    try:
        return record_event(rec)
    except Exception:  # noqa: BLE001 - _admit says why
        return None
