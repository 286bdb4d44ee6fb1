"""Stage 6, render: the JSON document, the terminal summary and the HTML report, all from one
``AuditResult``. Renderers only format; they never decide what is a finding."""

from __future__ import annotations

import re

# C0/C1 controls (ANSI escapes start with one), line separators and bidi overrides: what lets a
# log line hide, recolour or reorder text on the reader's screen.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_BUT_LAYOUT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 256 else f"\\u{c:04x}"


def visible(value: object, keep_layout: bool = False) -> str:
    """``value`` as text with control characters shown as ``\\xNN`` / ``\\uNNNN`` escapes.

    ``keep_layout`` leaves tab, newline and carriage return alone (the HTML report's multi-line
    hover titles); the terminal escapes them too, so one log value stays on one line.
    """
    return (_CONTROL_BUT_LAYOUT if keep_layout else _CONTROL).sub(_escape, str(value))
