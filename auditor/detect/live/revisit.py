"""A live detector that re-evaluates a workflow key when evidence arrives late.

``LiveDetector`` decides each event as it comes: a takeover fed after the commits it makes stale
(below its key's newest seq, past the live door's reorder window) raises no finding for them, and
a key forgotten under a flood of other keys starts afresh. ``Revisiting`` keeps the events of the
keys it has seen (at most ``max_events`` in all, the least recently fed keys forgotten first, so
one key's history survives a flood of keys with a few events each) and, on an event below its
key's newest seq or for a key the detector had forgotten, feeds the key's whole history again in
seq order to a fresh state: the findings the late evidence makes certain are returned, those
reported before are not returned again. A key of more than ``MAX_REPLAY`` events is decided
as ``LiveDetector`` does (``too_long``).
"""

from __future__ import annotations

from collections import OrderedDict

from ...core.model import Event, Finding
from .detector import LiveDetector

#: Events kept for re-evaluation, over all keys (a few hundred bytes each).
MAX_EVENTS = 250_000
#: A key with more events than this is not re-evaluated (each late event would replay all of
#: them: a sender trickling late events into a long key must not make the live audit quadratic).
MAX_REPLAY = 10_000


class Revisiting(LiveDetector):
    """``LiveDetector`` with late evidence re-evaluated over its key's kept history."""

    def __init__(self, max_keys: int | None = None, max_events: int = MAX_EVENTS) -> None:
        super().__init__(max_keys)
        self._history: OrderedDict[str, list[Event]] = OrderedDict()
        self._kept = 0
        self._max_events = max_events
        self._replaying = False
        self.revisited = 0   # keys re-evaluated on late evidence
        self.forgotten = 0   # keys whose history was dropped to stay within max_events
        self.too_long = 0    # late events on keys past MAX_REPLAY: decided as LiveDetector does

    def feed(self, e: Event) -> list[Finding]:
        if self._replaying:
            return super().feed(e)
        key = e.workflow_key
        history = self._history.get(key)
        st = self._keys.get(key)
        late = history is not None and (st is None or (st.last_seq is not None and e.seq < st.last_seq))
        self._keep(key, e, history)
        if not late:
            return super().feed(e)
        if len(history) > MAX_REPLAY:
            self.too_long += 1
            return super().feed(e)
        return self._revisit(key, st)

    def _keep(self, key: str, e: Event, history: list[Event] | None) -> None:
        if history is None:
            history = self._history[key] = []
        else:
            self._history.move_to_end(key)
        history.append(e)
        self._kept += 1
        while self._kept > self._max_events and self._history:
            _, dropped = self._history.popitem(last=False)
            self._kept -= len(dropped)
            self.forgotten += 1

    def _revisit(self, key: str, st) -> list[Finding]:
        """Feed ``key``'s kept events again in seq order to a fresh state; what was not reported."""
        before = set(st.emitted or ()) if st is not None else set()
        self._keys.pop(key, None)
        self.revisited += 1
        self._replaying = True
        events = self.events
        try:
            found: list[Finding] = []
            for event in sorted(self._history.get(key, ()), key=lambda ev: ev.seq):
                found += super().feed(event)
        finally:
            self._replaying = False
            self.late_events += 1
            self.events = events + 1
        return [f for f in found if (f.grade, f.place) not in before]
