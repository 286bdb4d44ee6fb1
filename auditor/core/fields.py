"""The event format's vocabulary, declared once as data: fields, kinds, aliases, closed lists.

Every stage reads the format from here: the store's SQL (its column lists generated from
``REGISTRY``, see ``core.columns``; values as bound parameters), the reference normalizer, the
rules, both detectors and the Spark engine. A team's own names (``--map``) are an
overlay built on these in ``normalize.vocabulary``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

from .kinds import Kind, Reporter, SinkResult

HEARTBEATS: tuple[str, ...] = ("ok", "lost")

DECISIONS: tuple[str, ...] = ("continue", "pause", "terminate")

SINK_RESULTS: tuple[str, ...] = tuple(r.value for r in SinkResult)

REPORTERS: tuple[str, ...] = tuple(r.value for r in Reporter)

#: What a field's value is, and so how every engine reads it: ``int`` an integer, ``key`` a string
#: or an integer as its decimal text, ``kind`` a kind name, ``enum`` one of ``values`` compared
#: case-insensitively, ``ts`` the event's own time (RFC 3339 or epoch seconds/milliseconds, shown as
#: written), ``time`` an instant (an unparsable one is dropped), ``text`` a string, ``json`` a string
#: or an object/array kept as its JSON text (keys sorted).
ROLES = ("int", "key", "kind", "enum", "ts", "time", "text", "json")


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """One canonical field of the event format: everything every engine needs to carry it.

    ``sql`` is its column's type in the store (DuckDB; ``NOT NULL`` where the store requires a
    value); ``required`` fields can cost a line (the others are dropped and reported when their
    value cannot be read); ``aliases`` are its other names, tried in order when it is absent;
    ``values`` the closed list of an ``enum``; ``revision`` the format revision that added it, as
    the SPEC numbers them ("3.1"; a field of revision 2 or later joins the derived event_id only
    when given, so older events keep theirs, and a field after revision 2 is carried by the
    normalizers by its role alone: ``core.columns.added_fields``); ``note`` the comment its column carries in the store's DDL.
    """

    name: str
    role: str
    sql: str = "VARCHAR"
    revision: str = "1"
    required: bool = False
    aliases: tuple[str, ...] = ()
    values: tuple[str, ...] = ()
    note: str = ""

    def __post_init__(self) -> None:
        assert self.role in ROLES, f"{self.name}: role {self.role!r} is not one of {ROLES}"
        assert (self.role == "enum") == bool(self.values), f"{self.name}: an enum, and only an enum, has values"
        assert self.role not in ("int", "kind", "ts") or self.revision == "1", (
            f"{self.name}: an {self.role} field is one of revision 1's (an unreadable integer costs the line); "
            "an optional field is text, json, key, enum or time")


#: The canonical fields, in the order the store's normalizer and the derived event_id use. Revision
#: 2's are optional (SPEC section 7, lease health; section 8, authority): an event without any of
#: them derives the same event_id as under revision 1. A field added here reaches the store (its
#: column, the upgrade of an older store, the read-back), both detectors, the Spark engine and the
#: live event (docs/ARCHITECTURE.md, "How to add a field").
REGISTRY: tuple[FieldSpec, ...] = (
    FieldSpec("seq", "int", "BIGINT", required=True),
    FieldSpec("workflow_key", "key", "VARCHAR NOT NULL", required=True, aliases=("job", "job_id", "run_id")),
    FieldSpec("kind", "kind", "VARCHAR NOT NULL", required=True, aliases=("event",)),
    FieldSpec("epoch", "int", "BIGINT", required=True,
              aliases=("token", "fencing_token", "owner_epoch", "lease_epoch")),
    FieldSpec("worker", "text", "VARCHAR NOT NULL"),
    FieldSpec("effect_key", "key", required=True, aliases=("idempotency_key",)),
    FieldSpec("sink", "text"),
    FieldSpec("sink_result", "enum", values=SINK_RESULTS),
    FieldSpec("reporter", "enum", values=REPORTERS),
    FieldSpec("step_id", "text"),
    FieldSpec("ts", "ts", note="as written, for display"),
    FieldSpec("event_id", "text", note="as given; null for a derived id not needed yet (see fill_ids)"),
    FieldSpec("lease_until", "time", "TIMESTAMPTZ", "2", aliases=("lease_expires_at",),
              note="the lease expiry granted or extended"),
    FieldSpec("heartbeat", "enum", revision="2", values=HEARTBEATS, note="'ok' | 'lost'"),
    FieldSpec("reason", "text", revision="2"),
    FieldSpec("authority_id", "key", revision="2"),
    FieldSpec("expires_at", "time", "TIMESTAMPTZ", "2", note="the mandate's expiry (authority_granted)"),
    FieldSpec("scope", "json", revision="2"),
    FieldSpec("decision", "enum", revision="2", values=DECISIONS, note="'continue' | 'pause' | 'terminate' (revalidated)"),
)

#: The lease health fields of revision 2 (SPEC section 7); the others of revision 2 are section 8's.
LEASE_FIELDS: tuple[str, ...] = ("lease_until", "heartbeat", "reason")


def registered() -> tuple[FieldSpec, ...]:
    """The registry as it stands (a test may extend it for its length: ``declared``)."""
    return REGISTRY


def spec(name: str) -> FieldSpec:
    """The spec of field ``name``."""
    return next(s for s in registered() if s.name == name)


def _names(keep) -> tuple[str, ...]:
    return tuple(s.name for s in REGISTRY if keep(s))


FIELDS: tuple[str, ...] = _names(lambda s: True)

#: The canonical fields of revision 1.
CORE_FIELDS: tuple[str, ...] = _names(lambda s: s.revision == "1")

#: The optional fields of later revisions (none of them can cost a line).
OPTIONAL_FIELDS: tuple[str, ...] = _names(lambda s: s.revision != "1")

AUTHORITY_FIELDS: tuple[str, ...] = tuple(f for f in OPTIONAL_FIELDS if f not in LEASE_FIELDS)

#: Fields holding an instant (RFC 3339, or epoch seconds/milliseconds like ``ts``); an unparsable
#: one is dropped and the event stays.
TIME_FIELDS = frozenset(_names(lambda s: s.role == "time"))

#: Fields whose value may be an object or array, kept as its JSON text (keys sorted).
JSON_TEXT_FIELDS = frozenset(_names(lambda s: s.role == "json"))

#: Fields whose value must be an integer.
INTEGER_FIELDS = frozenset(_names(lambda s: s.role == "int"))

#: Fields that can cost a line (SPEC rev 2): everything else only describes the event, and a
#: value of it that cannot be read is dropped and reported (``malformed_field``, rev 3).
REQUIRED_FIELDS = frozenset(_names(lambda s: s.required))

#: Fields holding a key: a string, or an integer as its decimal text.
KEY_FIELDS = frozenset(_names(lambda s: s.role == "key"))

#: Fields holding one of a closed list of values, compared case-insensitively.
ENUM_FIELDS = frozenset(_names(lambda s: s.role == "enum"))

#: A name's priority in a ``Vocabulary``: the field itself is 0, its built-in aliases 1 up to
#: this, ``--map`` names from it on. The field and its --map names are its sources (SPEC rev 3).
ALIAS_PRIORITY_END = 10

#: Other names of a field, tried in this order when the field itself is absent or empty.
FIELD_ALIASES: Mapping[str, tuple[str, ...]] = MappingProxyType({s.name: s.aliases for s in REGISTRY if s.aliases})

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
