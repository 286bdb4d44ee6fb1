"""Authority (SPEC section 8): was an effect still *allowed* when it happened?

An idempotency key stops one call from acting twice; it says nothing about a single call made
under a mandate that has expired, was revoked, or was never revalidated after a resume (seed 004).
``AuthorityTracker`` follows one workflow key's events in seq order and says, for each effect,
which of the four reasons make it unauthorized. It is incremental, so the live detector feeds it
one event at a time and the batch detector feeds it each opted-in key's events in order: the rules
exist once.

The rules apply to a key only when its log holds an ``authority_granted``, ``authority_revoked``,
``resumed`` or ``revalidated`` event, or an event carrying an ``authority_id`` (``opts_in``).

Revision 3: none of these fields costs a line. A grant without ``authority_id`` is the key's
unnamed mandate (effects without an id are judged against it), a revocation without one revokes
every mandate granted before it, and a ``revalidated`` without a readable ``decision`` decides
nothing (the store reports it as ``malformed_field`` and lost evidence).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from ..core.instants import rfc3339, when
from ..core.model import Finding, Grade, Kind, Outcome, SinkResult


AUTHORITY_KINDS = frozenset({"authority_granted", "authority_revoked", "resumed", "revalidated"})
EFFECT_KINDS = frozenset({"effect_attempted", "effect_committed"})

#: Reasons, in the order a finding lists them.
REASONS = ("revoked", "expired", "failed_revalidation", "unrevalidated_resume")


class AuthorityEvent(Protocol):
    """What the tracker reads of an event (``seq`` is its place in the key's order, ``position``
    its global observation position)."""

    seq: int | None
    position: int | None
    kind: str
    epoch: int | None
    authority_id: str | None
    expires_at: datetime | None
    decision: str | None
    ts: datetime | None


def opts_in(kind: str, authority_id: str | None) -> bool:
    """Whether this event puts its key under the authority rules."""
    return kind in AUTHORITY_KINDS or authority_id is not None


@dataclass(frozen=True, slots=True)
class Unauthorized:
    """Why one effect was not allowed: its reasons, and the mandate or resume it rests on.

    ``anchor`` groups findings into incidents: the ``authority_id`` when the mandate is the
    problem (``"unnamed"`` for the key's unnamed mandate), else ``"resume@<seq>"`` /
    ``"revalidation@<seq>"``. ``since_seq``/``since_position``/``since_ts`` say since when the
    mandate was missing (a revocation's or resume's place and position, an expiry's time).
    """

    reasons: tuple[str, ...]
    authority_id: str | None
    anchor: str
    since_seq: int | None
    since_position: int | None
    since_ts: datetime | None
    by_ts: bool  # a reason rests on wall clocks (expired): confidence at most medium unless the sink reported


@dataclass(frozen=True, slots=True)
class AuthorityDiagnostic:
    kind: str  # "ungranted_authority" or "revalidation_retry"
    seq: int | None
    position: int | None
    epoch: int | None
    authority_id: str | None
    detail: str


@dataclass(slots=True)
class _Grant:
    seq: int | None
    expires_at: datetime | None
    revoked_at: tuple[int | None, int | None] | None = None  # the revocation's (place, position)


#: The key of the unnamed mandate in ``AuthorityTracker.grants`` (a grant without authority_id).
UNNAMED = None


@dataclass(slots=True)
class AuthorityTracker:
    """One workflow key's mandate state, fed its events in seq order (``feed``). Places are
    ``(seq, position)`` pairs: the place in the key's order and the global position."""

    grants: dict[str | None, _Grant] = field(default_factory=dict)
    highest: int | None = None           # the highest epoch acquired so far
    acquired: bool = False               # the key's first acquisition was seen
    resume_at: tuple[int | None, int | None] | None = None  # a resume point not yet revalidated
    failed_at: tuple[int | None, int | None] | None = None  # a revalidation that said pause/terminate
    failed_decision: str | None = None
    warned: set[str] = field(default_factory=set)

    def feed(self, e: AuthorityEvent) -> tuple[Unauthorized | None, list[AuthorityDiagnostic]]:
        """Advance past ``e``; for an effect, why it was unauthorized (``None`` when allowed)."""
        kind, notes = e.kind, []
        here = (e.seq, getattr(e, "position", None))
        if kind == "lease_acquired":
            if self.acquired:
                self.resume_at = here  # any acquisition after the first is a resume point
            self.acquired = True
            if e.epoch is not None and (self.highest is None or e.epoch > self.highest):
                self.highest = e.epoch
        elif kind == "resumed":
            self.resume_at = here
        elif kind == "revalidated":
            self._revalidated(e, here, notes)
        elif kind == "authority_granted":
            self.grants[e.authority_id] = _Grant(e.seq, e.expires_at)  # None: the unnamed mandate
            self.failed_at = self.failed_decision = None
        elif kind == "authority_revoked":
            if e.authority_id is None:  # revokes every mandate of the key granted before it
                for grant in self.grants.values():
                    if grant.revoked_at is None:
                        grant.revoked_at = here
            elif (grant := self.grants.get(e.authority_id)) is not None:
                grant.revoked_at = here
        elif kind in EFFECT_KINDS:
            return self._judge(e, notes), notes
        return None, notes

    def _revalidated(self, e: AuthorityEvent, here: tuple[int | None, int | None],
                     notes: list[AuthorityDiagnostic]) -> None:
        # A revalidation counts only under the current epoch: a displaced owner cannot vouch. One
        # without a readable decision decides nothing: it neither restores nor ends authority.
        decision = (e.decision or "").lower()
        if decision not in ("continue", "pause", "terminate"):
            return
        if e.epoch is None or (self.highest is not None and e.epoch < self.highest):
            return
        self.resume_at = None
        if decision in ("pause", "terminate"):
            self.failed_at, self.failed_decision = here, decision
        elif self.failed_at is not None:
            notes.append(AuthorityDiagnostic(
                "revalidation_retry", e.seq, here[1], e.epoch, e.authority_id,
                f"revalidated continue at {_at(here, e)} after the revalidation at "
                f"{_at(self.failed_at, e)} said {self.failed_decision}: a failed revalidation is "
                "terminal; only a new authority_granted restores authority"))

    def _judge(self, e: AuthorityEvent, notes: list[AuthorityDiagnostic]) -> Unauthorized | None:
        reasons, since, since_ts, anchor, by_ts = [], None, None, None, False
        aid = e.authority_id
        grant = self.grants.get(aid)  # an effect without an id: the unnamed mandate, if granted
        if aid is not None and grant is None and aid not in self.warned:
            self.warned.add(aid)
            notes.append(AuthorityDiagnostic(
                "ungranted_authority", e.seq, getattr(e, "position", None), e.epoch, aid,
                f"effect at {_at((e.seq, getattr(e, 'position', None)), e)} names authority {aid}, which "
                "this key's log never granted before it; record the authority_granted event, or check "
                "the mandate"))
        mandate = aid if aid is not None else "unnamed"
        if grant is not None and grant.revoked_at is not None:
            reasons.append("revoked")
            since, anchor = grant.revoked_at, mandate
        if (grant is not None and grant.revoked_at is None and grant.expires_at is not None
                and e.ts is not None and grant.expires_at < e.ts):
            reasons.append("expired")
            since_ts, anchor, by_ts = grant.expires_at, mandate, True
        if self.failed_at is not None:
            reasons.append("failed_revalidation")
            since = since if since is not None else self.failed_at
            anchor = anchor or aid or f"revalidation@{_seq(self.failed_at[0])}"
        if self.resume_at is not None:
            reasons.append("unrevalidated_resume")
            since = since if since is not None else self.resume_at
            anchor = anchor or f"resume@{_seq(self.resume_at[0])}"
        if not reasons:
            return None
        since_seq, since_position = since if since is not None else (None, None)
        if getattr(e, "observed", False):
            since_seq = None  # a key ordered by observation: positions, never an invented seq
        return Unauthorized(tuple(reasons), aid, anchor, since_seq, since_position, since_ts, by_ts)


def _at(place: tuple[int | None, int | None], e: Any) -> str:
    """A place in words: ``seq 5``, or ``position 5`` in a key ordered by observation."""
    seq, position = place
    if getattr(e, "observed", False) or seq is None:
        return f"position {_seq(position)}"
    return f"seq {seq}"


def _seq(s: int | None) -> str:
    return "?" if s is None else str(s)


def compensate(double_commits: list[tuple[str, int]], compensations: list[tuple[str, int]]) -> set[int]:
    """The seqs of the double commits that compensation records turn into ``compensated``.

    Both lists hold ``(effect_key, seq)`` of one workflow key. Each ``effect_compensated`` takes
    the earliest double commit of its effect key that precedes it in seq order and is not yet
    compensated (SPEC section 8); a compensation with nothing to take is left alone.
    """
    open_: dict[str, list[int]] = {}
    for key, seq in sorted(double_commits, key=lambda t: t[1]):
        open_.setdefault(key, []).append(seq)
    taken: set[int] = set()
    for key, seq in sorted(compensations, key=lambda t: t[1]):
        for s in open_.get(key, ()):
            if s < seq and s not in taken:
                taken.add(s)
                break
    return taken


def as_event(**fields: Any) -> Any:
    """A lightweight event for the tracker (tests and adapters)."""
    from types import SimpleNamespace

    base = dict(seq=None, kind="progress", epoch=None, authority_id=None, expires_at=None,
                decision=None, ts=None)
    base.update(fields)
    return SimpleNamespace(**base)


# One rule for both engines: what an effect event's verdict makes of its finding. The batch
# detector (``detect.authorize``) and the live one (``detect.live``) both call ``judged`` with the
# stale finding the event made (or None) and the tracker's verdict, and ``compensated`` on the
# double commits that ``KeyAuthority.compensate`` pairs with a compensation record.



class _Fed:
    """What the tracker reads of an event, with ``ts`` parsed (``AuthorityEvent``)."""

    __slots__ = ("seq", "position", "observed", "kind", "epoch", "authority_id", "expires_at", "decision", "ts")

    def __init__(self, e: Any, ts: datetime | None) -> None:
        self.seq, self.kind, self.epoch = e.seq, str(e.kind), e.epoch
        self.position, self.observed = e.position, e.observed
        self.authority_id, self.expires_at, self.decision = e.authority_id, e.expires_at, e.decision
        self.ts = ts


class KeyAuthority:
    """One opted-in workflow key in either engine: its tracker, and the double commits waiting
    for a compensation record. Feed every event of the key in seq order."""

    __slots__ = ("tracker",)

    def __init__(self) -> None:
        self.tracker = AuthorityTracker()

    @classmethod
    def after_acquisitions(cls, highest: int | None, last_seq: tuple[int, int | None] | None,
                           resumed: bool) -> "KeyAuthority":
        """A key that opts in only now (the live detector, at its first authority event): the
        state its acquisitions so far left, as the tracker would have it. Before the first
        authority event nothing but acquisitions moves the tracker."""
        out = cls()
        t = out.tracker
        t.acquired = last_seq is not None
        t.highest = highest
        t.resume_at = last_seq if resumed else None
        return out

    def feed(self, e: Any, ts: datetime | None = None) -> tuple[Unauthorized | None, list[AuthorityDiagnostic]]:
        return self.tracker.feed(_Fed(e, when(e.ts) if ts is None else ts))


def judged(e: Any, verdict: Unauthorized, stale: "Finding | None", finding_id: Any,
           incident_of: Any, resolution: str | None = None, receipt: Any = None) -> "Finding":
    """The one finding of an unauthorized effect ``e`` (SPEC section 8).

    A commit is ``unauthorized_commit``, an attempt ``unauthorized_attempt``, one the sink rejected
    (its own ``sink_result``, or the rejection that resolved it) a ``rejected_attempt``: the
    mandate check held. An attempt is resolved as a stale one is (SPEC section 3): by the next
    later rejection or commit of its (workflow key, epoch, effect key), ``resolution`` and that
    event, ``receipt``. An event that is stale too gives one finding at the more severe grade,
    with both reasons (``stale`` first).
    """
    commit = e.kind == Kind.EFFECT_COMMITTED
    own_rejection = not commit and e.sink_result == SinkResult.REJECTED
    rejected = (not commit and (own_rejection or resolution == "rejected"
                                or (stale is not None and stale.grade is Grade.REJECTED_ATTEMPT)))
    grade = (Grade.REJECTED_ATTEMPT if rejected else Grade.UNAUTHORIZED_COMMIT if commit
             else Grade.UNAUTHORIZED_ATTEMPT)
    if stale is not None and stale.grade.rank > grade.rank:
        grade = stale.grade
    reasons = (("stale",) if stale is not None else ()) + verdict.reasons
    since_ts = None if verdict.since_ts is None else verdict.since_ts.isoformat().replace("+00:00", "Z")
    k = e.workflow_key
    observed = getattr(e, "observed", False)
    if stale is not None:
        outcome, receipt_seq, receipt_position = stale.outcome, stale.receipt_seq, stale.receipt_position
        current_epoch, current_worker = stale.current_epoch, stale.current_worker
        transition, transition_position = stale.transition_seq, stale.transition_position
        ts = stale.ts
    else:
        outcome = (Outcome.COMMITTED if commit or resolution == "committed" else Outcome.REJECTED if rejected
                   else Outcome.COMMITTED if e.sink_result == SinkResult.ACCEPTED else Outcome.UNKNOWN)
        by = (receipt if resolution == "rejected" else e) if rejected else None
        receipt_seq = None if by is None or observed else by.seq
        receipt_position = None if by is None else by.position
        current_epoch, current_worker, transition, transition_position = e.epoch, e.worker, None, None
        ts = e.ts
        if type(ts) is int:  # a live event's OTel nanoseconds, as the live detector renders them
            ts = rfc3339(ts)
    return Finding(
        id=finding_id(k, grade, e.seq), grade=grade, workflow_key=k,
        seq=None if observed else e.seq, position=e.position, kind=e.kind,
        epoch=e.epoch, worker=e.worker, current_epoch=current_epoch, current_worker=current_worker,
        transition_seq=transition, transition_position=transition_position,
        effect_key=e.effect_key, step_id=e.step_id, sink=e.sink,
        reporter=None if e.reporter is None else str(e.reporter),
        ts=ts, outcome=outcome, receipt_seq=receipt_seq, receipt_position=receipt_position,
        incident_id=incident_of(k, verdict.anchor), file=e.file, line=e.line,
        reasons=reasons, authority_id=verdict.authority_id, anchor=verdict.anchor,
        since_seq=verdict.since_seq, since_position=verdict.since_position, since_ts=since_ts)


def resolves(e: Any) -> str | None:
    """What an event makes of the open attempts of its (key, epoch, effect key): ``committed``,
    ``rejected`` or None (the rule of ``rules.resolves``, for either engine's events)."""
    if e.kind == Kind.EFFECT_COMMITTED:
        return "committed"
    if e.kind == Kind.EFFECT_ATTEMPTED and e.sink_result == SinkResult.REJECTED:
        return "rejected"
    return None


def compensated(f: "Finding", finding_id: Any) -> "Finding":
    """A double commit that a compensation record reversed: same evidence, grade ``compensated``."""
    return dataclasses.replace(f, id=finding_id(f.workflow_key, Grade.COMPENSATED, f.place),
                               grade=Grade.COMPENSATED)
