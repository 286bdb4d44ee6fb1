"""The suggested vocabulary as a TOML file (``auditor map``): every entry with a comment giving its
evidence (how many lines, sample values, the first line) and a confidence, what was read as it is,
what was left in ``attrs``, and what could not be placed, as comments to decide. Patterns are TOML
literal strings; every key and value is quoted so that the file always loads (``suggest`` loaded
the same entries before this writes them). No timestamps: the same sample writes the same file."""

from __future__ import annotations

import json
import re

from ...core.fields import ALIAS_PRIORITY_END
from ..vocabulary import DEFAULT
from . import Suggestion
from .fields import _short
from .messages import Message

_BARE = re.compile(r"[A-Za-z0-9_-]+")


def toml_string(text: str, literal: bool = False) -> str:
    """``text`` as a TOML string: a literal string (backslashes as they are) when asked and it
    can be one, else a basic string with JSON's escapes (which TOML shares) and DEL escaped."""
    if literal and "'" not in text and not any(ord(c) < 0x20 and c != "\t" or c == "\x7f" for c in text):
        return f"'{text}'"
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_key(text: str) -> str:
    return text if _BARE.fullmatch(text) else toml_string(text)


def render(s: Suggestion, command: str = "auditor map") -> str:
    n = len(s.sample.lines)
    files = ", ".join(_clean(f) for f in s.sample.files)
    out = [f"# Suggested by {command} from the first {n:,} lines of {files}.",
           "# Read it, correct what it got wrong, then: auditor audit LOG --map THIS_FILE",
           f"# On those lines it reads {_tally(s)}.", *_audits_to(s), ""]
    out += _fields(s)
    out += _kinds(s)
    out += _ignore(s)
    out += _to_decide(s)
    return "\n".join(out).rstrip("\n") + "\n"


def _clean(text: str) -> str:
    """Text for a comment: control characters (a newline would end it) escaped."""
    return "".join(c if (c >= " " and c != "\x7f") or c == "\t" else f"\\x{ord(c):02x}" for c in text)


def _tally(s: Suggestion) -> str:
    c = s.check
    text = f"{c.events:,} events, {c.ignored:,} ignored, {c.quarantined:,} quarantined"
    if s.sample.unreadable:
        text += f" ({s.sample.unreadable:,} more lines are no record: {_clean(s.sample.first_unreadable or '')})"
    return text


def _audits_to(s: Suggestion) -> list[str]:
    """What the sample audits to beyond the tally: lines left unplaced, keys the audit would see
    without an acquisition or without order, and members left in attrs that look like either."""
    c = s.check
    n = s.undecided_lines
    out = [f"# Unplaced: {c.unplaced:,} events without a seq in a key ordered by seq; keys: {len(c.keys):,}, "
           f"{c.without_acquisition:,} without an acquisition, {len(c.unordered):,} ordered by observation; "
           f"{n:,} line{'' if n == 1 else 's'} of messages left to decide{' (listed below)' if n else ''}."]
    for path, f in s.left:
        what = "the authoritative order" if f == "seq" else "an owner epoch"
        out.append(f"# Left in attrs: {_short(path)} looks like {what}; map it as {f} if it is.")
    return out


def _fields(s: Suggestion) -> list[str]:
    out = ["[fields]"]
    for c in s.fields:
        if c.path:
            out.append(f'{toml_key(c.path)} = "{c.field}"  # {c.evidence}; confidence {c.confidence}')
    as_is = []
    for c in s.fields:
        if c.as_is:
            prio = DEFAULT.field_of(c.as_is)[1]
            what = "its own name" if prio == 0 else "a built-in alias" if prio < ALIAS_PRIORITY_END else "mapped"
            as_is.append(f"#   {_short(c.as_is)} gives {c.field} ({what}): {c.evidence}")
    if as_is:
        out += ["# Read as they are, no entry needed:"] + as_is
    used = {c.path or c.as_is for c in s.fields}
    rest = sorted((st for p, st in s.stats.items() if p not in used), key=lambda st: (-st.lines, st.path))
    if rest:
        out.append("# Kept in attrs (not a canonical field):")
        out += [f'#   {_short(st.path)}: {st.lines:,} lines, e.g. {", ".join(_short(v) for v in st.examples(2))}'
                for st in rest[:12]]
        if len(rest) > 12:
            out.append(f"#   and {len(rest) - 12} more members")
    for c, why in s.refused:
        out.append(f"# Not written: {toml_string(c.path)} = \"{c.field}\" ({_clean(why)})")
    if s.kind_path is None:
        out.append('# No member reads as the kind of each line: map one, e.g. msg = "kind"')
    return out + [""]


def _where(m: Message) -> str:
    return f"{_clean(m.first[0])}:{m.first[1]}"


def _comment(m: Message, kind: bool) -> str:
    shown = ", ".join(_short(v) for v in list(m.values)[:2])
    lines = f"{m.lines:,} line{'s' if m.lines != 1 else ''} (first {_where(m)})"
    example = "" if m.exact else f", e.g. {shown}"
    return f"{lines}{example}; {m.why}; confidence {m.confidence}" if kind else f"{lines}{example}; {m.why}"


def _kinds(s: Suggestion) -> list[str]:
    exact = [m for m in s.kinds if m.exact]
    patterns = [m for m in s.kinds if not m.exact]
    out = []
    if s.known:
        shown = ", ".join(f"{_short(m.entry())} ({m.lines:,})" for m in s.known)
        out += [f"# Kind values read as they are (kind names the auditor knows): {shown}", ""]
    if exact:
        out.append("[kinds]")
        out += [f'{toml_key(m.entry())} = "{m.kind}"  # {_comment(m, True)}' for m in exact]
        out.append("")
    if patterns:
        out.append("[kind_patterns]  # regular expressions (Python re), searched, case-insensitive")
        out += [f'{toml_string(m.entry(), literal=True)} = "{m.kind}"  # {_comment(m, True)}' for m in patterns]
        out.append("")
    return out


def _ignore(s: Suggestion) -> list[str]:
    if not s.ignore:
        return []
    out = ["[ignore]  # lines that are not about ownership: counted and listed, never evidence"]
    for name, group, literal in (("kinds", [m for m in s.ignore if m.exact], False),
                                 ("kind_patterns", [m for m in s.ignore if not m.exact], True)):
        if group:
            out.append(f"{name} = [")
            out += [f"  {toml_string(m.entry(), literal)},  # {_comment(m, False)}" for m in group]
            out.append("]")
    return out + [""]


def _to_decide(s: Suggestion) -> list[str]:
    out = []
    if s.undecided:
        out.append("# To decide: messages not placed (their lines are quarantined as unknown kinds until you")
        out.append("# map them under [kinds] or [kind_patterns], or declare them irrelevant under [ignore]):")
        for m in sorted(s.undecided, key=lambda m: m.first):
            out.append(f"#   {toml_string(m.entry(), literal=not m.exact)}: {_comment(m, False)}")
    if s.beyond:
        lines = sum(m.lines for m in s.beyond)
        out.append(f"# And {len(s.beyond):,} more messages ({lines:,} lines) beyond the {200} entries written: "
                   "the rarest; audit with this file and map what it quarantines")
    if s.check.quarantined:
        out.append("# What the sample's lines would still be quarantined for, with this file:")
        for reason, count in s.check.reasons.most_common(10):
            file, line = s.check.first[reason]
            out.append(f"#   {count:,} line{'s' if count != 1 else ''} (first {_clean(file)}:{line}): {_clean(reason)}")
    return out
