"""The event format's vocabulary, declared once as data: fields, kinds, aliases, closed lists.

Every stage reads the format from here: the store's SQL (as bound parameters), the reference
normalizer, the rules, both detectors and the Spark engine. A team's own names (``--map``) are an
overlay built on these in ``normalize.vocabulary``.
"""

from __future__ import annotations

import functools
import re
from types import MappingProxyType
from typing import Mapping

from .model import Kind, Reporter, SinkResult

#: The canonical fields of revision 1, in the order the store's normalizer and the derived event_id use.
CORE_FIELDS: tuple[str, ...] = ("seq", "workflow_key", "kind", "epoch", "worker", "effect_key", "sink",
                                "sink_result", "reporter", "step_id", "ts", "event_id")

#: Optional fields of revision 2: lease health (SPEC section 7) and authority (section 8). An
#: event without any of them derives the same event_id as under revision 1.
LEASE_FIELDS: tuple[str, ...] = ("lease_until", "heartbeat", "reason")

AUTHORITY_FIELDS: tuple[str, ...] = ("authority_id", "expires_at", "scope", "decision")

OPTIONAL_FIELDS: tuple[str, ...] = LEASE_FIELDS + AUTHORITY_FIELDS

FIELDS: tuple[str, ...] = CORE_FIELDS + OPTIONAL_FIELDS

#: Fields holding an instant (RFC 3339, or epoch seconds/milliseconds like ``ts``); an unparsable
#: one is dropped and the event stays.
TIME_FIELDS = frozenset({"lease_until", "expires_at"})

#: Fields whose value may be an object or array, kept as its JSON text (keys sorted).
JSON_TEXT_FIELDS = frozenset({"scope"})

HEARTBEATS: tuple[str, ...] = ("ok", "lost")

DECISIONS: tuple[str, ...] = ("continue", "pause", "terminate")

#: Fields whose value must be an integer.
INTEGER_FIELDS = frozenset({"seq", "epoch"})

#: Fields that can cost a line (SPEC rev 2): everything else only describes the event, and a
#: value of it that cannot be read is dropped and reported (``malformed_field``, rev 3).
REQUIRED_FIELDS = frozenset({"seq", "workflow_key", "kind", "epoch", "effect_key"})

#: Fields holding a key: a string, or an integer as its decimal text.
KEY_FIELDS = frozenset({"workflow_key", "effect_key", "authority_id"})

#: Fields holding one of a closed list of values, compared case-insensitively.
ENUM_FIELDS = frozenset({"sink_result", "reporter", "heartbeat", "decision"})

#: A name's priority in a ``Vocabulary``: the field itself is 0, its built-in aliases 1 up to
#: this, ``--map`` names from it on. The field and its --map names are its sources (SPEC rev 3).
ALIAS_PRIORITY_END = 10

#: Other names of a field, tried in this order when the field itself is absent or empty.
FIELD_ALIASES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "workflow_key": ("job", "job_id", "run_id"),
    "kind": ("event",),
    "epoch": ("token", "fencing_token", "owner_epoch", "lease_epoch"),
    "effect_key": ("idempotency_key",),
    "lease_until": ("lease_expires_at",),
})

KINDS: tuple[str, ...] = tuple(k.value for k in Kind)

#: The kinds of revision 1 (SPEC section 2); the others are section 8's authority kinds.
CORE_KINDS = frozenset({"lease_acquired", "progress", "effect_attempted", "effect_committed", "outcome_verified"})

#: Other kind names: ``alias -> (kind, {field: value} it implies)``.
KIND_ALIASES: Mapping[str, tuple[str, Mapping[str, str]]] = MappingProxyType({
    "job_claimed": ("lease_acquired", {}),
    "heartbeat_ok": ("progress", {"heartbeat": "ok"}),
    "heartbeat_lost": ("progress", {"heartbeat": "lost"}),
    "tool_request_started": ("effect_attempted", {}),
    "result_rejected": ("effect_attempted", {"sink_result": "rejected"}),
})

#: Kinds that concern one effect key and cannot be read without it.
EFFECT_KINDS = frozenset({"effect_attempted", "effect_committed", "outcome_verified", "effect_compensated"})

#: Kinds recorded by a coordinator, sink or verifier rather than under an owner epoch: ``epoch``
#: is optional (kept when given); on ``outcome_verified`` it is ignored (SPEC sections 2 and 8).
EPOCH_OPTIONAL_KINDS = frozenset({"authority_granted", "authority_revoked", "effect_compensated"})

SINK_RESULTS: tuple[str, ...] = tuple(r.value for r in SinkResult)

REPORTERS: tuple[str, ...] = tuple(r.value for r in Reporter)

#: What an unknown ``sink_result`` counts as: the sink's verdict is not known.
UNKNOWN_SINK_RESULT = SinkResult.UNKNOWN.value

#: attrs keys whose values may carry payload bodies, prompts or secrets: stored as a hash only.
PAYLOAD_KEYS = frozenset({"payload", "prompt", "input", "output", "arguments", "result", "body",
                          "messages", "content", "completion", "response", "request"})

#: A ``ts`` written as a number at or above this is in milliseconds since the epoch, below it in
#: seconds: 1e11 seconds is the year 5138, 1e11 milliseconds is March 1973.
TS_MILLIS_FROM = 100_000_000_000

#: The instants both engines read (``ts``, ``lease_until``, ``expires_at``): RFC 3339, with ``T``,
#: ``t`` or a space between date and time, seconds and fraction optional, ``Z``, ``z`` or an offset
#: (a time without one is UTC), or a date alone. The batch audit casts in DuckDB and the live
#: detector parses in Python, and the two readers disagree outside this shape ("... UTC", ISO week
#: dates, 24:00): text of any other shape is not a time in either, so they cannot disagree.
INSTANT_SHAPE = (r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
                 r"([Tt ]([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,9})?)?"
                 r"([Zz]|[+-]([01][0-9]|2[0-3])(:?[0-5][0-9])?)?)?")

#: What ``str.strip()`` removes, the normalizer's test of a blank value (SPEC rev 2: a string of
#: spaces is absent): the characters ``str.isspace`` holds true for, written out, since finding them
#: by testing every code point took a seventh of a second at every start. Python's Unicode
#: database has named these since Unicode 6.3; tests/normalize/test_fast_path.py checks the list against it.
BLANK = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
         "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")

_NOTHING: Mapping[str, str] = MappingProxyType({})


def reporter_role(reporter: str | None) -> str | None:
    """The role a reporter counts as for confidence: an unknown reporter counts as ``worker``."""
    if reporter is None or reporter in REPORTERS:
        return reporter
    return Reporter.WORKER.value


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def name_key(name: str) -> str:
    """How field and kind names are compared: case-insensitive, camelCase as snake_case. A short
    name is remembered (a log names the same few members on every line); a long value is not
    (a hostile one must not fill the memory)."""
    return _short_name_key(name) if len(name) <= 80 else _name_key(name)


def _name_key(name: str) -> str:
    return _CAMEL.sub("_", name.strip()).lower()


_short_name_key = functools.lru_cache(maxsize=8192)(_name_key)
