"""The span door: ``AuditSpanProcessor``, an OpenTelemetry span processor (SPEC section 6).

``on_end`` does a cheap check (does the span carry ``ownership.*`` evidence?) and hands the span
to the live audit's core (``otel.core.LiveAudit``), which maps it (``otel.mapping``), converts it
(``otel.convert``) and audits it on its own worker thread.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from .convert import span_events
from .core import FindingCallback, LiveAudit
from ..ingest.otel_mapping import _EVENT_ATTR, PREFIX, span_records

__all__ = ["AuditSpanProcessor", "FindingCallback"]


class AuditSpanProcessor(LiveAudit, SpanProcessor):
    """Audits ownership evidence in spans as they end. Add it with ``provider.add_span_processor``.

    Everything ``LiveAudit`` says holds (one alert per incident, bounded memory, ``db``). Only
    spans that reach processors are seen: to audit spans your sampler (or an unsampled upstream
    parent) drops, use ``AuditAllSampler`` outermost (``OTEL_TRACES_SAMPLER=audit_parentbased_always_on``),
    or record evidence as log records (``auditor.otel.ownership``), which no trace sampler drops.
    A span that hit the SDK's event or attribute limit with evidence on it is audited with what is
    left, counted in ``capped_spans`` and warned about (rate-limited): the limit drops the oldest
    events first, so an early commit can be gone.
    """

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
            self._enqueue(span)
        except Exception:  # noqa: BLE001 - a hook must never raise into the host
            self._once("on_end", "auditor: on_end failed; this span is not audited", exc_info=True)

    # The worker's side.

    def _fast_events(self, span: Any):
        events = span_events(span)
        # A capped span's events carry the capped mark; none left (the cap took them all) or the
        # checked way (None): look at the span itself. Uncapped spans skip the lookups.
        if not events or events[-1].attrs is not None:
            self._check_capped(span)
        return events

    def _records_of(self, span: Any):
        if self._db is not None:  # with a store the fast path is skipped: check here instead
            self._check_capped(span)
        return span_records(span)

    def _check_capped(self, span: Any) -> None:
        events = getattr(span, "_events", None)
        dropped = getattr(events, "dropped", 0) or 0
        if not dropped:
            dropped_attrs = getattr(getattr(span, "_attributes", None), "dropped", 0) or 0
            if not dropped_attrs:
                return
        self.capped_spans += 1
        self._limited("auditor: span %r hit the SDK's span limits with ownership evidence on it "
                      "(%d events dropped, the oldest first): evidence may be lost; raise "
                      "OTEL_SPAN_EVENT_COUNT_LIMIT or record evidence as log records "
                      "(auditor.otel.ownership)", getattr(span, "name", "?"), dropped)
