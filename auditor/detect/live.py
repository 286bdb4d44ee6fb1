"""Stage 4, detect, one event at a time: SPEC section 3 as an incremental state machine.

The set-based detector (``detect.sql``) sees the whole log at once; this one is fed events in
authoritative order (per workflow key) and keeps only what the rules need: per key, the
acquisitions that raised the highest epoch (the "records", increasing in both seq and epoch, a
handful per key), the epochs that committed each effect key and each step, and the stale attempts
still waiting for their outcome. Work per event is a few dict lookups (a bisect over the records
only when an event arrives behind its key's newest seq). It is the OTel processor's detector and
the plain-Python reference for the batch detector; ``tests/test_live_detector.py`` pins the two
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

import dataclasses
import gc
import heapq
import time
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..model import Diagnostic, DiagnosticKind, Event, Finding, Grade, Kind, Outcome, Reporter, SinkResult
from ..rules import (attempt_grade, diagnostic_id, diagnostic_order, finding_id, finding_order, incident_id,
                     resolved_as)
from . import live_authority
from .live_event import LiveEvent, rfc3339, same_event as _same

if TYPE_CHECKING:
    from ..authority import KeyAuthority, Unauthorized

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


class _Key:
    """Everything the rules remember about one workflow key (containers made on first use)."""

    __slots__ = ("rec_seqs", "rec_epochs", "rec_workers", "rec_positions", "max_epoch", "last_acq_seq",
                 "last_acq_position", "last_seq",
                 "at_last_seq", "acquired", "evidence", "pending", "commits", "steps", "conflicts",
                 "emitted", "touched", "authority", "verdicts", "unresolved", "doubles")

    def __init__(self) -> None:
        self.rec_seqs: list[int] = []      # records: acquisitions that raised the highest epoch
        self.rec_epochs: list[int] = []
        self.rec_workers: list[str] = []
        self.rec_positions: list[int | None] = []  # the records' global positions (SPEC rev 3)
        self.max_epoch: int | None = None  # highest epoch acquired so far
        self.last_acq_seq: int | None = None
        self.last_acq_position: int | None = None
        self.last_seq: int | None = None   # newest seq fed, and the event(s) fed at it
        self.at_last_seq: Event | list[Event] | None = None
        self.acquired: set[int] | None = None
        self.evidence: dict[int, Event] | None = None  # unacquired epoch -> its first evidence
        # (epoch, effect_key) -> stale attempts not resolved yet, each with its stale context
        self.pending: dict[tuple[int, str], list[tuple[Event, int, str, int]]] | None = None
        self.commits: dict[str, dict[int, Event]] | None = None  # effect key -> epoch -> first commit
        self.steps: dict[str, dict[int, Event]] | None = None    # step id -> epoch -> first commit
        self.conflicts: dict[int, int] | None = None  # seq -> index of its ordering_conflict diagnostic
        self.emitted: set[tuple[Grade, int]] | None = None  # (grade, place) of findings reported
        self.touched = 0                       # when it was last fed (the detector's event count)
        # SPEC section 8, for keys that opted in (their first authority event): the tracker, the
        # verdicts of stale attempts still pending, and the double commits open to compensation.
        self.authority: KeyAuthority | None = None
        self.verdicts: dict[int, tuple[Event, Unauthorized]] | None = None
        # unauthorized attempts, not stale, waiting for their resolution: (epoch, effect key) -> ...
        self.unresolved: dict[tuple[int, str | None], list[tuple[Event, Unauthorized]]] | None = None
        self.doubles: dict[str | None, list[Finding]] | None = None


#: Where an acquisition sits: its place in the key's order and its global position.
Place = tuple[int, int | None]


def _finding(grade: Grade, e: Event, cur_epoch: int | None, cur_worker: str | None,
             transition: Place | None, outcome: Outcome | None = None, receipt: Event | None = None,
             epochs: tuple[int, ...] = (), unstable: bool = False, incident_epoch: int | None = None) -> Finding:
    k = e.workflow_key
    observed = e.observed  # a key ordered by observation: positions, never an invented seq
    return Finding(
        id=finding_id(k, grade, e.seq), grade=grade, workflow_key=k, seq=None if observed else e.seq,
        position=e.position, kind=e.kind,
        epoch=e.epoch, worker=e.worker, current_epoch=cur_epoch, current_worker=cur_worker,
        transition_seq=None if transition is None or observed else transition[0],
        transition_position=None if transition is None else transition[1],
        effect_key=e.effect_key, step_id=e.step_id, sink=e.sink,
        reporter=None if e.reporter is None else str(e.reporter),
        ts=rfc3339(e.ts) if type(e.ts) is int else e.ts, outcome=outcome,
        receipt_seq=None if receipt is None or observed else receipt.seq,
        receipt_position=None if receipt is None else receipt.position,
        epochs=epochs, unstable_effect_key=unstable,
        incident_id=incident_id(k, e.epoch if incident_epoch is None else incident_epoch),
        file=e.file, line=e.line)


def _attempt(waiting: tuple[Event, int, str, Place], resolver: Event | None) -> Finding:
    """The finding of a stale attempt (with its stale context), resolved by ``resolver`` or not."""
    a, cur_epoch, cur_worker, transition = waiting
    resolution = None if resolver is None else resolved_as(resolver.kind)
    grade, outcome = attempt_grade(resolution, a.sink_result)
    receipt = resolver if grade is Grade.REJECTED_ATTEMPT else None
    return _finding(grade, a, cur_epoch, cur_worker, transition, outcome, receipt)


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
        self._keys: dict[str, _Key] = {}
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
    def _owner_below(st: _Key, s: int) -> int:
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
            st = self._keys[e.workflow_key] = _Key()
        st.touched = self.events
        s = e.seq
        last = st.last_seq
        if last is None or s > last:
            st.last_seq = s
            st.at_last_seq = e
        elif s == last:
            if self._same_seq(st, e):
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

    def _apply(self, st: _Key, e: Event, s: int) -> list[Finding]:
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
                return [_finding(Grade.STALE_ACTIVITY, e, cur_epoch, cur_worker, transition)]
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

    def _same_seq(self, st: _Key, e: Event) -> bool:
        """Another event at the key's newest seq: True for a duplicate, else an ordering conflict."""
        fed = st.at_last_seq
        others = fed if isinstance(fed, list) else [fed]
        for other in others:
            # A duplicate is the same event: one id (or none) and one content. One id on two
            # different events is not (batch: an event_id_conflict, both audited): dropping the
            # second would drop its evidence, a stale commit say.
            if other.event_id == e.event_id and _same(other, e):
                self.duplicates += 1
                return True
        others.append(e)
        st.at_last_seq = others
        if st.conflicts is None:
            st.conflicts = {}
        detail = f"{len(others)} different events share seq {e.seq}"
        at = st.conflicts.get(e.seq)
        if at is None:  # one diagnostic per key and seq, counting every event that shares it
            st.conflicts[e.seq] = len(self._diagnostics)
            first = min(others, key=lambda x: x.position if x.position is not None else 0)
            self._diagnose(DiagnosticKind.ORDERING_CONFLICT, e.workflow_key, e.seq, None, detail, first)
        else:
            first = min(x.position for x in others if x.position is not None) if any(
                x.position is not None for x in others) else None
            self._diagnostics[at] = dataclasses.replace(self._diagnostics[at], detail=detail, position=first)
        return False

    def _acquire(self, st: _Key, e: Event) -> None:
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

    def _reject(self, st: _Key, e: Event, stale: bool, cur_epoch: int | None, cur_worker: str | None,
                transition: int | None) -> list[Finding]:
        # A rejection resolves every earlier unresolved attempt of its (key, epoch, effect key):
        # each stale one becomes one rejected_attempt with this rejection as its receipt.
        resolved = self._resolve(st, e)
        if resolved:
            return [_attempt(w, e) for w in resolved]
        if stale:  # the refusal came after the takeover, its attempt before: a finding of its own
            return [_attempt((e, cur_epoch, cur_worker, transition), e)]
        return []

    @staticmethod
    def _resolve(st: _Key, e: Event) -> list[tuple[Event, int, str, int]]:
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

    def _commit(self, st: _Key, e: Event, stale: bool, cur_epoch: int | None, cur_worker: str | None,
                transition: int | None) -> list[Finding]:
        out = [_attempt(w, e) for w in self._resolve(st, e)] if st.pending else []
        if stale:
            out.append(_finding(Grade.STALE_COMMIT, e, cur_epoch, cur_worker, transition, Outcome.COMMITTED))
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
            self._first_of_epoch(by_key, e, doubles, False)
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
                self._first_of_epoch(by_step, e, doubles, True)
        for c, epochs, unstable in doubles.values():
            n = self._owner_below(st, c.seq)
            low = epochs[0]
            t = bisect_right(st.rec_epochs, low)
            # its lowest epoch's displacement, when that came before the commit
            transition = ((st.rec_seqs[t], st.rec_positions[t]) if t < len(st.rec_seqs) and st.rec_seqs[t] < c.seq
                          else None)
            out.append(_finding(
                Grade.DOUBLE_COMMIT, c, st.rec_epochs[n - 1] if n else None,
                st.rec_workers[n - 1] if n else None,
                transition, Outcome.COMMITTED,
                epochs=tuple(epochs), unstable=unstable, incident_epoch=low))
        return out

    @staticmethod
    def _first_of_epoch(firsts: dict[int, Event], e: Event,
                        doubles: dict[int, tuple[Event, list[int], bool]], step_rule: bool) -> bool:
        """Record ``e`` as its epoch's first commit in ``firsts`` unless one came before it.

        Adds the double commit this makes to ``doubles`` (by seq). In order that is ``e``
        itself; fed late, it can be the commit ``e`` pushed out of first place. Returns False
        when the epoch had already committed (an idempotent retry).
        """
        p = e.epoch
        old = firsts.get(p)
        if old is not None and old.seq <= e.seq:
            return False
        earliest = min(firsts.values(), key=_place)
        firsts[p] = e
        if _place(e) > _place(earliest):
            c = e
        elif earliest.epoch != p:
            c = earliest  # fed late, e is now the first of all: the old first is a double commit
        else:
            return True
        at = _place(c)
        upto = [x for x in firsts.values() if _place(x) <= at]
        if step_rule and not any(x.effect_key != c.effect_key for x in upto if _place(x) < at):
            return True
        epochs = sorted({x.epoch for x in upto})
        prev = doubles.get(c.seq)
        if prev is not None:
            doubles[c.seq] = (c, sorted(set(prev[1]) | set(epochs)), prev[2] or step_rule)
        else:
            doubles[c.seq] = (c, epochs, step_rule)
        return True

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

    def _settle(self, key: str, st: _Key, out: list[Finding]) -> None:
        if st.pending:
            emitted = st.emitted if st.emitted is not None else set()
            # in feed order, (seq, event_id), as detect.sql picks among attempts sharing a seq
            for w in sorted((w for waiting in st.pending.values() for w in waiting),
                            key=lambda w: (w[0].seq, w[0].event_id or "")):
                if (Grade.STALE_ATTEMPT, w[0].seq) in emitted:  # the attempt's place
                    continue  # another attempt at the same seq (an ordering conflict)
                emitted.add((Grade.STALE_ATTEMPT, w[0].seq))
                out.append(live_authority.verdict_of(st, _attempt(w, None)))
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
        return sorted((_attempt(w, None) for st in self._keys.values()
                       for waiting in (st.pending or {}).values() for w in waiting), key=finding_order)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return sorted(self._diagnostics, key=diagnostic_order)


def _place(e: Event) -> tuple[int, int]:
    """Commits in seq order; sharing a seq (an ordering conflict), the higher epoch is the later,
    as ``detect.sql``'s first_commits orders them."""
    return (e.seq, e.epoch)


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
