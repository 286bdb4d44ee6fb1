"""The live door: an OpenTelemetry span processor, and the span -> canonical event mapping.

SPEC section 6. Spans and span events that carry ``ownership.*`` attributes become canonical
events (``map_span``); the same mapping serves the OTLP JSON reader (``ingest.otlp``), so a span
seen live and the same span read back from a Collector file give the same record and event id.

``AuditSpanProcessor`` follows the SDK's own ``BatchProcessor``: ``on_end`` does O(1) work (a
cheap check, an append to a bounded deque) and no I/O; a daemon worker, woken by an Event or every
``schedule_delay_millis``, maps the spans, puts the events back in seq order per workflow key (a
short reorder window, because spans end in any order), feeds ``detect.live.LiveDetector`` and
reports each finding as it happens (callback, ``logging`` warning with the witness sentence, OTel
metrics). With ``db`` it appends the records to the DuckDB store from that worker, through the
store's one normalizer, so ``auditor report --db`` later gives the batch answer. Every hook is
guarded: nothing the processor does can raise into, block, or hide an exception of the host.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import json
import logging
import os
import re
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, attach, detach, set_value
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.sampling import AlwaysRecordSampler, Decision, SamplingResult
from opentelemetry.util._once import Once

from .detect.live import LiveDetector, LiveEvent, rfc3339
from .model import Confidence, Event, Finding, Grade, Kind, Owner, Reporter, SinkResult

__all__ = ["AuditSpanProcessor", "AuditAllSampler", "map_span", "span_records", "span_events", "event_from_record", "MappingError",
           "OWNERSHIP_ATTRIBUTES"]

_logger = logging.getLogger(__name__)

PREFIX = "ownership."

#: ``ownership.*`` span/event attributes and the canonical field each one fills (SPEC section 6).
OWNERSHIP_ATTRIBUTES: dict[str, str] = {
    "ownership.workflow_key": "workflow_key",
    "ownership.epoch": "epoch",
    "ownership.worker": "worker",
    "ownership.seq": "seq",
    "ownership.effect_key": "effect_key",
    "ownership.sink": "sink",
    "ownership.sink_result": "sink_result",
    "ownership.reporter": "reporter",
    "ownership.step_id": "step_id",
}
_FIELDS = tuple(OWNERSHIP_ATTRIBUTES.values())
_EVENT_ATTR = "ownership.event"
_TOOL_CALL_ID = "gen_ai.tool.call.id"  # kept in attrs, never an effect key: providers regenerate it


# The mapping: one span (SDK object or OTLP JSON, reduced to plain values) -> canonical records.

def map_span(trace_id: str, span_id: str, name: str, start_ns: int | None,
             attributes: Mapping[str, Any], events: Sequence[tuple[str, int | None, Mapping[str, Any], int]],
             resource: Mapping[str, Any], capped: bool) -> list[dict[str, Any]]:
    """The canonical records of one span, in SPEC section 2 field names, not yet normalized.

    A span carrying ``ownership.event`` is one record (at its start time); each span event named
    ``ownership.<kind>`` is one record (at its own time) that inherits the span's ``ownership.*``
    attributes unless it sets them itself. ``worker`` falls back to the resource's
    ``service.instance.id``. ``attrs`` holds the record's other attributes, the span name, the
    span's ``gen_ai.tool.call.id``, and ``otel.capped: true`` when span limits dropped attributes
    or events (the evidence may be incomplete). ``event_id`` is ``otel:<trace>:<span>:<n>``
    (``span`` for the span itself, else the event's index), stable across both doors.
    ``events`` items are ``(name, time_ns, attributes, dropped_attribute_count)``.
    """
    base: dict[str, Any] = {}
    own: dict[str, Any] = {}
    span_kind = None
    for k, v in attributes.items():
        field = OWNERSHIP_ATTRIBUTES.get(k)
        if field is not None:
            base[field] = v
        elif k == _EVENT_ATTR:
            span_kind = v
        else:
            own[k] = v
    if "worker" not in base:
        instance = resource.get("service.instance.id")
        if instance is not None:
            base["worker"] = instance
    out: list[dict[str, Any]] = []
    prefix = f"otel:{trace_id}:{span_id}:"
    if span_kind is not None:
        rec = dict(base)
        rec["kind"] = _kind_name(span_kind)
        if start_ns is not None:
            rec["ts"] = rfc3339(start_ns)
        rec["event_id"] = prefix + "span"
        own["otel.span_name"] = name
        if capped:
            own["otel.capped"] = True
        rec["attrs"] = own
        out.append(rec)
    call_id = own.get(_TOOL_CALL_ID)
    for i, (ev_name, ev_ns, ev_attrs, ev_dropped) in enumerate(events):
        if not ev_name.startswith(PREFIX):
            continue
        rec = dict(base)
        rec["kind"] = ev_name[len(PREFIX):]
        extra: dict[str, Any] = {}
        for k, v in ev_attrs.items():
            field = OWNERSHIP_ATTRIBUTES.get(k)
            if field is not None:
                rec[field] = v
            elif k != _EVENT_ATTR:
                extra[k] = v
        if ev_ns is not None:
            rec["ts"] = rfc3339(ev_ns)
        rec["event_id"] = prefix + str(i)
        if call_id is not None and _TOOL_CALL_ID not in extra:
            extra[_TOOL_CALL_ID] = call_id
        extra["otel.span_name"] = name
        if capped or ev_dropped:
            extra["otel.capped"] = True
        rec["attrs"] = extra
        out.append(rec)
    return out


def _kind_name(v: Any) -> Any:
    return v[len(PREFIX):] if isinstance(v, str) and v.startswith(PREFIX) else v


def _plain(mapping: Any) -> Mapping[str, Any]:
    """The dict inside the SDK's ``BoundedAttributes`` (its mapping methods take Python-level
    calls per key); any other mapping as it is."""
    if mapping is None:
        return {}
    inner = getattr(mapping, "_dict", None)
    return inner if isinstance(inner, dict) else mapping


def _dropped(mapping: Any) -> int:
    return getattr(mapping, "dropped", 0) or 0


def span_records(span: ReadableSpan) -> list[dict[str, Any]]:
    """``map_span`` for an SDK span.

    Reads the SDK's containers directly where it can (``_attributes``, ``_events``, as the
    SDK's own exporters do through ``ReadableSpan``'s properties, minus the copies) because this
    runs once per audited span.
    """
    ctx = span.context
    trace_id = format(ctx.trace_id, "032x") if ctx is not None else "0" * 32
    span_id = format(ctx.span_id, "016x") if ctx is not None else "0" * 16
    raw_attrs = getattr(span, "_attributes", None)
    raw_events = getattr(span, "_events", None)
    if raw_events is None:
        raw_events = span.events
    events = [(ev.name, ev.timestamp, _plain(getattr(ev, "_attributes", None)),
               _dropped(getattr(ev, "_attributes", None))) for ev in raw_events]
    capped = bool(_dropped(raw_attrs) or getattr(raw_events, "dropped", 0))
    resource = span.resource
    return map_span(trace_id, span_id, span.name, span.start_time, _plain(raw_attrs), events,
                    _plain(resource.attributes) if resource is not None else {}, capped)


def span_events(span: ReadableSpan) -> list[LiveEvent] | None:
    """The live path's shortcut: ``[event_from_record(r) for r in span_records(span)]`` without
    building the records, as ``LiveEvent`` tuples; None when one of them needs
    ``event_from_record``'s checks (an alias, a string integer, a missing field...).

    Same fields and values (pinned by tests/test_otel.py), except three the live detector
    does not need built per event: ``ts`` stays the span's nanoseconds (findings render it),
    ``event_id`` is None (events at one seq are then compared by value), and ``attrs`` is only
    ``{"otel.capped": True}`` for capped spans.
    """
    try:  # the SDK's own containers (BoundedAttributes, BoundedList); anything else: checked path
        raw_attrs, raw_events, ctx = span._attributes, span._events, span._context
        attrs, events = raw_attrs._dict, raw_events._dq
        capped = bool(raw_attrs.dropped or raw_events.dropped)
    except AttributeError:
        return None
    fields = OWNERSHIP_ATTRIBUTES
    base = {fields[k]: v for k, v in attrs.items() if k in fields}
    if "worker" not in base:
        resource = span._resource
        if resource is not None:
            worker = _plain(resource.attributes).get("service.instance.id")
            if worker is not None:
                base["worker"] = worker
    out: list[LiveEvent] = []
    span_kind = attrs.get(_EVENT_ATTR)
    if span_kind is not None:
        e = _typed_event(base, _kind_name(span_kind), span._start_time, capped)
        if e is None:
            return None
        out.append(e)
    for ev in events:
        name = ev._name
        if not name.startswith(PREFIX):
            continue
        ev_raw = ev._attributes
        f = base
        ev_capped = capped
        if ev_raw is not None:
            try:
                ev_attrs, ev_capped = ev_raw._dict, capped or bool(ev_raw.dropped)
            except AttributeError:
                return None
            if ev_attrs:
                own = {fields[k]: v for k, v in ev_attrs.items() if k in fields}
                if own:
                    f = {**base, **own}
        e = _typed_event(f, name[10:], ev._timestamp, ev_capped)
        if e is None:
            return None
        out.append(e)
    return out


_CAPPED = {"otel.capped": True}
_MAX = (1 << 63) - 1
_MIN = -(1 << 63)


def _typed_event(f: dict[str, Any], kind_name: Any, ts: int | None, capped: bool) -> LiveEvent | None:
    """``event_from_record``'s fast path over the mapped fields ``f``; None when it does not apply."""
    kind = _KINDS.get(kind_name) if type(kind_name) is str else None
    get = f.get
    key, s, epoch = get("workflow_key"), get("seq"), get("epoch")
    if (kind is None or type(key) is not str or type(s) is not int or type(epoch) is not int
            or epoch < 0 or epoch > _MAX or s < _MIN or s > _MAX or not key.strip()):
        return None
    effect_key, worker, sink, step_id = get("effect_key"), get("worker"), get("sink"), get("step_id")
    if not ((effect_key is None or type(effect_key) is str) and (worker is None or type(worker) is str)
            and (sink is None or type(sink) is str) and (step_id is None or type(step_id) is str)
            and (effect_key is not None or kind not in _NEEDS_EFFECT_KEY)):
        return None
    sink_result, reporter = get("sink_result"), get("reporter")
    sr = rep = None
    if sink_result is not None:
        sr = _SINK_RESULTS.get(sink_result) if type(sink_result) is str else None
        if sr is None:
            return None
        if kind is not Kind.EFFECT_ATTEMPTED:
            sr = None
    if reporter is not None:
        rep = _REPORTERS.get(reporter) if type(reporter) is str else None
        if rep is None:
            return None
    return LiveEvent(s, key, kind, epoch, worker or "unknown", effect_key, sink, sr, rep, step_id, ts,
                     None, _CAPPED if capped else None)


# Records -> events for the live detector. The batch door sends the same records through the
# store's SQL normalizer; this is its typed-attribute subset (OTel attributes already carry ints),
# pinned to it by tests/test_otel.py.

class MappingError(ValueError):
    """A record from a span cannot become a canonical event (the reason says which field)."""


_KIND_ALIASES = {"job_claimed": "lease_acquired", "heartbeat_ok": "progress", "heartbeat_lost": "progress",
                 "tool_request_started": "effect_attempted", "result_rejected": "effect_attempted"}
_KINDS = {k.value: k for k in Kind}
_SINK_RESULTS = {r.value: r for r in SinkResult}
_REPORTERS = {r.value: r for r in Reporter}
_INT64 = (-(1 << 63), (1 << 63) - 1)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_KIND_LIST = "lease_acquired, progress, effect_attempted, effect_committed, outcome_verified"
_NEEDS_EFFECT_KEY = (Kind.EFFECT_ATTEMPTED, Kind.EFFECT_COMMITTED, Kind.OUTCOME_VERIFIED)


def _shown(v: Any, width: int) -> str:
    """A value as the store's reasons show it (JSON text of non-strings), cut to ``width``."""
    return (v if isinstance(v, str) else json.dumps(v, default=str))[:width]


def _as_int(rec: dict[str, Any], field: str) -> int | None:
    v = rec.get(field)
    if v is None:
        return None
    n = None
    if isinstance(v, int) and not isinstance(v, bool):
        n = v
    elif isinstance(v, str) and _INTEGER.fullmatch(v.strip()):
        n = int(v.strip())
    if n is None or not _INT64[0] <= n <= _INT64[1]:
        raise MappingError(f'"{field}" is "{_shown(v, 40)}", expected an integer in int64 range')
    return n


def _as_str(rec: dict[str, Any], field: str) -> str | None:
    v = rec.get(field)
    return None if v is None else str(v)


def event_from_record(rec: dict[str, Any], seq: int | None = None) -> Event:
    """A canonical ``Event`` from a ``map_span`` record; raises ``MappingError`` with the reason.

    ``seq`` replaces a missing ``seq`` (the caller's observation order).
    """
    # Fast path: what instrumented spans carry (typed OTel attributes, canonical names).
    get = rec.get
    key, kind, s, epoch = get("workflow_key"), get("kind"), get("seq"), get("epoch")
    kind = _KINDS.get(kind) if type(kind) is str else None
    if (kind is not None and type(key) is str and type(s) is int and type(epoch) is int
            and 0 <= epoch <= _INT64[1] and _INT64[0] <= s <= _INT64[1] and key.strip()):
        effect_key, sink_result, reporter = get("effect_key"), get("sink_result"), get("reporter")
        worker, sink, step_id = get("worker"), get("sink"), get("step_id")
        if ((effect_key is None or type(effect_key) is str) and (worker is None or type(worker) is str)
                and (sink is None or type(sink) is str) and (step_id is None or type(step_id) is str)
                and (effect_key is not None or kind not in _NEEDS_EFFECT_KEY)):
            sr = _SINK_RESULTS.get(sink_result) if sink_result is not None else None
            rep = _REPORTERS.get(reporter) if reporter is not None else None
            if (sink_result is None or sr is not None) and (reporter is None or rep is not None):
                return Event(s, key, kind, epoch, worker or "unknown", effect_key, sink,
                             sr if kind is Kind.EFFECT_ATTEMPTED else None, rep, step_id, get("ts"),
                             get("event_id"), get("attrs") or None)
    return _event_checked(rec, seq)


def _event_checked(rec: dict[str, Any], seq: int | None) -> Event:
    key = rec.get("workflow_key")
    if key is None or (isinstance(key, str) and not key.strip()):
        raise MappingError('"workflow_key" is missing; add the unit that must have one effect owner '
                           "(or job_id / run_id)")
    if rec.get("kind") is None:
        raise MappingError('"kind" is missing; expected one of ' + _KIND_LIST)
    raw_kind = _shown(rec["kind"], 1 << 10).strip().lower().rsplit(".", 1)[-1]
    kind = _KINDS.get(_KIND_ALIASES.get(raw_kind, raw_kind))
    if kind is None:
        raise MappingError(f'"kind" is "{_shown(rec["kind"], 60)}", expected one of {_KIND_LIST}')
    s = _as_int(rec, "seq")
    epoch = _as_int(rec, "epoch")
    if epoch is not None and epoch < 0:
        raise MappingError(f'"epoch" is {epoch}, expected an integer >= 0')
    if epoch is None and kind is not Kind.OUTCOME_VERIFIED:
        raise MappingError(f'"epoch" is missing; every {kind} needs the owner epoch it was produced under')
    effect_key = _as_str(rec, "effect_key")
    if effect_key is None and kind in _NEEDS_EFFECT_KEY:
        raise MappingError(f'"effect_key" is missing; every {kind} needs the effect key it concerns')
    sink_result = None
    if raw_kind == "result_rejected":
        sink_result = SinkResult.REJECTED
    elif rec.get("sink_result") is not None:
        text = _shown(rec["sink_result"], 1 << 10).strip().lower()
        sink_result = _SINK_RESULTS.get(text)
        if sink_result is None:
            raise MappingError(f'"sink_result" is "{text[:40]}", expected accepted, rejected or unknown')
    if kind is not Kind.EFFECT_ATTEMPTED:
        sink_result = None
    reporter = None
    if rec.get("reporter") is not None:
        text = _shown(rec["reporter"], 1 << 10).strip().lower()
        reporter = _REPORTERS.get(text)
        if reporter is None:
            raise MappingError(f'"reporter" is "{text[:40]}", expected coordinator, sink, worker or verifier')
    if s is None:
        if seq is None:
            raise MappingError('"seq" is missing')
        s = seq
    return Event(seq=s, workflow_key=str(key), kind=kind, epoch=epoch,
                 worker=_as_str(rec, "worker") or "unknown", effect_key=effect_key,
                 sink=_as_str(rec, "sink"), sink_result=sink_result, reporter=reporter,
                 step_id=_as_str(rec, "step_id"), ts=rec.get("ts"), event_id=rec.get("event_id"),
                 attrs=rec.get("attrs") or None)


# Sampling: audit every span, export only the sampled ones.

class AuditAllSampler(AlwaysRecordSampler):
    """The SDK's ``AlwaysRecordSampler`` that also keeps the attributes a span was started with.

    Wrap your sampler to have every span reach span processors (this one audits it) while
    exporters still get only the sampled ones. The SDK's built-in samplers return no attributes
    with a DROP decision, so the plain ``AlwaysRecordSampler`` records such spans without the
    ``ownership.*`` attributes passed to ``start_span``; this subclass puts them back.
    """

    def should_sample(self, parent_context, trace_id, name, kind=None, attributes=None, links=None,
                      trace_state=None) -> SamplingResult:
        result = self._root.should_sample(parent_context, trace_id, name, kind, attributes, links, trace_state)
        if result.decision is Decision.DROP:
            return SamplingResult(Decision.RECORD_ONLY, attributes, result.trace_state)
        return result

    def get_description(self) -> str:
        return f"AuditAllSampler{{{self._root.get_description()}}}"


# The processor.

FindingCallback = Callable[[Finding], None]


class AuditSpanProcessor(SpanProcessor):
    """Audits ownership evidence in spans as they end. Add it with ``provider.add_span_processor``.

    ``on_finding(finding)`` is called from the processor's worker thread for each finding as it
    becomes certain (a stale attempt waits for its outcome; ``shutdown`` reports the ones still
    open). Each finding is also logged as a warning on ``auditor.otel`` with its witness
    sentence, and counted on ``meter_provider`` when one is given. With ``db`` the canonical
    records are appended to that DuckDB store (opened per append, so ``auditor report --db``
    can run in between; a locked store is retried on the next cycle).

    Only spans that reach processors are seen: to audit spans your sampler drops, build the
    provider with ``sampler=AuditAllSampler(your_sampler)`` (exporters still only get sampled
    spans). Live detection sees this process's spans only; for workers in several processes
    export spans to a Collector and audit its files (or give every process the same ``db``).

    Memory is bounded: ``max_queue_size`` spans wait for the worker (excess spans are dropped,
    counted in ``dropped_spans`` and logged once); the detector keeps state for at most
    ``max_workflow_keys`` keys (the least recently seen are settled and forgotten, counted in
    ``detector.evicted_keys``); ``findings`` keeps the latest ``max_findings``. Events are held up to
    ``reorder_window_millis`` to put them in seq order; one arriving later than that is still
    audited (``late_events``), and the store's batch report is the final word.
    """

    def __init__(self, on_finding: FindingCallback | None = None, *, meter_provider=None,
                 db: str | os.PathLike | None = None, max_queue_size: int = 8192,
                 schedule_delay_millis: float = 200.0, reorder_window_millis: float = 1000.0,
                 persist_interval_millis: float = 1000.0, max_workflow_keys: int = 100_000,
                 max_findings: int = 10_000, source_name: str | None = None,
                 logger: logging.Logger | None = None) -> None:
        if max_queue_size <= 0:
            raise ValueError("max_queue_size must be a positive integer")
        self._on_finding = on_finding
        self._log = logger or _logger
        self._db = None if db is None else os.fspath(db)
        self._max_queue_size = max_queue_size
        self._delay = schedule_delay_millis / 1e3
        self._window = reorder_window_millis / 1e3
        self._persist_interval = persist_interval_millis / 1e3
        self._source_name = source_name
        self._batch_wake = max(1, max_queue_size // 4)
        self._metrics = _Metrics(meter_provider) if meter_provider is not None else None

        self._max_keys = max_workflow_keys
        self._max_findings = max_findings
        self.detector = LiveDetector(max_workflow_keys)
        self.dropped_spans = 0        # queue full
        self.dropped_after_shutdown = 0
        self.unmapped = 0             # records the mapping could not turn into events
        self.persisted = 0            # records handed to the store
        self.persist_failures = 0     # records lost because the store failed
        self.findings: deque[Finding] = deque(maxlen=max_findings)  # the latest reported, to inspect
        self._logged: set[str] = set()
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
        self._queue: deque[ReadableSpan] = deque()
        self._wake = threading.Event()
        self._drop_lock = threading.Lock()
        self._waiters: deque[threading.Event] = deque()
        self._pending: dict[str, list] = {}      # workflow key -> heap of (seq, id, n, arrival, event)
        self._counter = itertools.count()
        self._observed: dict[str, int] = {}      # keys ordered by arrival (seq missing): last seq given
        self._lowered: dict[tuple[str, int], Confidence] = {}
        self._records: list[tuple[int, dict[str, Any]]] = []
        self._record_line = 0
        self._last_persist = time.monotonic()
        self._pid = os.getpid()
        self._reset_once = Once()
        self._reported = (0, 0, 0)
        self._worker = threading.Thread(name="AuditSpanProcessor", target=self._run, daemon=True)
        self._worker.start()

    def _at_fork_reinit(self) -> None:
        # The child starts from a fresh detector: the parent keeps (and reports) its own state.
        self.detector = LiveDetector(self._max_keys)
        self.findings = deque(maxlen=self._max_findings)
        self._init_state()

    # Hooks called by the SDK, on application threads: O(1), no I/O, never raise.

    def on_start(self, span: Span, parent_context=None) -> None:
        return None

    def _on_ending(self, span: Span) -> None:
        return None

    def on_end(self, span: ReadableSpan) -> None:
        try:
            if self._shutdown:
                self.dropped_after_shutdown += 1
                return
            # A forked child was re-initialized by the at-fork hook (no getpid per span).
            try:  # the SDK's containers, without the copies its properties make
                attrs = span._attributes._dict
                events = span._events._dq
            except AttributeError:
                attrs, events = span.attributes, span.events
            if _EVENT_ATTR not in attrs:
                for ev in events:
                    if ev.name.startswith(PREFIX):
                        break
                else:
                    return
            if len(self._queue) >= self._max_queue_size:
                with self._drop_lock:
                    self.dropped_spans += 1
                return
            self._queue.append(span)
            if len(self._queue) >= self._batch_wake and not self._wake.is_set():
                self._wake.set()
        except Exception:  # noqa: BLE001 - a hook must never raise into the host
            self._once("on_end", "auditor: on_end failed; this span is not audited", exc_info=True)

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
            span = queue.popleft()
            try:
                events = None if persist else span_events(span)
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
                records = span_records(span)
            except Exception:  # noqa: BLE001
                self.unmapped += 1
                self._once("map", "auditor: a span could not be mapped; it is not audited", exc_info=True)
                continue
            for rec in records:
                self._record_line += 1
                if persist:
                    self._records.append((self._record_line, rec))
                self._admit(rec, now)
        self._release(now, flush)
        if self.detector.spilled:
            spilled, self.detector.spilled = self.detector.spilled, []
            self._report(spilled)
            self._once("evicted", "auditor: more than %d workflow keys are live; the least recently seen "
                       "are forgotten (their open attempts reported now); raise max_workflow_keys",
                       self._max_keys)
        if len(self._observed) > self._max_keys:
            self._observed.clear()
        if self._db is not None and (flush or now - self._last_persist >= self._persist_interval
                                     or len(self._records) >= self._max_queue_size):
            self._persist(force=flush)
        if self.dropped_spans and "dropped" not in self._logged:
            self._once("dropped", "auditor: span queue full (max_queue_size=%d): ownership spans are being "
                       "dropped and not audited; raise max_queue_size or audit the Collector's files",
                       self._max_queue_size)
        self._publish_counts()

    def _admit(self, rec: dict[str, Any], now: float) -> None:
        """One record from span_records: checked, then queued for the detector."""
        key = rec.get("workflow_key")
        try:
            if key in self._observed or (rec.get("seq") is None and isinstance(key, str)):
                self._admit_observed(key, event_from_record(rec, seq=0))
            else:
                self._admit_event(event_from_record(rec), now)
        except MappingError as e:
            self.unmapped += 1
            self._once("unmapped:" + str(e), "auditor: ownership evidence not audited live: %s "
                       "(the store quarantines it with this reason)", e)
        except Exception:  # noqa: BLE001 - e.g. an unhashable key: skip this record, keep the batch
            self.unmapped += 1
            self._once("admit", "auditor: a record could not be audited live", exc_info=True)

    def _admit_event(self, event: Event, now: float) -> None:
        """Hold ``event`` in its key's reorder heap (seq order) until the window passes."""
        if event.attrs is not None and event.attrs.get("otel.capped"):
            self._lower((event.workflow_key, event.seq), Confidence.MEDIUM)
        heap = self._pending.get(event.workflow_key)
        if heap is None:
            heap = self._pending[event.workflow_key] = []
        heapq.heappush(heap, (event.seq, event.event_id or "", next(self._counter), now, event))

    def _admit_observed(self, key: str, event: Event) -> None:
        """A key without seq is ordered by arrival, as the batch audit orders it by file position."""
        last = self._observed.get(key)
        if last is None:
            last = self._last_fed_seq(key) or 0
        self._observed[key] = last + 1
        event = (event._replace(seq=last + 1) if isinstance(event, LiveEvent)
                 else dataclasses.replace(event, seq=last + 1))
        self._lower((key, event.seq), Confidence.LOW)
        self._feed(event)  # arrival order is the order: nothing to wait for

    def _lower(self, where: tuple[str, int], confidence: Confidence) -> None:
        if len(self._lowered) > 100_000:  # bounded: old marks go first
            self._lowered.clear()
        if self._lowered.get(where) is not Confidence.LOW:
            self._lowered[where] = confidence

    def _last_fed_seq(self, key: str) -> int | None:
        st = self.detector._keys.get(key)  # noqa: SLF001 - same package, read-only
        return None if st is None else st.last_seq

    def _release(self, now: float, flush: bool) -> None:
        horizon = now - self._window
        feed = self.detector.feed
        pending = self._pending
        pop = heapq.heappop
        for k in list(pending):
            heap = pending[k]
            while heap and (flush or heap[0][3] <= horizon):
                found = feed(pop(heap)[4])
                if found:
                    self._report(found)
            if not heap:
                del pending[k]

    def _feed(self, event: Event) -> None:
        found = self.detector.feed(event)
        if found:
            self._report(found)

    def _report(self, findings: list[Finding]) -> None:
        for f in findings:
            self.findings.append(f)
            if self._metrics is not None:
                self._metrics.finding(f)
            try:
                self._warn(f)
            except Exception:  # noqa: BLE001
                self._once("warn", "auditor: could not log a finding", exc_info=True)
            if self._on_finding is not None:
                try:
                    self._on_finding(f)
                except Exception:  # noqa: BLE001 - the user's callback must not stop the audit
                    self._once("callback", "auditor: the on_finding callback raised", exc_info=True)

    def confidence(self, f: Finding) -> Confidence:
        """How far the live evidence of ``f`` can be trusted (SPEC section 3, per finding)."""
        lowered = [self._lowered.get((f.workflow_key, s)) for s in (f.seq, f.receipt_seq) if s is not None]
        if Confidence.LOW in lowered:
            return Confidence.LOW
        if Confidence.MEDIUM in lowered or (f.kind is Kind.EFFECT_COMMITTED and f.reporter == "worker"):
            return Confidence.MEDIUM
        return Confidence.HIGH

    def witness(self, f: Finding) -> str:
        """The witness sentence of one finding, in the words of ``explain.witness``."""
        from .explain import witness

        transition = None
        if f.transition_seq is not None:
            transition = self._owner_at(f.workflow_key, f.transition_seq)
        return witness(transition, f.transition_seq, [f])

    def _owner_at(self, key: str, seq: int) -> Owner | None:
        st = self.detector._keys.get(key)  # noqa: SLF001 - same package, read-only
        if st is None:
            return None
        for s, epoch, worker in zip(st.rec_seqs, st.rec_epochs, st.rec_workers):
            if s == seq:
                return Owner(worker, epoch)
        return None

    def _warn(self, f: Finding) -> None:
        confidence = self.confidence(f)
        self._log.warning(
            "split-brain %s on %s at seq %d (confidence %s): %s", f.grade.value, f.workflow_key, f.seq,
            confidence.value, self.witness(f),
            extra={"ownership.grade": f.grade.value, "ownership.workflow_key": f.workflow_key,
                   "ownership.seq": f.seq, "ownership.epoch": f.epoch, "auditor.finding_id": f.id,
                   "auditor.incident_id": f.incident_id, "auditor.confidence": confidence.value})

    def _persist(self, force: bool) -> None:
        if not self._records:
            return
        from .store import Store, StoreError, StoreLocked

        batch, self._records = self._records, []
        try:
            with Store(self._db, lock_timeout=2.0 if force else 0.2) as store:
                store.append_records(self._store_source(), batch)
            self.persisted += len(batch)
            self._last_persist = time.monotonic()
        except StoreLocked:
            self._records = batch + self._records
            overflow = len(self._records) - 4 * self._max_queue_size
            if overflow > 0:
                del self._records[:overflow]
                self.persist_failures += overflow
            self._once("locked", "auditor: %s is locked by another process; records are kept and "
                       "appended when it is free", self._db)
        except (StoreError, OSError, ValueError) as e:
            self.persist_failures += len(batch)
            self._once("persist:" + type(e).__name__, "auditor: could not persist to %s: %s", self._db, e)

    def _store_source(self) -> str:
        return self._source_name or f"otel:pid-{os.getpid()}"

    def _publish_counts(self) -> None:
        if self._metrics is None:
            return
        d = self.detector
        now = (d.reclaims, d.stale_events, self.dropped_spans)
        before = self._reported
        self._reported = now
        self._metrics.counts(now[0] - before[0], now[1] - before[1], now[2] - before[2])

    def _once(self, key: str, msg: str, *args: Any, exc_info: bool = False) -> None:
        if key in self._logged:
            return
        try:
            self._logged.add(key)
            self._log.warning(msg, *args, exc_info=exc_info)
        except Exception:  # noqa: BLE001 - even a broken logging setup must not escape
            pass


class _Metrics:
    """The processor's instruments on the given MeterProvider."""

    def __init__(self, meter_provider) -> None:
        meter = meter_provider.get_meter("auditor.otel")
        self._findings = meter.create_counter(
            "auditor.findings", unit="{finding}", description="Split-brain findings, by grade")
        self._reclaims = meter.create_counter(
            "auditor.reclaimed_acquisitions", unit="{acquisition}",
            description="Lease acquisitions that took a workflow key from a lower epoch")
        self._stale = meter.create_counter(
            "auditor.stale_events", unit="{event}",
            description="Progress and effect events produced under a displaced epoch")
        self._dropped = meter.create_counter(
            "auditor.dropped_spans", unit="{span}", description="Ownership spans dropped: queue full")
        self._by_grade = {g: {"ownership.grade": g.value} for g in Grade}

    def finding(self, f: Finding) -> None:
        self._findings.add(1, self._by_grade[f.grade])

    def counts(self, reclaims: int, stale: int, dropped: int) -> None:
        if reclaims:
            self._reclaims.add(reclaims)
        if stale:
            self._stale.add(stale)
        if dropped:
            self._dropped.add(dropped)
