"""The live detector's event tuple and time format, shared by the doors that build live events.

``LiveEvent`` carries ``model.Event``'s fields as a tuple (cheaper to build by the million than a
frozen dataclass); ``rfc3339`` renders OTel nanoseconds as the findings show them.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from ...core.model import Event


def _live_event() -> type:
    """``LiveEvent``: ``model.Event``'s fields, in its order and with its defaults, as a named tuple."""
    fields = dataclasses.fields(Event)
    defaults = [f.default for f in fields if f.default is not dataclasses.MISSING]
    cls = collections.namedtuple("LiveEvent", [f.name for f in fields], defaults=defaults, module=__name__)
    cls.__doc__ = """``model.Event``'s fields as a tuple, for callers that build events by the million.

    ``LiveDetector`` reads events by attribute only, so it takes either; a frozen dataclass
    costs more to build than the detector spends on the event (the span processor's case).
    ``ts`` may also be OTel's nanoseconds since the epoch: findings render it as RFC 3339.
    Generated from ``Event`` (whose fields the registry, ``core/fields.py``, checks), so a field
    added there is carried here too.
    """
    return cls


LiveEvent: Any = _live_event()


_CONTENT = tuple(f.name for f in dataclasses.fields(Event) if f.name not in ("file", "line", "observed", "position"))


def same_event(a: Event, b: Event) -> bool:
    """The same event written twice (its provenance aside): a duplicate, not a conflict. A
    ``LiveEvent`` has none of the optional fields of sections 7 and 8: they are None there."""
    return all(getattr(a, name, None) == getattr(b, name, None) for name in _CONTENT)
