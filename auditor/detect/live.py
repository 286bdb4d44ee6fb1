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
Such events are counted in ``late_events``; the store's batch audit is the final word.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable

from ..model import Diagnostic, DiagnosticKind, Event, Finding, Grade, Kind, Outcome, SinkResult, stable_id

_ACQ = Kind.LEASE_ACQUIRED
_PROGRESS = Kind.PROGRESS
_ATTEMPT = Kind.EFFECT_ATTEMPTED
_COMMIT = Kind.EFFECT_COMMITTED
_REJECTED = SinkResult.REJECTED
_ACCEPTED = SinkResult.ACCEPTED


class _Key:
    """Everything the rules remember about one workflow key."""

    __slots__ = ("rec_seqs", "rec_epochs", "rec_workers", "max_epoch", "max_worker", "last_acq_seq",
                 "last_seq", "at_last_seq", "acquired", "evidence", "pending", "commits", "steps",
                 "conflicts", "doubles")

    def __init__(self) -> None:
        self.rec_seqs: list[int] = []      # records: acquisitions that raised the highest epoch
        self.rec_epochs: list[int] = []
        self.rec_workers: list[str] = []
        self.max_epoch: int | None = None  # highest epoch acquired so far, and by whom
        self.max_worker: str | None = None
        self.last_acq_seq: int | None = None
        self.last_seq: int | None = None   # newest seq fed, and the events fed at it
        self.at_last_seq: list[Event] = []
        self.acquired: set[int] = set()
        self.evidence: dict[int, int] = {}  # epoch -> lowest seq of evidence under it
        # (epoch, effect_key) -> stale attempts not resolved yet, each with its stale context
        self.pending: dict[tuple[int, str], list[tuple[Event, int, str, int]]] = {}
        self.commits: dict[str, dict[int, Event]] = {}   # effect key -> epoch -> its first commit
        self.steps: dict[str, dict[int, Event]] = {}     # step id -> epoch -> its first commit
        self.conflicts: set[int] = set()
        self.doubles: set[int] = set()      # seqs reported as double_commit


def _finding(grade: Grade, e: Event, cur_epoch: int | None, cur_worker: str | None,
             transition: int | None, outcome: Outcome | None = None, receipt: int | None = None,
             epochs: tuple[int, ...] = (), unstable: bool = False, incident_epoch: int | None = None) -> Finding:
    k = e.workflow_key
    return Finding(
        id=stable_id("f-", k, grade, e.seq), grade=grade, workflow_key=k, seq=e.seq, kind=e.kind,
        epoch=e.epoch, worker=e.worker, current_epoch=cur_epoch, current_worker=cur_worker,
        transition_seq=transition, effect_key=e.effect_key, step_id=e.step_id, sink=e.sink,
        reporter=None if e.reporter is None else str(e.reporter), ts=e.ts, outcome=outcome,
        receipt_seq=receipt, epochs=epochs, unstable_effect_key=unstable,
        incident_id=stable_id("i-", k, e.epoch if incident_epoch is None else incident_epoch))


class LiveDetector:
    """SPEC section 3, incrementally. Feed events in seq order per workflow key.

    Counters (read them at any time): ``events``, ``duplicates`` (same event_id, or identical
    event, at the same seq), ``late_events`` (below the key's newest seq), ``stale_events``
    (evidence under a displaced epoch), ``reclaims`` (acquisitions that displaced a lower
    epoch), ``idempotent_retries`` (an epoch committing an effect key it already committed).
    """

    def __init__(self) -> None:
        self._keys: dict[str, _Key] = {}
        self._diagnostics: list[Diagnostic] = []
        self.events = 0
        self.duplicates = 0
        self.late_events = 0
        self.stale_events = 0
        self.reclaims = 0
        self.idempotent_retries = 0

    # The owner at a seq: the latest record strictly below it.

    def _owner_below(self, st: _Key, s: int) -> int:
        """How many records have seq < s."""
        seqs = st.rec_seqs
        if not seqs or seqs[-1] < s:
            return len(seqs)
        return bisect_left(seqs, s)

    def feed(self, e: Event) -> list[Finding]:
        """Apply one event; return the findings it made certain (maybe at earlier seqs)."""
        st = self._keys.get(e.workflow_key)
        if st is None:
            st = self._keys[e.workflow_key] = _Key()
        s = e.seq
        last = st.last_seq
        if last is None or s > last:
            st.last_seq = s
            st.at_last_seq = [e]
        elif s == last:
            for other in st.at_last_seq:
                if (other.event_id == e.event_id) if e.event_id is not None else other == e:
                    self.duplicates += 1
                    return []
            st.at_last_seq.append(e)
            if s not in st.conflicts:
                st.conflicts.add(s)
                self._diagnose(DiagnosticKind.ORDERING_CONFLICT, e.workflow_key, s, None,
                               f"{len(st.at_last_seq)} different events share seq {s}")
        else:
            self.late_events += 1
        self.events += 1

        kind = e.kind
        p = e.epoch
        if kind is _ACQ:
            self._acquire(st, e)
            return []
        if p is None:  # outcome_verified: evidence of verification, never a finding
            return []
        if p not in st.acquired:
            first = st.evidence.get(p)
            if first is None or s < first:
                st.evidence[p] = s
        if kind is Kind.OUTCOME_VERIFIED:
            return []

        n = self._owner_below(st, s)
        if n and p < st.rec_epochs[n - 1]:
            self.stale_events += 1
            cur_epoch, cur_worker = st.rec_epochs[n - 1], st.rec_workers[n - 1]
            transition = st.rec_seqs[bisect_right(st.rec_epochs, p, 0, n)]
        else:
            cur_epoch = st.rec_epochs[n - 1] if n else None
            cur_worker = st.rec_workers[n - 1] if n else None
            transition = None
        stale = transition is not None

        if kind is _PROGRESS:
            if stale:
                return [_finding(Grade.STALE_ACTIVITY, e, cur_epoch, cur_worker, transition)]
            return []
        if kind is _ATTEMPT:
            if e.sink_result is _REJECTED:
                return self._reject(st, e, stale, cur_epoch, cur_worker, transition)
            if stale:
                st.pending.setdefault((p, e.effect_key), []).append((e, cur_epoch, cur_worker, transition))
            return []
        if kind is _COMMIT:
            return self._commit(st, e, stale, cur_epoch, cur_worker, transition)
        return []

    def _acquire(self, st: _Key, e: Event) -> None:
        s, p = e.seq, e.epoch
        st.acquired.add(p)
        st.evidence.pop(p, None)
        if st.last_acq_seq is None or s >= st.last_acq_seq:
            # In order: compare with every acquisition fed so far (same-seq ones included, as
            # the batch detector's running maximum does).
            st.last_acq_seq = s
            high = st.max_epoch
            if high is not None and p <= high:
                self._regression(e, high)
                return
            if high is not None:
                self.reclaims += 1
            st.rec_seqs.append(s)
            st.rec_epochs.append(p)
            st.rec_workers.append(e.worker)
            st.max_epoch, st.max_worker = p, e.worker
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
        st.max_epoch, st.max_worker = st.rec_epochs[-1], st.rec_workers[-1]

    def _regression(self, e: Event, high: int) -> None:
        self._diagnose(DiagnosticKind.EPOCH_REGRESSION, e.workflow_key, e.seq, e.epoch,
                       f"acquired epoch {e.epoch} ({e.worker}) while epoch {high} was already the highest")

    def _reject(self, st: _Key, e: Event, stale: bool, cur_epoch: int | None, cur_worker: str | None,
                transition: int | None) -> list[Finding]:
        # A rejection resolves every earlier unresolved attempt of its (key, epoch, effect key):
        # each stale one becomes one rejected_attempt with this rejection as its receipt.
        resolved = self._resolve(st, e)
        if resolved:
            return [_finding(Grade.REJECTED_ATTEMPT, a, ce, cw, t, Outcome.REJECTED, e.seq)
                    for a, ce, cw, t in resolved]
        if stale:  # the refusal came after the takeover, its attempt before: a finding of its own
            return [_finding(Grade.REJECTED_ATTEMPT, e, cur_epoch, cur_worker, transition,
                             Outcome.REJECTED, e.seq)]
        return []

    @staticmethod
    def _resolve(st: _Key, e: Event) -> list[tuple[Event, int, str, int]]:
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
        out = [_finding(Grade.STALE_ATTEMPT, a, ce, cw, t, Outcome.COMMITTED)
               for a, ce, cw, t in self._resolve(st, e)]
        if stale:
            out.append(_finding(Grade.STALE_COMMIT, e, cur_epoch, cur_worker, transition, Outcome.COMMITTED))
        p = e.epoch
        # Double commit: the first commit of each epoch of an effect key, after the first epoch's.
        doubles: dict[int, tuple[Event, list[int], bool]] = {}
        by_key = st.commits.get(e.effect_key)
        if by_key is None:
            st.commits[e.effect_key] = {p: e}
        elif self._first_of_epoch(by_key, e, doubles, False) is False:
            self.idempotent_retries += 1
        # Unstable effect key: a step's first commit under a new epoch whose effect key differs
        # from the first commit of an earlier epoch of that step.
        if e.step_id is not None:
            by_step = st.steps.get(e.step_id)
            if by_step is None:
                st.steps[e.step_id] = {p: e}
            else:
                self._first_of_epoch(by_step, e, doubles, True)
        for c, epochs, unstable in doubles.values():
            if c.seq in st.doubles:  # fed late: already reported (by the other rule)
                continue
            st.doubles.add(c.seq)
            n = self._owner_below(st, c.seq)
            low = epochs[0]
            t = bisect_right(st.rec_epochs, low)
            out.append(_finding(
                Grade.DOUBLE_COMMIT, c, st.rec_epochs[n - 1] if n else None,
                st.rec_workers[n - 1] if n else None,
                st.rec_seqs[t] if t < len(st.rec_seqs) else None, Outcome.COMMITTED,
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
        earliest = min(firsts.values(), key=_seq)
        firsts[p] = e
        if e.seq > earliest.seq:
            c = e
        elif earliest.epoch != p:
            c = earliest  # fed late, e is now the first of all: the old first is a double commit
        else:
            return True
        upto = [x for x in firsts.values() if x.seq <= c.seq]
        if step_rule and not any(x.effect_key != c.effect_key for x in upto if x.seq < c.seq):
            return True
        epochs = sorted({x.epoch for x in upto})
        prev = doubles.get(c.seq)
        if prev is not None:
            doubles[c.seq] = (c, sorted(set(prev[1]) | set(epochs)), prev[2] or step_rule)
        else:
            doubles[c.seq] = (c, epochs, step_rule)
        return True

    def _diagnose(self, kind: DiagnosticKind, key: str, seq: int | None, epoch: int | None, detail: str) -> None:
        self._diagnostics.append(Diagnostic(stable_id("d-", key, kind, seq, epoch), kind, key, seq, epoch, detail))

    def finish(self) -> list[Finding]:
        """Settle what is still open: pending stale attempts and never-acquired epochs."""
        out: list[Finding] = []
        for st in self._keys.values():
            for waiting in st.pending.values():
                for a, ce, cw, t in waiting:
                    outcome = Outcome.COMMITTED if a.sink_result is _ACCEPTED else Outcome.UNKNOWN
                    out.append(_finding(Grade.STALE_ATTEMPT, a, ce, cw, t, outcome))
            st.pending.clear()
        for key, st in self._keys.items():
            for p, s in sorted(st.evidence.items()):
                if p not in st.acquired:
                    self._diagnose(DiagnosticKind.UNACQUIRED_EPOCH, key, s, p,
                                   f"evidence under epoch {p} but this key never shows it acquired")
            st.evidence.clear()
        out.sort(key=_order)
        return out

    def pending(self) -> list[Finding]:
        """The stale attempts still waiting for an outcome, as they would be reported now."""
        return sorted((_finding(Grade.STALE_ATTEMPT, a, ce, cw, t,
                                Outcome.COMMITTED if a.sink_result is _ACCEPTED else Outcome.UNKNOWN)
                       for st in self._keys.values() for waiting in st.pending.values()
                       for a, ce, cw, t in waiting), key=_order)

    @property
    def diagnostics(self) -> list[Diagnostic]:
        return sorted(self._diagnostics, key=lambda d: (d.workflow_key, d.seq if d.seq is not None else -1, d.kind))


def _seq(e: Event) -> int:
    return e.seq


def _order(f: Finding) -> tuple[str, int, int]:
    return (f.workflow_key, f.seq, f.grade.rank)


def detect_events(events: Iterable[Event]) -> list[Finding]:
    """Every finding of ``events`` (seq order per workflow key), sorted by key, seq, grade rank."""
    det = LiveDetector()
    out: list[Finding] = []
    feed = det.feed
    for e in events:
        found = feed(e)
        if found:
            out.extend(found)
    out.extend(det.finish())
    out.sort(key=_order)
    return out
