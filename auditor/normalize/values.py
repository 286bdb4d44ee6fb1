"""Reading one value of a canonical field (SPEC section 2): integers, keys, closed lists, instants,
and the ``attrs`` a record keeps (payload-like members hashed). Each reader either returns the
value as the field holds it or says why it cannot (``Rejected`` in a field that can cost the line,
None in a descriptive one, whose value is then dropped and reported).
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any

from ..core.fields import PAYLOAD_KEYS
from ..core.instants import epoch_seconds
from .vocabulary import REASONS

_INTEGER = re.compile(r"[+-]?[0-9]+")      # [0-9]: ASCII digits only, never other scripts' digits
#: SPEC revision 3.1: ZooKeeper logs a zxid as 0x24. Unsigned, as zxids and offsets are.
_HEX = re.compile(r"0[xX][0-9a-fA-F]+")
_INT64 = (-(1 << 63), (1 << 63) - 1)


def integer_text(text: str) -> int | None:
    """The integer a string writes (decimal, or ``0x``-prefixed hexadecimal), spaces around it
    allowed; None for anything else (``1e3``, ``0b101``, ``1_000`` and other scripts' digits)."""
    t = text.strip()
    if _INTEGER.fullmatch(t):
        return int(t)
    if _HEX.fullmatch(t):
        return int(t, 16)
    return None


class Rejected(ValueError):
    """A record cannot become a canonical event; ``str(e)`` is the quarantine reason."""


class Ignored(Rejected):
    """A record whose kind an ``[ignore]`` entry declares irrelevant (SPEC rev 3): counted as
    ignored, never an event and never quarantined. ``value`` is the kind value as written and
    ``entry`` the ``[ignore]`` entry that matched it, ``("kinds" | "kind_patterns", text)``. A
    ``Rejected`` too, so that a caller that knows only refusals never takes it for an event;
    those that count it catch it first."""

    def __init__(self, value: str, entry: tuple[str, str]) -> None:
        super().__init__(value)
        self.value = value
        self.entry = entry


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
    elif isinstance(v, str):
        n = integer_text(v)
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


# attrs: anything else, kept, never interpreted; payload bodies are not stored (hashed).

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
