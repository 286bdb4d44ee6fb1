"""What the live detector remembers of one workflow key (``KeyState``), and the findings it
builds from it: a stale event's finding, an attempt's once resolved, and the double commits a
commit makes (``first_of_epoch``), in the order ``detect.sql`` reads commits."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ...core.instants import rfc3339
from ...core.model import DiagnosticKind, Event, Finding, Grade, Outcome
from ...rules import attempt_grade, finding_id, incident_id, resolved_as
from .event import same_event

if TYPE_CHECKING:
    from ...rules.authority import KeyAuthority, Unauthorized


class KeyState:
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


def finding(grade: Grade, e: Event, cur_epoch: int | None, cur_worker: str | None,
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


def attempt_finding(waiting: tuple[Event, int, str, Place], resolver: Event | None) -> Finding:
    """The finding of a stale attempt (with its stale context), resolved by ``resolver`` or not."""
    a, cur_epoch, cur_worker, transition = waiting
    resolution = None if resolver is None else resolved_as(resolver.kind)
    grade, outcome = attempt_grade(resolution, a.sink_result)
    receipt = resolver if grade is Grade.REJECTED_ATTEMPT else None
    return finding(grade, a, cur_epoch, cur_worker, transition, outcome, receipt)


def place(e: Event) -> tuple[int, int]:
    """Commits in seq order; sharing a seq (an ordering conflict), the higher epoch is the later,
    as ``detect.sql``'s first_commits orders them."""
    return (e.seq, e.epoch)


def first_of_epoch(firsts: dict[int, Event], e: Event,
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
    earliest = min(firsts.values(), key=place)
    firsts[p] = e
    if place(e) > place(earliest):
        c = e
    elif earliest.epoch != p:
        c = earliest  # fed late, e is now the first of all: the old first is a double commit
    else:
        return True
    at = place(c)
    upto = [x for x in firsts.values() if place(x) <= at]
    if step_rule and not any(x.effect_key != c.effect_key for x in upto if place(x) < at):
        return True
    epochs = sorted({x.epoch for x in upto})
    prev = doubles.get(c.seq)
    if prev is not None:
        doubles[c.seq] = (c, sorted(set(prev[1]) | set(epochs)), prev[2] or step_rule)
    else:
        doubles[c.seq] = (c, epochs, step_rule)
    return True


def same_seq(det: Any, st: KeyState, e: Event) -> bool:
    """Another event at the key's newest seq: True for a duplicate (counted on the detector
    ``det``), else an ordering conflict: one diagnostic per key and seq, counting every event that
    shares it, at the first of them in observation order."""
    fed = st.at_last_seq
    others = fed if isinstance(fed, list) else [fed]
    for other in others:
        # A duplicate is the same event: one id (or none) and one content. One id on two
        # different events is not (batch: an event_id_conflict, both audited): dropping the
        # second would drop its evidence, a stale commit say.
        if other.event_id == e.event_id and same_event(other, e):
            det.duplicates += 1
            return True
    others.append(e)
    st.at_last_seq = others
    if st.conflicts is None:
        st.conflicts = {}
    detail = f"{len(others)} different events share seq {e.seq}"
    first = min(others, key=lambda x: x.position if x.position is not None else 0)
    at = st.conflicts.get(e.seq)
    if at is None:
        st.conflicts[e.seq] = len(det._diagnostics)
        det._diagnose(DiagnosticKind.ORDERING_CONFLICT, e.workflow_key, e.seq, None, detail, first)
    else:
        det._diagnostics[at] = dataclasses.replace(det._diagnostics[at], detail=detail, position=first.position)
    return False
