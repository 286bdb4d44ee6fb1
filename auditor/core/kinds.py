"""The event's closed vocabularies: its kinds, sink results and reporters.

The bottom of the format: ``core.fields`` (the registry) names their values, and ``core.model``
(the event, which gains every registry field it does not declare) re-exports them, so both read
them without a circle.
"""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    """The canonical event kinds: the five of SPEC section 2, then section 8's authority kinds."""

    LEASE_ACQUIRED = "lease_acquired"
    PROGRESS = "progress"
    EFFECT_ATTEMPTED = "effect_attempted"
    EFFECT_COMMITTED = "effect_committed"
    OUTCOME_VERIFIED = "outcome_verified"
    AUTHORITY_GRANTED = "authority_granted"
    AUTHORITY_REVOKED = "authority_revoked"
    RESUMED = "resumed"
    REVALIDATED = "revalidated"
    EFFECT_COMPENSATED = "effect_compensated"


class SinkResult(StrEnum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    UNKNOWN = "unknown"


class Reporter(StrEnum):
    COORDINATOR = "coordinator"
    SINK = "sink"
    WORKER = "worker"
    VERIFIER = "verifier"
