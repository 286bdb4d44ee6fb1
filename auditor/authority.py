"""Authority (SPEC section 8): was an effect still *allowed* when it happened?

An idempotency key stops one call from acting twice; it says nothing about a single call made
under a mandate that has expired, was revoked, or was never revalidated after a resume (seed 004).
``AuthorityTracker`` follows one workflow key's events in seq order and says, for each effect,
which of the four reasons make it unauthorized. It is incremental, so the live detector feeds it
one event at a time and the batch detector feeds it each opted-in key's events in order: the rules
exist once.

The rules apply to a key only when its log holds an ``authority_granted``, ``authority_revoked``,
``resumed`` or ``revalidated`` event, or an event carrying an ``authority_id`` (``opts_in``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from .normalize import when

if TYPE_CHECKING:
    from .model import Finding

AUTHORITY_KINDS = frozenset({"authority_granted", "authority_revoked", "resumed", "revalidated"})
EFFECT_KINDS = frozenset({"effect_attempted", "effect_committed"})

#: Reasons, in the order a finding lists them.
REASONS = ("revoked", "expired", "failed_revalidation", "unrevalidated_resume")


class AuthorityEvent(Protocol):
    """What the tracker reads of an event (``seq`` is the authoritative position)."""

    seq: int | None
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
    problem, else ``"resume@<seq>"`` / ``"revalidation@<seq>"``. ``since_seq``/``since_ts`` say
    since when the mandate was missing (a revocation's or resume's seq, an expiry's time).
    """

    reasons: tuple[str, ...]
    authority_id: str | None
    anchor: str
    since_seq: int | None
    since_ts: datetime | None
    by_ts: bool  # a reason rests on wall clocks (expired): confidence at most medium unless the sink reported


@dataclass(frozen=True, slots=True)
class AuthorityDiagnostic:
    kind: str  # "ungranted_authority" or "revalidation_retry"
    seq: int | None
    epoch: int | None
    authority_id: str | None
    detail: str


@dataclass(slots=True)
class _Grant:
    seq: int | None
    expires_at: datetime | None
    revoked_at: int | None = None


@dataclass(slots=True)
class AuthorityTracker:
    """One workflow key's mandate state, fed its events in seq order (``feed``)."""

    grants: dict[str, _Grant] = field(default_factory=dict)
    highest: int | None = None           # the highest epoch acquired so far
    acquired: bool = False               # the key's first acquisition was seen
    resume_seq: int | None = None        # a resume point not yet revalidated
    failed_seq: int | None = None        # a revalidation that said pause/terminate, no grant since
    failed_decision: str | None = None
    warned: set[str] = field(default_factory=set)

    def feed(self, e: AuthorityEvent) -> tuple[Unauthorized | None, list[AuthorityDiagnostic]]:
        """Advance past ``e``; for an effect, why it was unauthorized (``None`` when allowed)."""
        kind, notes = e.kind, []
        if kind == "lease_acquired":
            if self.acquired:
                self.resume_seq = e.seq  # any acquisition after the first is a resume point
            self.acquired = True
            if e.epoch is not None and (self.highest is None or e.epoch > self.highest):
                self.highest = e.epoch
        elif kind == "resumed":
            self.resume_seq = e.seq
        elif kind == "revalidated":
            # A revalidation counts only under the current epoch: a displaced owner cannot vouch.
            if e.epoch is not None and (self.highest is None or e.epoch >= self.highest):
                decision = (e.decision or "").lower()
                self.resume_seq = None
                if decision in ("pause", "terminate"):
                    self.failed_seq, self.failed_decision = e.seq, decision
                elif decision == "continue" and self.failed_seq is not None:
                    notes.append(AuthorityDiagnostic(
                        "revalidation_retry", e.seq, e.epoch, e.authority_id,
                        f"revalidated continue at seq {_seq(e.seq)} after the revalidation at seq "
                        f"{_seq(self.failed_seq)} said {self.failed_decision}: a failed revalidation is "
                        "terminal; only a new authority_granted restores authority"))
        elif kind == "authority_granted":
            if e.authority_id is not None:
                self.grants[e.authority_id] = _Grant(e.seq, e.expires_at)
            self.failed_seq = self.failed_decision = None
        elif kind == "authority_revoked":
            grant = self.grants.get(e.authority_id) if e.authority_id is not None else None
            if grant is not None:
                grant.revoked_at = e.seq
        elif kind in EFFECT_KINDS:
            return self._judge(e, notes), notes
        return None, notes

    def _judge(self, e: AuthorityEvent, notes: list[AuthorityDiagnostic]) -> Unauthorized | None:
        reasons, since_seq, since_ts, anchor, by_ts = [], None, None, None, False
        aid = e.authority_id
        grant = self.grants.get(aid) if aid is not None else None
        if aid is not None and grant is None and aid not in self.warned:
            self.warned.add(aid)
            notes.append(AuthorityDiagnostic(
                "ungranted_authority", e.seq, e.epoch, aid,
                f"effect at seq {_seq(e.seq)} names authority {aid}, which this key's log never "
                "granted before it; record the authority_granted event, or check the mandate"))
        if grant is not None and grant.revoked_at is not None:
            reasons.append("revoked")
            since_seq, anchor = grant.revoked_at, aid
        if (grant is not None and grant.revoked_at is None and grant.expires_at is not None
                and e.ts is not None and grant.expires_at < e.ts):
            reasons.append("expired")
            since_ts, anchor, by_ts = grant.expires_at, aid, True
        if self.failed_seq is not None:
            reasons.append("failed_revalidation")
            since_seq = since_seq if since_seq is not None else self.failed_seq
            anchor = anchor or aid or f"revalidation@{_seq(self.failed_seq)}"
        if self.resume_seq is not None:
            reasons.append("unrevalidated_resume")
            since_seq = since_seq if since_seq is not None else self.resume_seq
            anchor = anchor or f"resume@{_seq(self.resume_seq)}"
        if not reasons:
            return None
        return Unauthorized(tuple(reasons), aid, anchor, since_seq, since_ts, by_ts)


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

    __slots__ = ("seq", "kind", "epoch", "authority_id", "expires_at", "decision", "ts")

    def __init__(self, e: Any, ts: datetime | None) -> None:
        self.seq, self.kind, self.epoch = e.seq, str(e.kind), e.epoch
        self.authority_id, self.expires_at, self.decision = e.authority_id, e.expires_at, e.decision
        self.ts = ts


class KeyAuthority:
    """One opted-in workflow key in either engine: its tracker, and the double commits waiting
    for a compensation record. Feed every event of the key in seq order."""

    __slots__ = ("tracker",)

    def __init__(self) -> None:
        self.tracker = AuthorityTracker()

    @classmethod
    def after_acquisitions(cls, highest: int | None, last_seq: int | None, resumed: bool) -> "KeyAuthority":
        """A key that opts in only now (the live detector, at its first authority event): the
        state its acquisitions so far left, as the tracker would have it. Before the first
        authority event nothing but acquisitions moves the tracker."""
        out = cls()
        t = out.tracker
        t.acquired = last_seq is not None
        t.highest = highest
        t.resume_seq = last_seq if resumed else None
        return out

    def feed(self, e: Any, ts: datetime | None = None) -> tuple[Unauthorized | None, list[AuthorityDiagnostic]]:
        return self.tracker.feed(_Fed(e, when(e.ts) if ts is None else ts))


def judged(e: Any, verdict: Unauthorized, stale: "Finding | None", finding_id: Any,
           incident_of: Any, resolution: str | None = None, receipt: int | None = None) -> "Finding":
    """The one finding of an unauthorized effect ``e`` (SPEC section 8).

    A commit is ``unauthorized_commit``, an attempt ``unauthorized_attempt``, one the sink rejected
    (its own ``sink_result``, or the rejection that resolved it) a ``rejected_attempt``: the
    mandate check held. An attempt is resolved as a stale one is (SPEC section 3): by the next
    later rejection or commit of its (workflow key, epoch, effect key), ``resolution`` and that
    event's seq ``receipt``. An event that is stale too gives one finding at the more severe
    grade, with both reasons (``stale`` first).
    """
    from .model import Finding, Grade, Kind, Outcome, SinkResult

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
    if stale is not None:
        outcome, receipt = stale.outcome, stale.receipt_seq
        current_epoch, current_worker, transition = stale.current_epoch, stale.current_worker, stale.transition_seq
        ts = stale.ts
    else:
        outcome = (Outcome.COMMITTED if commit or resolution == "committed" else Outcome.REJECTED if rejected
                   else Outcome.COMMITTED if e.sink_result == SinkResult.ACCEPTED else Outcome.UNKNOWN)
        receipt = (receipt if resolution == "rejected" else e.seq) if rejected else None
        current_epoch, current_worker, transition = e.epoch, e.worker, None
        ts = e.ts
        if type(ts) is int:  # a live event's OTel nanoseconds, as the live detector renders them
            from .detect.live_event import rfc3339

            ts = rfc3339(ts)
    return Finding(
        id=finding_id(k, grade, e.seq), grade=grade, workflow_key=k,
        seq=None if getattr(e, "observed", False) else e.seq, position=e.seq, kind=e.kind,
        epoch=e.epoch, worker=e.worker, current_epoch=current_epoch, current_worker=current_worker,
        transition_seq=transition, effect_key=e.effect_key, step_id=e.step_id, sink=e.sink,
        reporter=None if e.reporter is None else str(e.reporter),
        ts=ts, outcome=outcome, receipt_seq=receipt,
        incident_id=incident_of(k, verdict.anchor), file=e.file, line=e.line,
        reasons=reasons, authority_id=verdict.authority_id, anchor=verdict.anchor,
        since_seq=verdict.since_seq, since_ts=since_ts)


def resolves(e: Any) -> str | None:
    """What an event makes of the open attempts of its (key, epoch, effect key): ``committed``,
    ``rejected`` or None (the rule of ``rules.resolves``, for either engine's events)."""
    from .model import Kind, SinkResult

    if e.kind == Kind.EFFECT_COMMITTED:
        return "committed"
    if e.kind == Kind.EFFECT_ATTEMPTED and e.sink_result == SinkResult.REJECTED:
        return "rejected"
    return None


def compensated(f: "Finding", finding_id: Any) -> "Finding":
    """A double commit that a compensation record reversed: same evidence, grade ``compensated``."""
    import dataclasses

    from .model import Grade

    return dataclasses.replace(f, id=finding_id(f.workflow_key, Grade.COMPENSATED, f.position),
                               grade=Grade.COMPENSATED)
