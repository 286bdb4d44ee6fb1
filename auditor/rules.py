"""The rules of SPEC section 3 that are not set operations: stated once, imported by both detectors.

The batch detector (``detect/``: SQL, then ``explain``) and the incremental one (``detect/live.py``,
the span processor's) decide staleness and double commits each in its own way (joins over a table,
a state machine over a stream); everything they must then agree on word for word lives here: the
stable ids, which epoch an incident is about, how a resolved (or unresolved) attempt is graded,
confidence, and what each grade means and asks the operator to do. ``tests/test_rules_both_engines.py``
runs one table of histories against both engines.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

from .model import GRADE_RANK, Confidence, Diagnostic, DiagnosticKind, Finding, Grade, Kind, Outcome, SinkResult
from .fields import reporter_role

RESPONSES: dict[Grade, str] = {
    Grade.STALE_ACTIVITY: "Stop or quarantine the old worker; verify it emits nothing more.",
    Grade.REJECTED_ATTEMPT: (
        "Keep the rejection receipt; find why the lease was lost; "
        "check the current owner still progresses."
    ),
    Grade.STALE_ATTEMPT: (
        "Query the destination by effect key; treat as a possible stale commit."
    ),
    Grade.STALE_COMMIT: (
        "Freeze further effects for this key; check the result; "
        "decide whether compensation is safe."
    ),
    Grade.DOUBLE_COMMIT: (
        "Treat the outcome as uncertain until an outcome_verified predicate or a human confirms it; "
        "never auto-resolve by retrying the current owner."
    ),
    Grade.COMPENSATED: (
        "Verify the compensation: check at the destination that exactly one application of the "
        "effect remains."
    ),
    Grade.UNAUTHORIZED_ATTEMPT: (
        "Hand the run to a human with the delta between the original and the current intent; "
        "never retry it; query the destination by effect key."
    ),
    Grade.UNAUTHORIZED_COMMIT: (
        "Hand the run to a human with the delta between the original and the current intent; "
        "never retry it; decide whether the effect must be reversed."
    ),
}

MEANINGS: dict[Grade, str] = {
    Grade.STALE_ACTIVITY: "a displaced process is still running",
    Grade.REJECTED_ATTEMPT: "the fence held: near miss",
    Grade.STALE_ATTEMPT: "it may or may not have taken effect",
    Grade.STALE_COMMIT: "the fence failed or did not exist: correctness incident",
    Grade.DOUBLE_COMMIT: "the effect happened twice",
    Grade.COMPENSATED: "the effect happened twice; one application was reversed",
    Grade.UNAUTHORIZED_ATTEMPT: "an effect was attempted without a valid mandate",
    Grade.UNAUTHORIZED_COMMIT: "an effect took place without a valid mandate",
}


# Ids: a hash of what identifies the thing, so reruns and re-ingests agree. ``position`` is the
# event's place in its key's order: its seq, or its global observation position in a key whose log
# lacks seq (the seq reported is then null, and the id hashes the position, SPEC rev 3).


_SHA256 = hashlib.sha256


def stable_id(prefix: str, *parts: Any) -> str:
    """A short id that depends only on its parts."""
    text = "\x1f".join(["" if p is None else str(p) for p in parts])
    return prefix + _SHA256(text.encode()).hexdigest()[:16]


# The two below are stable_id's text written out: each runs once per finding (half a million at
# ten million events), and the call with a tuple of parts costs a third more.

def finding_id(workflow_key: str, grade: Grade | str, position: int) -> str:
    text = f"{_part(workflow_key)}\x1f{grade}\x1f{_part(position)}"
    return "f-" + _SHA256(text.encode()).hexdigest()[:16]


def incident_id(workflow_key: str, displaced: int) -> str:
    return "i-" + _SHA256(f"{_part(workflow_key)}\x1f{_part(displaced)}".encode()).hexdigest()[:16]


def _part(value: Any) -> Any:
    return "" if value is None else value


def authority_incident_id(workflow_key: str, anchor: str) -> str:
    """The incident of unauthorized findings: one per ``(workflow_key, authority_id or resume)``."""
    return stable_id("i-", workflow_key, "authority", anchor)


def diagnostic_id(workflow_key: str, kind: DiagnosticKind | str, position: int | None,
                  epoch: int | None) -> str:
    return stable_id("d-", workflow_key, str(kind), position, epoch)


_DOUBLE = Grade.DOUBLE_COMMIT
#: Grades of one effect key committed under two epochs (compensated: one application reversed).
TWICE = frozenset({Grade.DOUBLE_COMMIT, Grade.COMPENSATED})


def displaced_epoch(grade: Grade, epoch: int, epochs: tuple[int, ...] | list[int] | None) -> int:
    """The epoch whose incident a finding joins: its own, or for a double commit the lowest epoch
    that committed the effect key (SPEC section 3, incidents)."""
    return min(epochs) if grade in TWICE and epochs else epoch


# Attempts are resolved by later evidence (SPEC section 3): the next later event of the same
# (workflow_key, epoch, effect_key) that resolves, i.e. a rejection or a commit.

_COMMIT, _REJECTED, _ACCEPTED = Kind.EFFECT_COMMITTED, SinkResult.REJECTED, SinkResult.ACCEPTED
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


# Confidence (SPEC section 3, rev 2).

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


# The order of the document's lists (SPEC section 4: by workflow key, then seq), total so that
# both engines list the same things the same way.




def finding_order(f: Finding) -> tuple[str, int, int]:
    return (f.workflow_key, f.place, GRADE_RANK[f.grade])


def diagnostic_order(d: Diagnostic) -> tuple[str, int, str, int]:
    return (d.workflow_key, d.place, d.kind.value, -1 if d.epoch is None else d.epoch)
