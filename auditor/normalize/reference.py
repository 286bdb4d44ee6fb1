"""Stage 2, normalize: one record (a JSON line, a CSV or Parquet row, a span's record) to the
canonical fields, or the reason it is quarantined. SPEC section 2, revision 2 ("real logs are
messy"), built on ``vocabulary``.

The store's SQL takes the common shape (canonical names, well-typed values) on its fast path and
hands every other line to ``normalize_line``; the live span processor calls ``normalize`` on its
records. Both therefore keep and refuse the same lines for the same reasons.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from ..core.instants import epoch_seconds, when
from .vocabulary import DEFAULT, REASONS, Vocabulary, guess_kind
from ..core.fields import name_key
from ..core.fields import (DECISIONS, EFFECT_KINDS, ENUM_FIELDS, EPOCH_OPTIONAL_KINDS, FIELDS, HEARTBEATS,
                           INTEGER_FIELDS, JSON_TEXT_FIELDS, KEY_FIELDS, PAYLOAD_KEYS, REPORTERS,
                           REQUIRED_FIELDS, ALIAS_PRIORITY_END, SINK_RESULTS, TIME_FIELDS,
                           UNKNOWN_SINK_RESULT)

_INTEGER = re.compile(r"[+-]?[0-9]+")      # [0-9]: ASCII digits only, never other scripts' digits
_BARE_TOML_KEY = re.compile(r"[A-Za-z0-9_-]+")
_INT64 = (-(1 << 63), (1 << 63) - 1)


class Rejected(ValueError):
    """A record cannot become a canonical event; ``str(e)`` is the quarantine reason."""


def reason(rule: str, **values: Any) -> str:
    return REASONS[rule].format(**values)


def _shown(v: Any, width: int) -> str:
    """A value as reasons show it (JSON text of non-strings), cut to ``width``."""
    return _text(v)[:width]


def _text(v: Any) -> str:
    if isinstance(v, _Float):
        return v.text
    return v if isinstance(v, str) else json.dumps(v, default=str)


def _as_int(f: str, v: Any) -> int:
    n = None
    if isinstance(v, int) and not isinstance(v, bool):
        n = v
    elif isinstance(v, str) and _INTEGER.fullmatch(v.strip()):
        n = int(v.strip())
    if n is None or not _INT64[0] <= n <= _INT64[1]:
        raise Rejected(reason("not_integer", field=f, value=_shown(v, 40)))
    return n


def _as_key(f: str, v: Any) -> str:
    """Keys (workflow_key, effect_key): a string, or an integer as its decimal text."""
    if isinstance(v, str):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    raise Rejected(reason("not_text", field=f, value=_shown(v, 40)))


def payload_hash(value: Any) -> str:
    import hashlib

    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _payload_key(key: str) -> bool:
    """``prompt``, and also the last part of a compound name: ``gen_ai.prompt``, ``tool_input``."""
    key = key.lower()
    return key in PAYLOAD_KEYS or key.replace("-", ".").replace("_", ".").rsplit(".", 1)[-1] in PAYLOAD_KEYS


def redact(value: Any, keep_payloads: bool = False) -> Any:
    """Replace payload-like fields (at any depth) by their SHA-256, unless told to keep them."""
    if keep_payloads:
        return value
    stack = [value]
    while stack:  # iterative: hostile input nests deeper than Python's recursion limit
        node = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                if isinstance(k, str) and _payload_key(k):
                    node[k] = payload_hash(v)
                elif isinstance(v, (dict, list)):
                    stack.append(v)
        elif isinstance(node, list):
            stack.extend(v for v in node if isinstance(v, (dict, list)))
    return value


def attrs_of(record: dict[str, Any], keep_payloads: bool = False,
             vocabulary: Vocabulary = DEFAULT) -> dict[str, Any] | None:
    """The ``attrs`` of a raw record: its ``attrs`` object plus every non-canonical field."""
    extra = {k: v for k, v in record.items() if vocabulary.field_of(k) is None and k != "attrs"}
    return _attrs(record.get("attrs"), extra, keep_payloads)


ATTRS_ERROR = {"attrs_error": "attrs could not be decoded"}


def _attrs(inner: Any, extra: dict[str, Any], keep_payloads: bool) -> dict[str, Any] | None:
    if isinstance(inner, _TooDeep) or any(isinstance(v, _TooDeep) for v in extra.values()):
        return dict(ATTRS_ERROR)
    out: dict[str, Any] = {}
    if isinstance(inner, str):
        try:
            inner = json.loads(inner)
        except ValueError:
            pass
    if isinstance(inner, dict):
        out.update(inner)
    elif inner is not None:
        out["attrs"] = inner
    out.update(extra)
    return redact(out, keep_payloads) or None


def normalize(members: Iterable[tuple[Any, Any]], vocabulary: Vocabulary = DEFAULT,
              keep_payloads: bool = False) -> dict[str, Any]:
    """The canonical fields of one record given as ``(name, value)`` members (duplicates kept),
    plus ``attrs`` (a dict or None), ``ts_epoch`` (seconds, when ``ts`` was a number) and
    ``dropped`` (the descriptive fields whose value could not be read and was dropped, SPEC
    revision 3's ``malformed_field``); raises ``Rejected`` with the quarantine reason.

    The sources of a field are its canonical spellings (any case, camelCase) and its ``--map``
    names; different non-empty values among them make the line ambiguous, whatever their order.
    A built-in alias is read only when none of them is given (unread, it goes to ``attrs``).
    ``seq`` may come back None (the store then decides whether the key is ordered by observation
    or the event is unplaced). ``ts`` is as written; whether it parses as RFC 3339 is left to the
    store (DuckDB's cast), which drops it, and reports it dropped, when it does not.
    """
    given: dict[str, list[tuple[str, int, Any]]] = {}
    extra: dict[str, Any] = {}
    inner = None
    field_of = vocabulary.field_of
    for name, value in members:
        if not isinstance(name, str):
            name = str(name)
        hit = field_of(name)
        if hit is None:
            if name == "attrs" or name_key(name) == "attrs":
                inner = value
            else:
                extra[name] = value
            continue
        f, prio = hit
        if f in JSON_TEXT_FIELDS and isinstance(value, (dict, list)):
            value = _json_text(value)
        if value is None or (isinstance(value, str) and not value.strip()):
            continue  # empty is absent: an alias may fill the field
        given.setdefault(f, []).append((name, prio, value))
    picked: dict[str, tuple[str, Any]] = {}
    for f, sources in given.items():
        primary = [(n, v) for n, prio, v in sources if not 0 < prio < ALIAS_PRIORITY_END]
        if primary:  # the field's own spellings and --map names: aliases beside them go to attrs
            for n, prio, v in sources:
                if 0 < prio < ALIAS_PRIORITY_END:
                    extra.setdefault(n, v)
        picked[f] = _agree(f, primary or [(n, v) for n, _, v in sources], vocabulary)
    get = {f: v for f, (_, v) in picked.items()}.get
    dropped: set[str] = set()

    raw_kind = get("kind")
    hit = None if raw_kind is None or isinstance(raw_kind, (dict, list)) else vocabulary.kind_of(_text(raw_kind))
    kind = None if hit is None else hit[0]
    # An object or array costs the line only in a field the event's kind reads.
    for f in ("seq", "workflow_key", "kind", "epoch", "effect_key"):
        if (f == "epoch" and kind == "outcome_verified") or (f == "effect_key" and kind not in EFFECT_KINDS):
            continue
        _scalar(f, get(f))
    key = get("workflow_key")
    if key is None:
        raise Rejected(reason("key_missing"))
    key = _as_key("workflow_key", key)
    if raw_kind is None:
        raise Rejected(reason("kind_missing"))
    if hit is None:
        text = _text(raw_kind).strip()
        name = text if _BARE_TOML_KEY.fullmatch(text) else json.dumps(text)
        raise Rejected(reason("kind_unknown", value=_shown(raw_kind, 60), name=name[:60],
                              guess=guess_kind(name_key(text))))
    implied = hit[1]
    seq = get("seq")
    if seq is not None:
        seq = _as_int("seq", seq)
    epoch = None
    if kind != "outcome_verified":  # epoch on outcome_verified is ignored, whatever it holds
        epoch = get("epoch")
        if epoch is not None:
            epoch = _as_int("epoch", epoch)
            if epoch < 0:
                raise Rejected(reason("negative_epoch", value=epoch))
        elif kind not in EPOCH_OPTIONAL_KINDS:
            raise Rejected(reason("epoch_missing", kind=kind))
    effect_key = get("effect_key")
    if kind in EFFECT_KINDS:
        if effect_key is None:
            raise Rejected(reason("effect_key_missing", kind=kind))
        effect_key = _as_key("effect_key", effect_key)
    elif effect_key is not None:  # a field the kind does not use never costs the line
        effect_key = _key_or_none(effect_key)
        if effect_key is None:
            dropped.add("effect_key")

    # Descriptive fields (SPEC rev 3): a value that cannot be read is dropped, the event stays,
    # and the drop is reported (malformed_field). Authority fields never cost a line either.
    def text_of(f: str) -> str | None:
        v = get(f)
        if v is None:
            return None
        if isinstance(v, (dict, list)):
            dropped.add(f)
            return None
        return _text(v)

    authority_id = get("authority_id")
    if authority_id is not None:
        authority_id = _key_or_none(authority_id)
        if authority_id is None:
            dropped.add("authority_id")
    decision = _choice(get("decision"), DECISIONS)
    if decision is None and (kind == "revalidated" or get("decision") is not None):
        dropped.add("decision")  # a revalidation without a readable decision decides nothing
    sink_result = None
    if kind == "effect_attempted":
        sink_result = implied.get("sink_result")
        if sink_result is None and (given_result := text_of("sink_result")) is not None:
            sink_result = given_result.strip().lower()
            if sink_result not in SINK_RESULTS:
                sink_result = UNKNOWN_SINK_RESULT
                dropped.add("sink_result")
    reporter = text_of("reporter")
    if reporter is not None:
        reporter = reporter.strip()
        if reporter.lower() in REPORTERS:
            reporter = reporter.lower()
    ts, ts_epoch = get("ts"), None
    if ts is not None:
        ts, ts_epoch = (None, None) if isinstance(ts, (dict, list)) else _ts(ts)
        if ts is None:
            dropped.add("ts")
    out = {"seq": seq, "workflow_key": key, "kind": kind, "epoch": epoch, "effect_key": effect_key}
    worker = text_of("worker")
    out["worker"] = "unknown" if worker is None else worker
    for f in ("sink", "step_id", "event_id"):
        out[f] = text_of(f)
    out["sink_result"], out["reporter"], out["ts"], out["ts_epoch"] = sink_result, reporter, ts, ts_epoch
    for f in TIME_FIELDS:
        v = get(f)
        out[f] = None if v is None or isinstance(v, (dict, list)) else _instant(v)
        if v is not None and out[f] is None:
            dropped.add(f)
    heartbeat = implied.get("heartbeat")
    if heartbeat is None and get("heartbeat") is not None:
        heartbeat = _choice(get("heartbeat"), HEARTBEATS)
        if heartbeat is None:
            dropped.add("heartbeat")
    out["heartbeat"] = heartbeat
    out["decision"], out["authority_id"] = decision, authority_id
    for f in ("reason", "scope"):
        out[f] = text_of(f)
    out["attrs"] = _attrs(inner, extra, keep_payloads) if (inner is not None or extra) else None
    out["dropped"] = sorted(dropped) or None
    return out


def _agree(f: str, sources: list[tuple[str, Any]], vocabulary: Vocabulary) -> tuple[str, Any]:
    """The one value the sources of ``f`` give (the first, when they agree after normalization);
    ``Rejected`` as ambiguous when two disagree. An object or array where another source gives a
    value is ambiguous too, except in a descriptive field, where it is dropped anyway."""
    first = sources[0]
    if len(sources) == 1:
        return first
    descriptive = f not in REQUIRED_FIELDS
    if descriptive:
        readable = [s for s in sources if not isinstance(s[1], (dict, list))]
        if not readable:
            return first
        first = readable[0]
        sources = readable
    want = _comparable(f, first[1], vocabulary)
    for other in sources[1:]:
        if _comparable(f, other[1], vocabulary) != want:
            raise Rejected(reason("ambiguous", field=f, first=_spelled(*first), second=_spelled(*other)))
    return first


def _spelled(name: str, value: Any) -> str:
    return f"{json.dumps(name)}: {_jsonish(value)}"


def _jsonish(value: Any) -> str:
    """A value as a reason shows it: JSON, cut to 40 characters."""
    if isinstance(value, _Float):
        return value.text[:40]
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (ValueError, RecursionError):
        text = "..."
    return text if len(text) <= 40 else text[:39] + "\u2026"


def _comparable(f: str, v: Any, vocabulary: Vocabulary) -> Any:
    """What two spellings of ``f`` are compared by: the value as the field reads it (``7`` equals
    ``"7"``, ``SINK`` equals ``sink``, two writings of one instant are equal)."""
    if isinstance(v, (dict, list)):
        return ("object", _json_text(v))
    if isinstance(v, bool):
        return ("bool", v)
    if f in INTEGER_FIELDS:
        if isinstance(v, int):
            return v
        if isinstance(v, str) and _INTEGER.fullmatch(v.strip()):
            return int(v.strip())
        return ("text", _text(v))
    if f == "kind":
        return vocabulary.kind_of(_text(v)) or ("text", name_key(_text(v)))
    if f in KEY_FIELDS:
        return _key_or_none(v) or ("text", _text(v))
    if f in ENUM_FIELDS:
        return _text(v).strip().lower()
    if f == "ts" or f in TIME_FIELDS:
        t = when(v)
        return t if t is not None else ("text", _text(v))
    return _text(v)


def _scalar(f: str, v: Any) -> None:
    """Raise ``Rejected`` when ``v`` is an object or array: in a field that can cost the line, it does."""
    if isinstance(v, (dict, list)):
        raise Rejected(reason("nested", field=f, what="an object" if isinstance(v, dict) else "an array"))


def _key_or_none(v: Any) -> str | None:
    """A key's text (a string, or an integer as its decimal text); None for anything else."""
    if isinstance(v, str):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return None


def _choice(v: Any, allowed: tuple[str, ...]) -> str | None:
    """A value from a closed list, compared case-insensitively; None when absent or unknown."""
    if v is None or isinstance(v, bool):
        return None
    text = _text(v).strip().lower()
    return text if text in allowed else None


def _instant(v: Any) -> str | None:
    """An instant field (``lease_until``, ``expires_at``) as text DuckDB casts to TIMESTAMPTZ:
    as written, or epoch seconds/milliseconds (the rule of ``ts``) written out in UTC."""
    if v is None:
        return None
    text, seconds = _ts(v)
    if seconds is None:
        return text
    return datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat()


def _ts(v: Any) -> tuple[str | None, float | None]:
    """``ts`` as written, and its epoch seconds when written as seconds or milliseconds; (None,
    None) for a bool or a number that is no time (dropped, the event stays)."""
    if isinstance(v, bool):
        return None, None
    number, seconds = epoch_seconds(v)
    if number and seconds is None:
        return None, None
    return _text(v), seconds


def _json_text(v: Any) -> str:
    """An object or array field value (``scope``) as its JSON text, keys sorted."""
    try:
        return json.dumps(v, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    except (ValueError, RecursionError):
        return json.dumps(ATTRS_ERROR)


class _Float(float):
    """A JSON number that is not an integer, with its text as written (1e400, NaN)."""

    __slots__ = ("text",)


def _float(text: str) -> _Float:
    f = _Float(text)
    f.text = text
    return f


class _TooDeep(list):
    """A member value nested deeper than Python's parser goes: never interpreted."""

    __slots__ = ("opening",)


class _Members(dict):
    """A JSON object that also remembers its members in order, duplicates included."""

    __slots__ = ("members",)


def _object_pairs(pairs: list[tuple[str, Any]]) -> _Members:
    d = _Members(pairs)
    d.members = pairs
    return d


_decoder = json.JSONDecoder(object_pairs_hook=_object_pairs, parse_float=_float, parse_constant=_float)


def parse_line(text: str) -> list[tuple[str, Any]]:
    """The members of one JSON-object line, duplicates kept; raises ``Rejected``.

    NaN, Infinity and numbers beyond a double keep their text (DuckDB's reader accepts them too);
    a member nested too deep for Python's parser is kept as ``_TooDeep``.
    """
    try:
        doc = _decoder.decode(text)
    except RecursionError:
        return _shallow_members(text)
    except ValueError:
        raise Rejected(reason("not_json")) from None
    if not isinstance(doc, _Members):
        raise Rejected(reason("not_object"))
    return doc.members


def _shallow_members(text: str) -> list[tuple[str, Any]]:
    """The top-level members of a deeply nested object, each value parsed on its own."""
    from json.decoder import scanstring

    text = text.strip()
    if not text.startswith("{"):
        raise Rejected(reason("not_object"))
    members: list[tuple[str, Any]] = []
    i, n = 1, len(text)
    try:
        while i < n:
            while text[i] in " \t\r\n,":
                i += 1
            if text[i] == "}":
                return members
            key, i = scanstring(text, i + 1)
            i = text.index(":", i) + 1
            j, depth, in_str = i, 0, False
            while True:
                c = text[j]
                if in_str:
                    if c == "\\":
                        j += 1
                    elif c == '"':
                        in_str = False
                elif c == '"':
                    in_str = True
                elif c in "[{":
                    depth += 1
                elif c in "]}":
                    if depth == 0:
                        break
                    depth -= 1
                elif c == "," and depth == 0:
                    break
                j += 1
            raw = text[i:j].strip()
            try:
                value = _decoder.decode(raw)
            except RecursionError:
                value = _TooDeep()
            members.append((key, value))
            i = j
    except (ValueError, IndexError):
        pass
    raise Rejected(reason("not_json"))


_OUT_FIELDS = FIELDS + ("ts_epoch", "attrs", "rejected", "dropped")


def normalize_line(text: str, vocabulary: Vocabulary = DEFAULT, keep_payloads: bool = False) -> str:
    """``normalize`` of one JSON line as the JSON object the store's SQL reads back: the
    canonical fields, ``ts_epoch``, ``attrs`` (JSON text) and ``rejected`` (the quarantine reason,
    null for an event; ``reason`` is a canonical field of its own)."""
    try:
        out = normalize(parse_line(text), vocabulary, keep_payloads)
    except Rejected as e:
        return json.dumps({"rejected": str(e)})
    attrs = out["attrs"]
    if attrs is not None:
        try:
            out["attrs"] = json.dumps(attrs, sort_keys=True, ensure_ascii=False, default=str)
        except (ValueError, RecursionError):
            out["attrs"] = json.dumps(ATTRS_ERROR)
    return json.dumps(out, default=str)


#: The shape ``normalize_line``'s output is read back with (DuckDB ``json_transform``).
SQL_SHAPE = json.dumps({**{f: "VARCHAR" for f in FIELDS}, "seq": "BIGINT", "epoch": "BIGINT",
                        "ts_epoch": "DOUBLE", "attrs": "VARCHAR", "rejected": "VARCHAR",
                        "dropped": "VARCHAR[]"})
assert set(json.loads(SQL_SHAPE)) == set(_OUT_FIELDS)
assert INTEGER_FIELDS == {f for f, t in json.loads(SQL_SHAPE).items() if t == "BIGINT"}
