"""The document's items read back: a finding, an incident or a workflow summary from the value of
its JSON line, equal to the dataclass that line was written from (``spool.Spool`` decodes with these).
"""

from __future__ import annotations

from typing import Any

from ..core.model import (Confidence, Grade, Kind, Outcome, build_effect, build_event_ref, build_finding,
                          build_incident, build_owner)

_GRADES = {g.value: g for g in Grade}
_KINDS = {k.value: k for k in Kind}
_OUTCOMES = {o.value: o for o in Outcome}
_CONFIDENCE = {c.value: c for c in Confidence}


def finding(d: dict[str, Any]):
    """The ``Finding`` whose document item is ``d``."""
    d["grade"] = _GRADES[d["grade"]]
    d["kind"] = _KINDS[d["kind"]]
    outcome = d["outcome"]
    if outcome is not None:
        d["outcome"] = _OUTCOMES[outcome]
    d["epochs"] = tuple(d["epochs"])
    d["reasons"] = tuple(d["reasons"])
    return build_finding(**d)


def _ref(d: dict[str, Any] | None):
    if d is None:
        return None
    d["kind"] = _KINDS[d["kind"]]
    return build_event_ref(**d)


def _effect(d: dict[str, Any]):
    d["sink_outcome"] = _OUTCOMES[d["sink_outcome"]]
    return build_effect(**d)


def incident(d: dict[str, Any]):
    """The ``Incident`` whose document item is ``d``."""
    d["severity"] = _GRADES[d["severity"]]
    d["displaced"] = build_owner(**d["displaced"])
    d["current"] = build_owner(**d["current"])
    d["first_stale"] = _ref(d["first_stale"])
    d["last_stale"] = _ref(d["last_stale"])
    d["effect_keys"] = tuple(d["effect_keys"])
    d["effects"] = tuple(_effect(e) for e in d["effects"])
    if d["sink_outcome"] is not None:
        d["sink_outcome"] = _OUTCOMES[d["sink_outcome"]]
    d["confidence"] = _CONFIDENCE[d["confidence"]]
    d["finding_ids"] = tuple(d["finding_ids"])
    d["responses"] = tuple(d["responses"])
    return build_incident(**d)


def grade_of(value: str | None) -> Grade | None:
    return None if value is None else _GRADES[value]
