"""Stable ids: a hash of what identifies a finding, an incident or a diagnostic, so reruns and
re-ingests name them alike, in both engines."""

from __future__ import annotations

import hashlib
from typing import Any

from ..core.model import DiagnosticKind, Grade

# A hash of what identifies the thing, so reruns and re-ingests agree. ``position`` is the
# event's place in its key's order: its seq, or its global observation position in a key whose log
# lacks seq (the seq reported is then null, and the id hashes the position, SPEC rev 3).
_SHA256 = hashlib.sha256


def stable_id(prefix: str, *parts: Any) -> str:
    """A short id that depends only on its parts."""
    text = "\x1f".join(["" if p is None else str(p) for p in parts])
    return prefix + _SHA256(text.encode()).hexdigest()[:16]


# finding_id and incident_id are stable_id's text written out: each runs once per finding (half a
# million at ten million events), and the call with a tuple of parts costs a third more.

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
