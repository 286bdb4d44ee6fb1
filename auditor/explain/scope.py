"""Narrowing what is reported: workflow keys (globs) and a window by seq or by ts.

Detection always runs over every stored event, so a takeover before the window still makes the
events inside it stale; the scope only decides which findings, incidents, diagnostics and workflow
rows are *reported*. The input accounting (lines read, quarantined) stays whole: a lost line
cannot be placed in or out of a scope, so it keeps counting against the verdict.

``event_id`` conflicts are lost evidence too and are kept whatever the scope, so narrowing a
report never turns an incomplete verdict into a pass.

Window bounds are inclusive. An integer bound is a ``seq``; anything else must be an RFC 3339
time and compares with ``ts``. A key scope that matches no workflow key at all is an error, not an empty pass.
A token scope (``--token NAME``, the name of an ``auditor serve`` token) keeps the findings whose
evidence (the event, its transition, its receipt) that token delivered; naming a token no stored
record carries is an error too. A finding the
window cannot place (no ``seq`` under a seq window,
no parsable ``ts`` under a time window) is kept: a filter never hides evidence it cannot judge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import AuditorError

if TYPE_CHECKING:
    from ..core.model import Finding

_INT = re.compile(r"[+-]?[0-9]+")


class ScopeError(AuditorError):
    """A --key, --keys-from, --since or --until value cannot be used."""


@dataclass(frozen=True, slots=True)
class Bound:
    """One end of the window: a seq (int) or a time (aware datetime); ``text`` as given."""

    text: str
    seq: int | None = None
    ts: datetime | None = None

    @classmethod
    def parse(cls, text: str, option: str = "--since") -> "Bound":
        value = text.strip()
        if _INT.fullmatch(value):
            return cls(value, seq=int(value))
        ts = parse_ts(value)
        if ts is None:
            raise ScopeError(f"{option} {text!r} is neither a seq (an integer) nor an RFC 3339 time "
                             "(e.g. 2026-07-26T10:00:00Z)")
        return cls(value, ts=ts)


def parse_ts(value: str | None) -> datetime | None:
    """An RFC 3339 time as an aware datetime (naive values are taken as UTC), else None."""
    if not value:
        return None
    try:
        ts = datetime.fromisoformat(value.strip().replace("z", "Z"))
    except ValueError:
        return None
    return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)


@dataclass(frozen=True, slots=True)
class Scope:
    """Which workflow keys (glob patterns; empty means all) and which window to report."""

    keys: tuple[str, ...] = ()
    since: Bound | None = None
    until: Bound | None = None
    #: names of ``auditor serve`` tokens: only findings whose evidence one of them delivered
    tokens: tuple[str, ...] = ()

    @classmethod
    def parse(cls, keys: list[str] | tuple[str, ...] = (), keys_from: str | Path | None = None,
              since: str | None = None, until: str | None = None,
              tokens: list[str] | tuple[str, ...] = ()) -> "Scope":
        """Build a scope from command-line text; raises ``ScopeError`` naming the option."""
        patterns = [k for k in keys if k.strip()]
        if keys_from is not None:
            patterns += read_keys(keys_from)
        scope = cls(tuple(patterns), since and Bound.parse(since, "--since"),
                    until and Bound.parse(until, "--until"), tuple(t.strip() for t in tokens if t.strip()))
        if scope.since and scope.until and _after(scope.since, scope.until):
            raise ScopeError(f"--since {scope.since.text} is after --until {scope.until.text}")
        return scope

    @property
    def narrows(self) -> bool:
        return bool(self.keys or self.since or self.until or self.tokens)

    def key_matches(self, key: str) -> bool:
        return not self.keys or any(fnmatchcase(key, p) for p in self.keys)

    def finding_matches(self, f: "Finding") -> bool:
        return self.key_matches(f.workflow_key) and self.in_window(f.seq, f.ts)

    def in_window(self, seq: int | None, ts: str | None) -> bool:
        for bound, after in ((self.since, True), (self.until, False)):
            if bound is None:
                continue
            if bound.seq is not None:
                value = seq
                limit = bound.seq
            else:
                value, limit = parse_ts(ts), bound.ts
            if value is None:
                continue  # cannot be placed: kept
            if (value < limit) if after else (value > limit):
                return False
        return True

    def to_dict(self) -> dict[str, Any]:
        return {"keys": list(self.keys), "since": self.since and self.since.text,
                "until": self.until and self.until.text, **({"tokens": list(self.tokens)} if self.tokens else {})}

    def describe(self) -> str:
        """One line for people: ``keys ledger/*; seq 5 to 9``."""
        parts = []
        if self.keys:
            parts.append("keys " + ", ".join(self.keys))
        if self.since or self.until:
            lo = self.since.text if self.since else "the start"
            hi = self.until.text if self.until else "the end"
            parts.append(f"from {lo} to {hi}")
        if self.tokens:
            parts.append("delivered by token " + ", ".join(self.tokens))
        return "; ".join(parts)


def _after(a: Bound, b: Bound) -> bool:
    if a.seq is not None and b.seq is not None:
        return a.seq > b.seq
    if a.ts is not None and b.ts is not None:
        return a.ts > b.ts
    return False


def read_keys(path: str | Path) -> list[str]:
    """One workflow key or glob per line; blank lines and ``#`` comments skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ScopeError(f"--keys-from {path}: cannot read it ({getattr(e, 'strerror', None) or e})") from e
    keys = [line.strip() for line in text.splitlines()]
    keys = [k for k in keys if k and not k.startswith("#")]
    if not keys:
        raise ScopeError(f"--keys-from {path}: no workflow key in it (one key or glob per line)")
    return keys
