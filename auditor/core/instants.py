"""Wall-clock instants as both engines read them: RFC 3339 text of one shape, or epoch seconds
and milliseconds. Times are for display, durations and freshness only, never for order.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from typing import Any

from .fields import INSTANT_SHAPE, TS_MILLIS_FROM

_INSTANT = re.compile(INSTANT_SHAPE)
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_TS_RANGE = (-62_135_596_800.0, 253_402_300_799.0)  # years 1 to 9999, as datetimes allow


def instant(text: str | None) -> datetime | None:
    """RFC 3339 text as the store reads an instant: an aware datetime, UTC when no offset is
    given; None when it does not parse (DuckDB's cast drops it)."""
    if text is None or not _INSTANT.fullmatch(text):
        return None
    try:
        t = datetime.fromisoformat(text.upper())
    except ValueError:  # a day the month does not have
        return None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def when(ts: Any) -> datetime | None:
    """An event's ``ts`` as an aware datetime: a datetime, OTel nanoseconds, RFC 3339 text, or
    epoch seconds / milliseconds text (the rule of ``ts``); None when it is none of these."""
    if ts is None or isinstance(ts, datetime):
        return ts if ts is None or ts.tzinfo else ts.replace(tzinfo=timezone.utc)
    if isinstance(ts, int):
        return datetime.fromtimestamp(ts / 1e9, tz=timezone.utc)
    text = str(ts)
    number, seconds = epoch_seconds(text)  # numbers by the store's rule, text as written
    if not number:
        return instant(text)
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def epoch_seconds(v: Any) -> tuple[bool, float | None]:
    """Whether ``v`` is written as a number (a number, or a string of digits), and then its epoch
    seconds: below ``TS_MILLIS_FROM`` seconds, at or above it milliseconds; None when that is no
    time (beyond the years 1 to 9999). ``True`` and ``False`` are no number."""
    if isinstance(v, bool):
        return False, None
    if isinstance(v, (int, float)):
        number = float(v)
    elif isinstance(v, str) and _NUMBER.fullmatch(v.strip()):
        number = float(v.strip())
    else:
        return False, None
    seconds = number / 1000 if abs(number) >= TS_MILLIS_FROM else number
    return True, seconds if _TS_RANGE[0] <= seconds <= _TS_RANGE[1] else None


_last_second: list = [None, ""]  # the last whole second formatted: spans come in bursts


def rfc3339(ns: int) -> str:
    """Nanoseconds since the epoch as RFC 3339 UTC, to the microsecond (what DuckDB parses)."""
    secs, rest = divmod(int(ns), 1_000_000_000)
    cache = _last_second
    if cache[0] == secs:
        head = cache[1]
    else:
        head = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
        cache[0], cache[1] = secs, head
    micros = rest // 1000
    return f"{head}.{micros:06d}Z" if micros else head + "Z"
