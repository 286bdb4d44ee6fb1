"""The live audit's core, shared by every live door: the span processor, the log record processor
and ``auditor serve``.

It follows the SDK's own ``BatchProcessor``: a door appends an item (a span, a log record, a batch
of records) to a bounded deque in O(1) with no I/O (``_enqueue``); a daemon worker, woken by an
Event or every ``schedule_delay_millis``, maps the items to events (the door's ``_fast_events`` or
``_records_of``), puts the events back in seq order per workflow key (a short reorder window,
because spans end in any order), feeds ``detect.live.LiveDetector`` and alerts once per incident
(callback, ``logging`` warning with the witness sentence, OTel metrics). With ``db`` it appends
the records to the DuckDB store from that worker, through the store's one normalizer, so
``auditor report --db`` later gives the batch answer. Nothing here can raise into, block, or hide
an exception of the host.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
import heapq
import itertools
import logging
import os
import queue
import threading
import time
import weakref
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.util._once import Once

from ..detect.live.detector import LiveDetector, LiveEvent
from ..detect.lease.live import LeaseWatch
from ..core.model import Confidence, Event, Finding
from ..store.typed import Prepared
from ..normalize.vocabulary import DEFAULT, Vocabulary, vocabulary_of

from .metrics import Metrics
from .admit import Admission
from .alerts import Alerts
from .persist import StoreWriter

_logger = logging.getLogger("auditor.otel")

FindingCallback = Callable[[Finding], None]



class LiveAudit(StoreWriter, Admission, Alerts, ABC):
    """The worker, reorder window, detector, alerts and persistence behind every live door.

    A door subclass calls ``_enqueue(item)`` from application threads and provides
    ``_fast_events(item)`` (typed events, or None when the records need the checked path) and
    ``_records_of(item)`` (canonical records, ``otel.mapping``'s shape); a door that splits its
    records for the store ahead (serve's decoders) gives that split in ``_prepared_of(item)``,
    and the audit builds its events from the split's typed columns.

    ``on_finding(finding)`` is called from the worker thread once per incident: for the incident's
    first finding and again only when a finding raises its severity; the other findings of an
    incident are counted in ``incident_updates`` (and kept in ``findings``), not re-sent. A stale
    attempt waits for its outcome; ``shutdown`` reports the ones still open. Each alert is also
    logged as a warning on ``auditor.otel`` with its witness sentence; every finding is counted on
    the meter (``meter_provider``, else the global one). With ``db`` the canonical records are
    appended to that DuckDB store in batches (kept open while appends keep coming and closed once
    they pause, ``persist.HOLD_IDLE``, so ``auditor report --db`` can run in between; a locked
    store is retried on the next cycle).

    Memory is bounded: ``max_queue_size`` items wait for the worker (excess items are refused,
    counted in ``dropped_spans`` and logged once); the detector keeps state for at most
    ``max_workflow_keys`` keys (the least recently seen are settled and forgotten, counted in
    ``detector.evicted_keys``); ``findings`` keeps the latest ``max_findings``, and the incidents
    already alerted the latest ``max_findings`` ids. Events are held up to
    ``reorder_window_millis`` to put them in seq order; one arriving later than that is still
    audited (``detector.late_events``), and the store's batch report is the final word.

    Lease health (SPEC section 7) is exported on the same meter: ``auditor.lease.remaining`` and
    ``auditor.heartbeat.age`` (histograms, seconds), ``auditor.lease.expired``,
    ``auditor.lease.extension_failures`` and ``auditor.lease.reclaims``, with the key's
    ``lease_by`` dimensions (default ``tool``, ``model``, ``provider``, those its attrs carry) as
    attributes. Only keys that show lease evidence (``lease_until`` or ``heartbeat``) are followed,
    from that evidence on (``detect.lease.live.LeaseWatch``, at most ``max_workflow_keys`` of them): other
    events cost one dictionary lookup per key and batch.
    """

    #: the detector it feeds (``auditor serve`` re-evaluates keys on late evidence: ``Revisiting``)
    _detector_class: type[LiveDetector] = LiveDetector

    def __init__(self, on_finding: FindingCallback | None = None, *, meter_provider=None,
                 db: str | os.PathLike | None = None, max_queue_size: int = 8192,
                 schedule_delay_millis: float = 200.0, reorder_window_millis: float = 1000.0,
                 persist_interval_millis: float = 1000.0, max_workflow_keys: int = 100_000,
                 max_findings: int = 10_000, source_name: str | None = None,
                 logger: logging.Logger | None = None,
                 vocabulary: Vocabulary | str | os.PathLike | None = None,
                 lease_by: Iterable[str] | None = None, persist_batch: int | None = None,
                 max_unwritten: int | None = None) -> None:
        if max_queue_size <= 0:
            raise ValueError("max_queue_size must be a positive integer")
        self._lease_by = None if lease_by is None else tuple(lease_by)
        self._on_finding = on_finding
        self._vocabulary = vocabulary_of(vocabulary)  # a bad --map file raises here, not in a hook
        self._typed = self._vocabulary is DEFAULT  # the typed shortcuts know only the SPEC's own names
        self._shaped = self._vocabulary.shaped  # logs as teams write them: every log record is a line
        self._log = logger or _logger
        self._db = None if db is None else os.fspath(db)
        self._max_queue_size = max_queue_size
        self._delay = schedule_delay_millis / 1e3
        self._window = reorder_window_millis / 1e3
        self._persist_interval = persist_interval_millis / 1e3
        self._source_name = source_name
        self._batch_wake = max(1, max_queue_size // 4)
        # Records, not items (a door whose item is a whole request says how many): the worker hands
        # the store writer what it gathered once ``persist_batch`` wait, and waits for the writer
        # when more than ``max_unwritten`` are not yet written.
        self._persist_batch = persist_batch or max_queue_size
        self._max_unwritten = max_unwritten or 8 * max_queue_size
        self._metrics = Metrics(meter_provider, self)

        self._max_keys = max_workflow_keys
        self._max_findings = max_findings
        self.detector = self._detector_class(max_workflow_keys)
        self.lease = LeaseWatch(self._lease_by, max_workflow_keys)
        self.dropped_spans = 0        # queue full
        self.dropped_after_shutdown = 0
        self.unmapped = 0             # records the mapping could not turn into events
        self.ignored = 0              # records the vocabulary's [ignore] declares irrelevant (SPEC rev 3)
        self.unplaced = 0             # events without seq on a key ordered by seq (SPEC rev 3): not fed
        self.persisted = 0            # records handed to the store
        self.persist_failures = 0     # records lost because the store failed
        self.findings: deque[Finding] = deque(maxlen=max_findings)  # the latest reported, to inspect
        self._logged: set[str] = set()
        self._alerted: OrderedDict[str, Any] = OrderedDict()  # incident id -> severity alerted
        self.incident_updates = 0     # findings of an incident already alerted: counted, not re-sent
        self.suppressed_warnings = 0
        self._warn_window = (0.0, 0)  # (minute start, warnings in it)
        self.capped_spans = 0         # spans with evidence that hit the SDK's attribute or event limit
        self._shutdown = False
        self._stop = False
        self._init_state()
        if hasattr(os, "register_at_fork"):
            weak_reinit = weakref.WeakMethod(self._at_fork_reinit)

            def _after_in_child() -> None:
                if (reinit := weak_reinit()) is not None:
                    reinit()

            os.register_at_fork(after_in_child=_after_in_child)

    def _init_state(self) -> None:
        # Deque is thread safe; on_end appends, the worker pops.
        self._queue: deque[Any] = deque()
        self._wake = threading.Event()
        self._drop_lock = threading.Lock()
        self._waiters: deque[threading.Event] = deque()
        self._pending: dict[str, list] = {}      # workflow key -> heap of (seq, id, n, arrival, event)
        self._counter = itertools.count()
        self._observed: set[str] = set()         # keys ordered by arrival (their first event had no seq)
        self._arrivals = 0                       # events admitted: an observed key's events are placed by it
        self._lowered: dict[tuple[str, int], Confidence] = {}
        self._records: list[tuple[int, list[dict[str, Any]], Prepared | None]] = []  # see persist.py
        self._unpersisted = 0  # records in _records
        self._record_line = 0
        self._last_persist = time.monotonic()
        self._pid = os.getpid()
        self._reset_once = Once()
        self._reported = (0,) * 7
        self._writes: queue.Queue = queue.Queue()
        self._store = None  # the store writer's open Store (persist.py), None while closed
        self._store_opened = 0.0
        self._write_lock = threading.Lock()
        self._unwritten = 0
        if self._db is not None:
            threading.Thread(name=type(self).__name__ + ".store", target=self._writer_run, daemon=True).start()
        self._worker = threading.Thread(name=type(self).__name__, target=self._run, daemon=True)
        self._worker.start()

    def _at_fork_reinit(self) -> None:
        # The child starts from a fresh detector: the parent keeps (and reports) its own state.
        self.detector = self._detector_class(self._max_keys)
        self.lease = LeaseWatch(self._lease_by, self._max_keys)
        self.findings = deque(maxlen=self._max_findings)
        self._init_state()

    def _enqueue(self, item: Any, refuse: bool = False) -> bool:
        """Queue ``item`` for the worker; False when the queue is full: counted in
        ``dropped_spans``, unless ``refuse`` (the caller refuses it and its sender retries).
        O(1), thread safe, never raises on its own."""
        if len(self._queue) >= self._max_queue_size:
            if refuse:
                return False
            with self._drop_lock:
                self.dropped_spans += 1
            return False
        self._queue.append(item)
        if len(self._queue) >= self._batch_wake and not self._wake.is_set():
            self._wake.set()
        return True

    def _fast_events(self, item: Any) -> list[LiveEvent] | None:
        return None

    @abstractmethod
    def _records_of(self, item: Any) -> list[dict[str, Any]]:
        """The canonical records of one queued item; every door (spans, log records) says how."""

    def _prepared_of(self, item: Any) -> Prepared | None:
        """The item's records already split for the store (``store.typed.prepare``), if its door did."""
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Audit (and persist) every span ended before this call; False if ``timeout_millis`` passes first."""
        try:
            if self._shutdown or threading.current_thread() is self._worker:
                return False
            if self._pid != os.getpid():
                self._reset_once.do_once(self._at_fork_reinit)
            done = threading.Event()
            self._waiters.append(done)
            self._wake.set()
            return done.wait(max(0.0, timeout_millis / 1e3))
        except Exception:  # noqa: BLE001
            self._once("force_flush", "auditor: force_flush failed", exc_info=True)
            return False

    def shutdown(self, timeout_millis: int = 30000) -> None:
        """Flush, report the findings still open, persist, stop the worker. Idempotent."""
        try:
            if self._shutdown:
                return
            self._shutdown = True
            self._stop = True
            self._wake.set()
            if threading.current_thread() is not self._worker:
                self._worker.join(max(0.0, timeout_millis / 1e3))
        except Exception:  # noqa: BLE001
            self._once("shutdown", "auditor: shutdown failed", exc_info=True)

    # The worker thread.

    def _run(self) -> None:
        token = attach(set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
        try:
            while True:
                self._wake.wait(self._delay)
                self._wake.clear()
                stop = self._stop
                waiters = []
                while self._waiters:
                    waiters.append(self._waiters.popleft())
                try:
                    self._cycle(flush=stop or bool(waiters))
                    if stop:
                        self._report(self.detector.finish())
                        self._persist(force=True)
                        self._writes.put(None)
                        if self._db is not None:
                            self._writes.join()  # the writer has closed the store (a checkpoint)
                        self._publish_counts()
                except Exception:  # noqa: BLE001 - keep auditing whatever comes next
                    self._once("cycle", "auditor: the live audit failed on a batch of spans", exc_info=True)
                for w in waiters:
                    w.set()
                if stop:
                    return
        finally:
            detach(token)

    def _cycle(self, flush: bool) -> None:
        now = time.monotonic()
        queue = self._queue
        n = len(queue)
        persist = self._db is not None
        observed, pending, counter, push = self._observed, self._pending, self._counter, heapq.heappush
        for _ in range(n):
            item = queue.popleft()
            try:
                events = None if persist or not self._typed else self._fast_events(item)
                if events is not None:
                    for event in events:  # _admit_event, inlined: this loop runs per event
                        key = event.workflow_key
                        if key in observed:
                            self._admit_observed(key, event)
                            continue
                        if event.attrs is not None:
                            self._lower((key, event.seq), Confidence.MEDIUM)
                        heap = pending.get(key)
                        if heap is None:
                            heap = pending[key] = []
                        push(heap, (event.seq, "", next(counter), now, event))
                    continue
                records = self._records_of(item)
            except Exception:  # noqa: BLE001
                self.unmapped += 1
                self._once("map", "auditor: an item could not be mapped; it is not audited", exc_info=True)
                continue
            if persist and records:  # the store writer's part: first line, records, a split made ahead
                self._records.append((self._record_line + 1, records, self._prepared_of(item)))
                self._unpersisted += len(records)
            self._record_line += len(records)
            self._admit_all(records, now, self._split_events(item, len(records)))
        self._release(now, flush)
        if self.detector.spilled:
            spilled, self.detector.spilled = self.detector.spilled, []
            self._report(spilled)
            self._once("evicted", "auditor: more than %d workflow keys are live; the least recently seen "
                       "are forgotten (their open attempts reported now); raise max_workflow_keys",
                       self._max_keys)
        if len(self._observed) > self._max_keys:
            self._observed.clear()
        # Persisted once persist_batch records wait, every persist_interval, and as soon as the
        # items pause (a cycle found none: no batch to fill, the records go to the store now).
        if self._db is not None and (flush or now - self._last_persist >= self._persist_interval
                                     or self._unpersisted >= self._persist_batch or (n == 0 and self._records)):
            self._persist(force=flush)
        if self.dropped_spans and "dropped" not in self._logged:
            self._once("dropped", "auditor: span queue full (max_queue_size=%d): ownership spans are being "
                       "dropped and not audited; raise max_queue_size or audit the Collector's files",
                       self._max_queue_size)
        self._publish_counts()

    def _release(self, now: float, flush: bool) -> None:
        horizon = now - self._window
        feed = self.detector.feed
        pending = self._pending
        pop = heapq.heappop
        watched = self.lease.keys
        for k in list(pending):
            heap = pending[k]
            if k in watched:  # lease evidence: one lookup per key and batch, none per event
                while heap and (flush or heap[0][3] <= horizon):
                    self._feed(pop(heap)[4])
            while heap and (flush or heap[0][3] <= horizon):
                found = feed(pop(heap)[4])
                if found:
                    self._report(found)
            if not heap:
                del pending[k]

    def _feed(self, event: Event) -> None:
        if event.workflow_key in self.lease.keys:
            st = self.detector._keys.get(event.workflow_key)  # noqa: SLF001 - same package, read-only
            measured = self.lease.feed(event, None if st is None else st.max_epoch)
            if measured:
                self._metrics.lease(measured)
        found = self.detector.feed(event)
        if found:
            self._report(found)
