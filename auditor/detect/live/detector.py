"""Stage 4, detect, one event at a time: SPEC section 3 as an incremental state machine.

The set-based detector (``detect.sql``) sees the whole log at once; this one is fed events in
authoritative order (per workflow key) and keeps only what the rules need: per key, the
acquisitions that raised the highest epoch (the "records", increasing in both seq and epoch, a
handful per key), the epochs that committed each effect key and each step, and the stale attempts
still waiting for their outcome. Work per event is a few dict lookups (a bisect over the records
only when an event arrives behind its key's newest seq). It is the OTel processor's detector and
the plain-Python reference for the batch detector; ``tests/detect/test_live_detector.py`` pins the two
together.

Contract: ``feed`` returns the findings that became certain with that event (a stale attempt
waits for its rejection or commit); ``finish`` returns those still pending (their outcome is the
attempt's own verdict: ``committed`` when the sink accepted it, else ``unknown``) and settles the
``unacquired_epoch`` diagnostics. Not thread-safe: one feeder at a time.

Fed out of order (an event below its key's newest seq, e.g. a span that ended late), staleness
and the double-commit seqs are still decided by seq, not arrival; an attempt whose rejection or
commit was already fed stays pending and is reported by ``finish`` with the verdict it carries.
Such events are counted in ``late_events``; the store's batch audit is the final word. Likewise
two commits sharing one seq (an ordering conflict): the double commit reported when the first
arrives is not amended by the second.
"""

from __future__ import annotations

import gc
import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Iterable


from ...core.model import (Diagnostic, DiagnosticKind, Event, Finding, Grade, Kind, Outcome, SinkResult)
from ...rules import diagnostic_id, diagnostic_order, finding_order
from . import authority as live_authority
from .event import LiveEvent
from .keystate import KeyState, attempt_finding, finding, first_of_epoch, same_seq
from ...core.instants import rfc3339

__all__ = ["LiveDetector", "LiveEvent", "detect_events", "rfc3339"]

_ACQ = Kind.LEASE_ACQUIRED
_PROGRESS = Kind.PROGRESS
_ATTEMPT = Kind.EFFECT_ATTEMPTED
_COMMIT = Kind.EFFECT_COMMITTED
_REJECTED = SinkResult.REJECTED
_VERIFIED = Kind.OUTCOME_VERIFIED
_COMPENSATED = Kind.EFFECT_COMPENSATED
_AUTHORITY_KINDS = frozenset({Kind.AUTHORITY_GRANTED, Kind.AUTHORITY_REVOKED, Kind.RESUMED, Kind.REVALIDATED})
#: Section 8 kinds recorded outside an owner epoch (their epoch is optional) and those an owner
#: records (resumed, revalidated): neither is a stale effect; the authority rules read them.
_RECORDED = frozenset({Kind.AUTHORITY_GRANTED, Kind.AUTHORITY_REVOKED, Kind.EFFECT_COMPENSATED})
_OWNER_RECORDS = frozenset({Kind.RESUMED, Kind.REVALIDATED})


class LiveDetector:
    """SPEC section 3, incrementally. Feed events (``Event`` or ``LiveEvent``) in seq order per key.

    Counters (read them at any time): ``events``, ``duplicates`` (the same event, id and
    content, fed again at the same seq), ``late_events`` (below the key's newest seq), ``stale_events``
    (evidence under a displaced epoch), ``reclaims`` (acquisitions that displaced a lower
    epoch), ``idempotent_retries`` (an epoch committing an effect key it already committed).
    """

    def __init__(self, max_keys: int | None = None) -> None:
        if max_keys is not None and max_keys < 1:
            raise ValueError("max_keys must be a positive integer")
        self._keys: dict[str, KeyState] = {}
        self._diagnostics: list[Diagnostic] = []
        self._max_keys = max_keys
        self.spilled: list[Finding] = []  # settled when their key was evicted; take them
        self.evicted_keys = 0
        self.events = 0
        self.duplicates = 0
        self.late_events = 0
        self.stale_events = 0
        self.reclaims = 0
        self.idempotent_retries = 0
        self.withdrawn: list[str] = []  # ids of findings reported before and replaced since (compensated)

    @staticmethod
    def _owner_below(st: KeyState, s: int) -> int:
        """How many records have seq < s (the latest of them is the owner at s)."""
        seqs = st.rec_seqs
        if not seqs or seqs[-1] < s:
            return len(seqs)
        return bisect_left(seqs, s)

    def feed(self, e: Event) -> list[Finding]:
        """Apply one event; return the findings it made certain (maybe at earlier seqs)."""
        st = self._keys.get(e.workflow_key)
        if st is None:
            if self._max_keys is not None and len(self._keys) >= self._max_keys:
                self._evict()
            st = self._keys[e.workflow_key] = KeyState()
        st.touched = self.events
        s = e.seq
        last = st.last_seq
        if last is None or s > last:
            st.last_seq = s
            st.at_last_seq = e
        elif s == last:
            if same_seq(self, st, e):
                return []
        else:
            self.late_events += 1
        self.events += 1
        found = self._apply(st, e, s)
        kind = e.kind
        if st.authority is not None or kind in _AUTHORITY_KINDS or e.authority_id is not None:
            found = live_authority.authorize(self, st, e, found)
        elif st.verdicts:
            found = [live_authority.verdict_of(st, f) for f in found]
        if kind is _COMPENSATED and st.doubles:
            found = found + live_authority.compensate(self, st, e)
        if found:
            for f in found:
                if f.grade is Grade.DOUBLE_COMMIT:
                    if st.doubles is None:
                        st.doubles = {}
                    st.doubles.setdefault(f.effect_key, []).append(f)
            # One finding per (grade, seq): events sharing a seq (an ordering conflict) or fed
            # late can reach the same conclusion twice; the batch detector reports it once.
            emitted = st.emitted
            if emitted is None:
                emitted = st.emitted = set()
            unique = []
            for f in found:
                if (f.grade, f.place) not in emitted:
                    emitted.add((f.grade, f.place))
                    unique.append(f)
            found = unique
        return found

    def _apply(self, st: KeyState, e: Event, s: int) -> list[Finding]:
        kind = e.kind
        if kind is _ACQ:
            self._acquire(st, e)
            return []
        p = e.epoch
        if p is None or kind in _RECORDED:  # recorded by a coordinator, sink or verifier, not
            return []                       # under an owner epoch: never a finding, never evidence
        if p != st.max_epoch and (st.acquired is None or p not in st.acquired):
            evidence = st.evidence
            if evidence is None:
                evidence = st.evidence = {}
            first = evidence.get(p)
            if first is None or s < first.seq:
                evidence[p] = e
        if kind is _VERIFIED or kind in _OWNER_RECORDS:  # resumed, revalidated: evidence of the
            return []                                       # epoch, never a stale effect here

        seqs = st.rec_seqs
        n = len(seqs)
        if n and seqs[-1] >= s:
            n = bisect_left(seqs, s)
        if n and p < st.rec_epochs[n - 1]:
            self.stale_events += 1
            cur_epoch, cur_worker = st.rec_epochs[n - 1], st.rec_workers[n - 1]
            t = bisect_right(st.rec_epochs, p, 0, n)
            transition = (seqs[t], st.rec_positions[t])
            if kind is _PROGRESS:
                return [finding(Grade.STALE_ACTIVITY, e, cur_epoch, cur_worker, transition)]
            if kind is _ATTEMPT:
                if e.sink_result is _REJECTED:
                    return self._reject(st, e, True, cur_epoch, cur_worker, transition)
                pending = st.pending
                if pending is None:
                    pending = st.pending = {}
                waiting = pending.get((p, e.effect_key))
                if waiting is None:
                    pending[(p, e.effect_key)] = [(e, cur_epoch, cur_worker, transition)]
                else:
                    waiting.append((e, cur_epoch, cur_worker, transition))
                return []
            return self._commit(st, e, True, cur_epoch, cur_worker, transition)
        # Not stale: only resolutions of earlier stale attempts and double commits can follow.
        if kind is _PROGRESS:
            return []
        if kind is _ATTEMPT:
            if e.sink_result is _REJECTED and st.pending:
                return self._reject(st, e, False, None, None, None)
            return []
        return self._commit(st, e, False, None, None, None)

    def _acquire(self, st: KeyState, e: Event) -> None:
        s, p = e.seq, e.epoch
        if st.acquired is None:
            st.acquired = {p}
        else:
            st.acquired.add(p)
        if st.evidence:
            st.evidence.pop(p, None)
        if st.last_acq_seq is None or s >= st.last_acq_seq:
            # In order: compare with every acquisition fed so far (same-seq ones included, as
            # the batch detector's running maximum does).
            st.last_acq_seq, st.last_acq_position = s, e.position
            high = st.max_epoch
            if high is not None and p <= high:
                self._regression(e, high)
                return
            if high is not None:
                self.reclaims += 1
            st.rec_seqs.append(s)
            st.rec_epochs.append(p)
            st.rec_workers.append(e.worker)
            st.rec_positions.append(e.position)
            st.max_epoch = p
            return
        # Late: insert it where its seq puts it and drop the records it now dominates.
        n = bisect_left(st.rec_seqs, s)
        high = st.rec_epochs[n - 1] if n else None
        if high is not None and p <= high:
            self._regression(e, high)
            return
        if high is not None:
            self.reclaims += 1
        end = n
        while end < len(st.rec_seqs) and st.rec_epochs[end] <= p:
            end += 1
        st.rec_seqs[n:end] = [s]
        st.rec_epochs[n:end] = [p]
        st.rec_workers[n:end] = [e.worker]
        st.rec_positions[n:end] = [e.position]
        st.max_epoch = st.rec_epochs[-1]

    def _regression(self, e: Event, high: int) -> None:
        self._diagnose(DiagnosticKind.EPOCH_REGRESSION, e.workflow_key, e.seq, e.epoch,
                       f"acquired epoch {e.epoch} ({e.worker}) while epoch {high} was already the highest", e)

    def _reject(self, st: KeyState, e: Event, stale: bool, cur_epoch: int | None, cur_worker: str | None,
                transition: int | None) -> list[Finding]:
        # A rejection resolves every earlier unresolved attempt of its (key, epoch, effect key):
        # each stale one becomes one rejected_attempt with this rejection as its receipt.
        resolved = self._resolve(st, e)
        if resolved:
            return [attempt_finding(w, e) for w in resolved]
        if stale:  # the refusal came after the takeover, its attempt before: a finding of its own
            return [attempt_finding((e, cur_epoch, cur_worker, transition), e)]
        return []

    @staticmethod
    def _resolve(st: KeyState, e: Event) -> list[tuple[Event, int, str, int]]:
        if not st.pending:
            return []
        triple = (e.epoch, e.effect_key)
        waiting = st.pending.get(triple)
        if not waiting:
            return []
        s = e.seq
        if waiting[-1][0].seq < s:
            del st.pending[triple]
            return waiting
        # Only attempts strictly before the resolver (an attempt fed late, or at the same seq,
        # keeps waiting).
        done = [w for w in waiting if w[0].seq < s]
        keep = [w for w in waiting if w[0].seq >= s]
        st.pending[triple] = keep
        return done

    def _commit(self, st: KeyState, e: Event, stale: bool, cur_epoch: int | None, cur_worker: str | None,
                transition: int | None) -> list[Finding]:
        out = [attempt_finding(w, e) for w in self._resolve(st, e)] if st.pending else []
        if stale:
            out.append(finding(Grade.STALE_COMMIT, e, cur_epoch, cur_worker, transition, Outcome.COMMITTED))
        p = e.epoch
        # Double commit: the first commit of each epoch of an effect key, after the first epoch's.
        doubles: dict[int, tuple[Event, list[int], bool]] = {}
        commits = st.commits
        if commits is None:
            commits = st.commits = {}
        by_key = commits.get(e.effect_key)
        if by_key is None:
            commits[e.effect_key] = {p: e}
        elif p in by_key and by_key[p].seq <= e.seq:
            self.idempotent_retries += 1
        else:
            first_of_epoch(by_key, e, doubles, False)
        # Unstable effect key: a step's first commit under a new epoch whose effect key differs
        # from the first commit of an earlier epoch of that step.
        if e.step_id is not None:
            steps = st.steps
            if steps is None:
                steps = st.steps = {}
            by_step = steps.get(e.step_id)
            if by_step is None:
                steps[e.step_id] = {p: e}
            else:
                first_of_epoch(by_step, e, doubles, True)
        for c, epochs, unstable in doubles.values():
            n = self._owner_below(st, c.seq)
            low = epochs[0]
            t = bisect_right(st.rec_epochs, low)
            # its lowest epoch's displacement, when that came before the commit
            transition = ((st.rec_seqs[t], st.rec_positions[t]) if t < len(st.rec_seqs) and st.rec_seqs[t] < c.seq
                          else None)
            out.append(finding(
                Grade.DOUBLE_COMMIT, c, st.rec_epochs[n - 1] if n else None,
                st.rec_workers[n - 1] if n else None,
                transition, Outcome.COMMITTED,
                epochs=tuple(epochs), unstable=unstable, incident_epoch=low))
        return out


    def _diagnose(self, kind: DiagnosticKind, key: str, seq: int | None, epoch: int | None, detail: str,
                  at: Event | None = None, position: int | None = None) -> None:
        """A diagnostic at place ``seq`` of ``key``, about the event ``at`` (its seq shown only where
        its key is ordered by seq) or at ``position``."""
        observed = at.observed if at is not None else False
        if at is not None:
            position = at.position
        self._diagnostics.append(Diagnostic(diagnostic_id(key, kind, seq, epoch), kind, key,
                                            None if observed else seq, epoch, detail, position=position))

    def finish(self) -> list[Finding]:
        """Settle what is still open: pending stale attempts and never-acquired epochs."""
        out = self.spilled
        self.spilled = []
        for key, st in self._keys.items():
            self._settle(key, st, out)
        out.sort(key=finding_order)
        return out

    def _settle(self, key: str, st: KeyState, out: list[Finding]) -> None:
        if st.pending:
            emitted = st.emitted if st.emitted is not None else set()
            # in feed order, (seq, event_id), as detect.sql picks among attempts sharing a seq
            for w in sorted((w for waiting in st.pending.values() for w in waiting),
                            key=lambda w: (w[0].seq, w[0].event_id or "")):
                if (Grade.STALE_ATTEMPT, w[0].seq) in emitted:  # the attempt's place
                    continue  # another attempt at the same seq (an ordering conflict)
                emitted.add((Grade.STALE_ATTEMPT, w[0].seq))
                out.append(live_authority.verdict_of(st, attempt_finding(w, None)))
            st.pending = None
        if st.unresolved:  # unauthorized attempts nothing resolved: their own verdict
            # one per (grade, seq), as feed reports them: attempts sharing a seq (an ordering
            # conflict) are one finding in the batch detector too
            emitted = st.emitted if st.emitted is not None else set()
            for f in live_authority.unresolved(st):
                if (f.grade, f.place) not in emitted:
                    emitted.add((f.grade, f.place))
                    out.append(f)
        for p, first in sorted((st.evidence or {}).items()):
            if st.acquired is None or p not in st.acquired:
                self._diagnose(DiagnosticKind.UNACQUIRED_EPOCH, key, first.seq, p,
                               f"evidence under epoch {p} but this key never shows it acquired", first)
        st.evidence = None

    def _evict(self) -> None:
        """Forget the least recently fed tenth of the keys, settling them as ``finish`` would.

        Memory stays bounded by ``max_keys``; a key fed again later starts afresh (its history
        is in the store, whose batch report remains the final word).
        """
        n = max(1, len(self._keys) // 10)
        for key, st in heapq.nsmallest(n, self._keys.items(), key=lambda kv: kv[1].touched):
            self._settle(key, st, self.spilled)
            del self._keys[key]
        self.evicted_keys += n

    def pending(self) -> list[Finding]:
        """The stale attempts still waiting for an outcome, as they would be reported now."""
        return sorted((attempt_finding(w, None) for st in self._keys.values()
                       for waiting in (st.pending or {}).values() for w in waiting), key=finding_order)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return sorted(self._diagnostics, key=diagnostic_order)


def detect_events(events: Iterable[Event]) -> list[Finding]:
    """Every finding of ``events`` (seq order per workflow key), sorted by key, seq, grade rank.

    Pauses the cyclic garbage collector while it runs: the detector makes no reference cycles,
    and on millions of live objects the collector's passes would cost more than detection.
    """
    det = LiveDetector()
    out: list[Finding] = []
    feed = det.feed
    paused = gc.isenabled()
    gc.disable()
    try:
        for e in events:
            found = feed(e)
            if found:
                out.extend(found)
    finally:
        if paused:
            gc.enable()
    out.extend(det.finish())
    if det.withdrawn:
        gone = set(det.withdrawn)
        out = [f for f in out if f.id not in gone]
    out.sort(key=finding_order)
    return out
