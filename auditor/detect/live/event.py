"""The live detector's event tuple and time format, shared by the doors that build live events.

``LiveEvent`` carries ``model.Event``'s fields as a tuple (cheaper to build by the million than a
frozen dataclass); ``rfc3339`` renders OTel nanoseconds as the findings show them.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ...core.model import Event, Kind, Reporter, SinkResult


class LiveEvent(NamedTuple):
    """``model.Event``'s fields as a tuple, for callers that build events by the million.

    ``LiveDetector`` reads events by attribute only, so it takes either; a frozen dataclass
    costs more to build than the detector spends on the event (the span processor's case).
    ``ts`` may also be OTel's nanoseconds since the epoch: findings render it as RFC 3339.
    """

    seq: int
    workflow_key: str
    kind: Kind
    epoch: int | None
    worker: str = "unknown"
    effect_key: str | None = None
    sink: str | None = None
    sink_result: SinkResult | None = None
    reporter: Reporter | None = None
    step_id: str | None = None
    ts: str | int | None = None
    event_id: str | None = None
    attrs: dict[str, Any] | None = None
    file: str | None = None
    line: int | None = None
    observed: bool = False
    lease_until: Any = None  # SPEC sections 7 and 8, as on ``model.Event``
    heartbeat: str | None = None
    reason: str | None = None
    authority_id: str | None = None
    expires_at: Any = None
    scope: str | None = None
    decision: str | None = None
    position: int | None = None  # SPEC rev 3, as on ``model.Event``


_CONTENT = tuple(name for name in Event.__slots__ if name not in ("file", "line", "observed", "position"))


def same_event(a: Event, b: Event) -> bool:
    """The same event written twice (its provenance aside): a duplicate, not a conflict. A
    ``LiveEvent`` has none of the optional fields of sections 7 and 8: they are None there."""
    return all(getattr(a, name, None) == getattr(b, name, None) for name in _CONTENT)
