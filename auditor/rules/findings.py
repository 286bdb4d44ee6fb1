"""How findings are graded and ordered in both engines: which epoch an incident is about, how a
resolved (or unresolved) attempt is graded (SPEC section 3), how far findings can be trusted
(confidence) and the document's order (by workflow key, then place)."""

from __future__ import annotations

from collections.abc import Iterable

from ..core.fields import reporter_role
from ..core.model import GRADE_RANK, Confidence, Diagnostic, Finding, Grade, Kind, Outcome, SinkResult

_COMMIT, _REJECTED, _ACCEPTED = Kind.EFFECT_COMMITTED, SinkResult.REJECTED, SinkResult.ACCEPTED

#: Grades of one effect key committed under two epochs (compensated: one application reversed).
TWICE = frozenset({Grade.DOUBLE_COMMIT, Grade.COMPENSATED})


def displaced_epoch(grade: Grade, epoch: int, epochs: tuple[int, ...] | list[int] | None) -> int:
    """The epoch whose incident a finding joins: its own, or for a double commit the lowest epoch
    that committed the effect key (SPEC section 3, incidents)."""
    return min(epochs) if grade in TWICE and epochs else epoch


# Attempts are resolved by later evidence (SPEC section 3): the next later event of the same
# (workflow_key, epoch, effect_key) that resolves, i.e. a rejection or a commit.
_ATTEMPT_AS = {
    None: None,
    "rejected": (Grade.REJECTED_ATTEMPT, Outcome.REJECTED),
    "committed": (Grade.STALE_ATTEMPT, Outcome.COMMITTED),
}


def resolves(kind: Kind, sink_result: SinkResult | str | None) -> bool:
    """Whether an event resolves the earlier unresolved attempts of its triple."""
    return kind is _COMMIT or sink_result == _REJECTED


def resolved_as(kind: Kind) -> str:
    """What a resolving event makes of the attempts it resolves: ``committed`` or ``rejected``."""
    return "committed" if kind is _COMMIT else "rejected"


def attempt_grade(resolution: str | None, own_result: SinkResult | str | None) -> tuple[Grade, Outcome]:
    """Grade and outcome of a stale attempt, given what resolved it (``committed``, ``rejected`` or
    None when nothing did) and the verdict the attempt itself carries.

    Resolved by a rejection: one ``rejected_attempt`` (the rejection is its receipt). Resolved by a
    commit: a ``stale_attempt`` whose outcome is ``committed``. Unresolved: a ``stale_attempt`` whose
    outcome is ``committed`` when the sink accepted it, else ``unknown``.
    """
    graded = _ATTEMPT_AS[resolution]
    if graded is not None:
        return graded
    return Grade.STALE_ATTEMPT, Outcome.COMMITTED if own_result == _ACCEPTED else Outcome.UNKNOWN


_CLOCK_TRUSTED = frozenset({"sink", "coordinator"})


def confidence(findings: Iterable[Finding], *, observed: bool, capped: bool = False) -> Confidence:
    """How far ``findings`` (one incident's, or one finding live) can be trusted.

    ``low`` when their key was ordered by observation (seq missing); ``medium`` when a commit among
    them was reported only by the worker (or an unknown reporter), or their evidence was capped
    (``otel.capped``: attributes were cut, e.g. by a span limit); else ``high``.

    The span processor calls it per finding: ``confidence([f], observed=<f's key ordered by
    arrival>, capped=<f's evidence capped>)``.
    """
    if observed:
        return Confidence.LOW
    if capped:
        return Confidence.MEDIUM
    # An absent reporter keeps high confidence (most logs do not say who wrote them, and seq
    # order, not the reporter, is what most findings rest on); an unknown one counts as the worker.
    for f in findings:
        if f.kind is _COMMIT and reporter_role(f.reporter) == "worker":
            return Confidence.MEDIUM
        # An expiry is judged by wall clocks (SPEC section 8): high only when the sink or the
        # coordinator reported the effect.
        if "expired" in f.reasons and f.reporter not in _CLOCK_TRUSTED:
            return Confidence.MEDIUM
    return Confidence.HIGH


def finding_order(f: Finding) -> tuple[str, int, int]:
    return (f.workflow_key, f.place, GRADE_RANK[f.grade])


def diagnostic_order(d: Diagnostic) -> tuple[str, int, str, int]:
    return (d.workflow_key, d.place, d.kind.value, -1 if d.epoch is None else d.epoch)
