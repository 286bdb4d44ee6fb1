"""Small formatting helpers of the HTML report (some also registered as template filters)."""

from __future__ import annotations

import hashlib


def _owner(worker: str | None, epoch: int | None) -> str:
    if epoch is None:
        return worker or "unknown"
    return f"epoch {epoch} ({worker or 'unknown'})"


def _short_owner(worker: str | None, epoch: int | None) -> str:
    # A no-break space keeps "3 (worker-05)" on one line; the cell wraps at the arrow.
    return "?" if epoch is None else f"{epoch}\u00a0({worker or 'unknown'})"


def _key_anchor(prefix: str, key: str) -> str:
    """A DOM id for a workflow key: keys hold any character, ids should not."""
    return f"{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _short(text: str, limit: int = 20) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _opt(value: object) -> str:
    return "" if value is None else str(value)


def _num(value: int) -> str:
    return f"{value:,}"


def _px(value: float) -> str:
    """SVG coordinates with at most one decimal, so output does not depend on float noise."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _duration(seconds: float) -> str:
    neg = seconds < 0
    s = abs(seconds)
    if s < 60:
        text = f"{s:.3g} s"
    elif s < 3600:
        m, rest = divmod(round(s), 60)
        text = f"{m} min" + (f" {rest} s" if rest else "")
    else:
        h, rest = divmod(round(s) // 60, 60)
        text = f"{h} h" + (f" {rest} min" if rest else "")
    return ("-" if neg else "") + text
