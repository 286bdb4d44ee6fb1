"""The vocabulary every stage shares: event kinds, grades, and the evidence records.

Findings, incidents and diagnostics are frozen dataclasses of evidence. Prose (witness sentences,
tables, HTML) is rendered from them in ``explain`` and ``render``; nothing here formats text for
people: what each grade means and asks for is a rule, in ``rules``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from .builder import builder
from .fields import REGISTRY
from .kinds import Kind, Reporter, SinkResult


class Grade(StrEnum):
    """Finding grades, declared from least to most severe; compare with ``rank``."""

    STALE_ACTIVITY = "stale_activity"
    REJECTED_ATTEMPT = "rejected_attempt"
    COMPENSATED = "compensated"
    STALE_ATTEMPT = "stale_attempt"
    UNAUTHORIZED_ATTEMPT = "unauthorized_attempt"
    STALE_COMMIT = "stale_commit"
    UNAUTHORIZED_COMMIT = "unauthorized_commit"
    DOUBLE_COMMIT = "double_commit"

    @property
    def rank(self) -> int:
        return GRADE_RANK[self]

    def at_least(self, other: "Grade") -> bool:
        return GRADE_RANK[self] >= GRADE_RANK[other]


#: Each grade's place in the declared order; hot loops index it directly (a million findings).
GRADE_RANK = {g: i for i, g in enumerate(Grade)}


class DiagnosticKind(StrEnum):
    """Diagnostics rank below every grade and never fail an audit by default: those of SPEC
    section 3, then lease health's (section 7), which say whether the lease configuration is safe."""

    EPOCH_REGRESSION = "epoch_regression"
    UNACQUIRED_EPOCH = "unacquired_epoch"
    ORDERING_CONFLICT = "ordering_conflict"
    EVENT_ID_CONFLICT = "event_id_conflict"
    UNGRANTED_AUTHORITY = "ungranted_authority"
    REVALIDATION_RETRY = "revalidation_retry"
    LEASE_TIMING_RISK = "lease_timing_risk"
    LATE_EXTENSION = "late_extension"
    TAKEOVER_BEFORE_EXPIRY = "takeover_before_expiry"
    EFFECT_AFTER_LEASE_EXPIRY = "effect_after_lease_expiry"
    MALFORMED_FIELD = "malformed_field"


class Outcome(StrEnum):
    """What the destination did with an effect, as far as the evidence shows."""

    COMMITTED = "committed"
    REJECTED = "rejected"
    UNKNOWN = "unknown"


class Verdict(StrEnum):
    """The audit's answer (SPEC section 4): ``incomplete`` when no finding reaches --fail-on but
    evidence was lost (quarantined lines, ``event_id`` conflicts), so a pass cannot be claimed."""

    PASS = "pass"
    FAIL = "fail"
    INCOMPLETE = "incomplete"

    @property
    def exit_code(self) -> int:
        return _EXIT_CODES[self]


_EXIT_CODES = {Verdict.PASS: 0, Verdict.FAIL: 1, Verdict.INCOMPLETE: 3}


class Confidence(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


def _fields(obj: Any) -> dict[str, Any]:
    """``asdict`` one level deep, without its deep copy: the JSON document of a big audit converts
    hundreds of thousands of findings and incidents, and their values are immutable."""
    return {name: getattr(obj, name) for name in obj.__slots__}


@dataclass(frozen=True, slots=True)
class Event:
    """One canonical event (SPEC section 2), as stored after normalization.

    ``seq`` is the event's place in its key's order: the given seq, or, when ``observed`` (the key's
    log lacks seq), its observation position, which is never reported as a seq. ``file`` and
    ``line`` say where it came from (a live event: the processor's source name and arrival number).
    A field declared in the registry (``core/fields.py``) and not here is appended, None by
    default (``_with_registry_fields``): declaring it here too is only for its type's sake.
    """

    seq: int
    workflow_key: str
    kind: Kind
    epoch: int | None
    worker: str = "unknown"
    effect_key: str | None = None
    sink: str | None = None
    sink_result: SinkResult | None = None
    reporter: Reporter | str | None = None  # an unknown reporter is kept as given (SPEC rev 2)
    step_id: str | None = None
    ts: str | None = None
    event_id: str | None = None
    attrs: dict[str, Any] | None = None
    file: str | None = None
    line: int | None = None
    observed: bool = False
    # SPEC section 7 (lease health) and section 8 (authority): optional, None when not given.
    lease_until: datetime | None = None
    heartbeat: str | None = None     # "ok" | "lost"
    reason: str | None = None
    authority_id: str | None = None
    expires_at: datetime | None = None
    scope: str | None = None         # as written, or an object's JSON text
    decision: str | None = None      # "continue" | "pause" | "terminate"
    # SPEC revision 3: 1-based in global observation order (the files as given, then line order)
    position: int | None = None


def _with_registry_fields(declared: type) -> type:
    """``declared`` with every field of the registry (``core/fields.py``) it does not declare
    appended in the registry's order, defaulting to None (an instant's as ``datetime``, the others' as ``str``):
    a field declared there alone is carried by every engine that builds or reads ``Event``. The
    same class when it declares them all (today's case: nothing changes on the hot path);
    otherwise one frozen slots dataclass named ``Event`` in this module, so it pickles (Spark)
    and ``core.builder`` builds it as fast."""
    import dataclasses

    have = {f.name for f in dataclasses.fields(declared)}
    extra = [(s.name, "datetime | None" if s.role == "time" else "str | None", dataclasses.field(default=None))
             for s in REGISTRY if s.name not in have]
    if not extra:
        return declared
    own = [(f.name, f.type, dataclasses.field(default=f.default, default_factory=f.default_factory))
           for f in dataclasses.fields(declared)]
    names = have | {name for name, _, _ in extra}
    namespace = {k: v for k, v in vars(declared).items() if not k.startswith("__") and k not in names}
    cls = dataclasses.make_dataclass(declared.__name__, own + extra, namespace=namespace, frozen=True, slots=True)
    cls.__module__, cls.__qualname__, cls.__doc__ = __name__, declared.__qualname__, declared.__doc__
    return cls


Event = _with_registry_fields(Event)


@dataclass(frozen=True, slots=True)
class Finding:
    """One graded piece of evidence at one event (the event at ``seq``).

    ``outcome`` is set for attempts (resolved by later evidence) and commits; ``receipt_seq`` is the
    rejection that resolved a ``rejected_attempt``; ``epochs`` lists, for a ``double_commit``, every
    epoch that had committed the effect key up to and including this commit;
    ``unstable_effect_key`` marks the double commit of one ``step_id`` under different effect keys.
    ``seq`` is the event's seq, null when its log gave none; ``position`` is its place in global
    observation order (SPEC rev 3: 1-based, the files as given, then line order). Every ``*_seq``
    field is a seq or null (never an invented one, where the key is ordered by observation) and has
    a ``*_position`` beside it. ``place`` is the order the rules use: the seq, or in a key without
    any seq, the position. ``file`` and ``line`` locate the event in its source.
    """

    id: str
    grade: Grade
    workflow_key: str
    seq: int | None
    position: int
    kind: Kind
    epoch: int
    worker: str
    current_epoch: int | None
    current_worker: str | None
    transition_seq: int | None
    transition_position: int | None
    effect_key: str | None = None
    step_id: str | None = None
    sink: str | None = None
    reporter: str | None = None
    ts: str | None = None
    outcome: Outcome | None = None
    receipt_seq: int | None = None
    receipt_position: int | None = None
    epochs: tuple[int, ...] = ()
    unstable_effect_key: bool = False
    incident_id: str = ""
    file: str | None = None
    line: int | None = None
    # SPEC section 8: why an effect was unauthorized (``stale`` too when it was also stale), the
    # mandate it names, what its incident is about (the authority_id, ``resume@<seq>`` or
    # ``revalidation@<seq>``) and since when the mandate was missing (a seq, or an expiry time).
    reasons: tuple[str, ...] = ()
    authority_id: str | None = None
    anchor: str | None = None
    since_seq: int | None = None
    since_position: int | None = None
    since_ts: str | None = None

    @property
    def place(self) -> int:
        """Its place in its key's order: the seq, or the position in a key without seq."""
        return self.position if self.seq is None else self.seq

    @property
    def transition_place(self) -> int | None:
        return self.transition_position if self.transition_seq is None else self.transition_seq

    @property
    def receipt_place(self) -> int | None:
        return self.receipt_position if self.receipt_seq is None else self.receipt_seq

    def to_dict(self) -> dict[str, Any]:
        d = _fields(self)
        d["epochs"] = list(self.epochs)
        d["reasons"] = list(self.reasons)
        return d


#: ``Finding(...)`` with the fields in order, in half the time (see ``builder``).
build_finding = builder(Finding)


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One diagnostic at one event: its ``seq`` (null where the key has none) and ``position``.

    Lease health's diagnostics also carry ``group``, the dimension group of their key
    (``{"tool": "browser"}``; ``{}`` without dimensions), and ``numbers``, the figures the detail
    states (seconds, ``R``, epochs). A ``lease_timing_risk`` concerns a whole group: it points at
    the event that granted the group's shortest lease. The others leave both None.
    """

    id: str
    kind: DiagnosticKind
    workflow_key: str
    seq: int | None
    epoch: int | None
    detail: str
    group: dict[str, str | None] | None = None
    numbers: dict[str, float | int | None] | None = None
    position: int | None = None  # SPEC rev 3: global observation position of the event
    file: str | None = None      # where it is written, for diagnostics about input (malformed_field)
    line: int | None = None

    @property
    def place(self) -> int:
        """Where it sorts in its key: the seq, else the position (-1 when neither)."""
        return self.seq if self.seq is not None else self.position if self.position is not None else -1

    def to_dict(self) -> dict[str, Any]:
        return _fields(self)


@dataclass(frozen=True, slots=True)
class Owner:
    worker: str | None
    epoch: int | None


@dataclass(frozen=True, slots=True)
class EventRef:
    """One piece of evidence: seq (null when the log gave none), position, ts, kind, and where it is written."""

    seq: int | None
    position: int | None
    ts: str | None
    kind: Kind
    file: str | None = None
    line: int | None = None


@dataclass(frozen=True, slots=True)
class EffectOutcome:
    """What happened to one affected effect key inside an incident."""

    effect_key: str
    sink_outcome: Outcome
    verified: bool
    verified_seq: int | None = None
    verified_position: int | None = None


@dataclass(frozen=True, slots=True)
class Incident:
    """Findings of one ``(workflow_key, displaced epoch)``, with the evidence an operator needs.

    Its ``*_seq`` fields are null where the key is ordered by observation; the ``*_position``
    beside each is always set (SPEC rev 3). ``window_first_place`` is the rules' order."""

    id: str
    workflow_key: str
    severity: Grade
    displaced: Owner
    current: Owner
    transition_seq: int | None
    transition_position: int | None
    first_stale: EventRef | None
    last_stale: EventRef | None
    window_first_seq: int | None
    window_first_position: int
    window_last_seq: int | None
    window_last_position: int
    window_seconds: float | None
    effect_keys: tuple[str, ...]
    effects: tuple[EffectOutcome, ...]
    sink_outcome: Outcome | None
    verification: str  # "verified", "unverified", or "n/a" when no effect key is affected
    freshness_seconds: float | None
    confidence: Confidence
    response: str
    witness: str
    grades: dict[str, int]
    finding_ids: tuple[str, ...] = field(default_factory=tuple)
    responses: tuple[str, ...] = ()  # every distinct action the findings call for, most urgent first

    @property
    def window_first_place(self) -> int:
        return self.window_first_position if self.window_first_seq is None else self.window_first_seq

    @property
    def transition_place(self) -> int | None:
        return self.transition_position if self.transition_seq is None else self.transition_seq

    def to_dict(self) -> dict[str, Any]:
        d = _fields(self)
        d["displaced"], d["current"] = _fields(self.displaced), _fields(self.current)
        d["first_stale"] = None if self.first_stale is None else _fields(self.first_stale)
        d["last_stale"] = None if self.last_stale is None else _fields(self.last_stale)
        d["effect_keys"] = list(self.effect_keys)
        d["effects"] = [_fields(e) for e in self.effects]
        d["grades"] = dict(self.grades)
        d["finding_ids"] = list(self.finding_ids)
        d["responses"] = list(self.responses)
        return d


#: The explain stage's objects, one incident at a time (48,000 at two million events).
build_incident, build_owner, build_event_ref, build_effect = (
    builder(Incident), builder(Owner), builder(EventRef), builder(EffectOutcome))
