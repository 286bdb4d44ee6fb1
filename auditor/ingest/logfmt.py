"""Stage 1, read logfmt (SPEC section 2, "Logs as teams write them"): one record a line of
``key=value`` pairs, as Go's and Python's ``slog``, logrus and Heroku write them::

    time=2026-07-26T10:00:01Z level=info msg="claimed job" job=J-7 token=7 rev=1042

Each line becomes one JSON object of strings, members in order, so the store's one normalizer
reads it as any other line: a value in double quotes may hold spaces, ``=`` and escapes (``\\"``,
``\\\\``, ``\\n``, ``\\t``, ``\\u00e9``, Go's ``\\x41``); a bare key is an empty (absent) value; a key
given twice is two members (ambiguous when they disagree); a line that does not parse is
quarantined with what is wrong and where. Lines are split, numbered, size-limited and
decompressed by ``jsonl_chunks``, as JSON lines are.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from .jsonl import jsonl_chunks
from .sources import Progress, Source

if TYPE_CHECKING:
    import pyarrow as pa

_KEY = r'[^\s="]+'
_QUOTED = r'"(?:[^"\\]|\\.)*"'
_BARE = r'[^\s="]*'
#: One pair: a key, then ``=`` and a quoted or bare value, or nothing (a bare key).
_PAIR = re.compile(rf'({_KEY})(?:=({_QUOTED}|{_BARE}))?(?=\s|$)')
_LINE = re.compile(rf'\s*(?:{_KEY}(?:=(?:{_QUOTED}|{_BARE}))?(?=\s|$)\s*)*')
_GO_ESCAPE = re.compile(r'\\(x[0-9A-Fa-f]{2}|U[0-9A-Fa-f]{8}|[0-7]{3}|[av\'])')
_GO_CHARS = {"a": "\\u0007", "v": "\\u000b", "'": "'"}


class LogfmtError(ValueError):
    """A line that is not logfmt; ``str(e)`` is the quarantine reason."""


def parse(line: str) -> list[tuple[str, str]]:
    """The ``(key, value)`` pairs of one logfmt line, in order, duplicates kept (a bare key has
    the value ``""``); raises ``LogfmtError`` saying what is wrong and at which column."""
    if _LINE.fullmatch(line) is None:
        raise LogfmtError(_where(line))
    out = []
    for key, value in _PAIR.findall(line):
        if value.startswith('"'):
            value = _unquote(value)
        out.append((key, value))
    return out


def _unquote(quoted: str) -> str:
    try:
        return json.loads(quoted)
    except ValueError:
        pass
    go = _GO_ESCAPE.sub(lambda m: _go(m.group(1)), quoted)
    try:
        return json.loads(go)
    except ValueError:
        raise LogfmtError(f"line is not logfmt: the quoted value {quoted[:40]} has an escape logfmt does not "
                          'know; write \\" \\\\ \\n \\t or \\uXXXX') from None


def _go(escape: str) -> str:
    """One of Go's escapes (``strconv.Quote``) that JSON lacks, as a JSON escape."""
    if escape[0] == "x":
        return f"\\u00{escape[1:]}"
    if escape[0] == "U":
        return json.dumps(chr(int(escape[1:], 16)))[1:-1] if int(escape[1:], 16) <= 0x10FFFF else "\\"
    if escape[0] in "01234567":
        return f"\\u{int(escape, 8):04x}"
    return _GO_CHARS[escape]


def _where(line: str) -> str:
    """Why ``line`` does not parse, and at which column (1-based)."""
    pos, n = 0, len(line)
    while True:
        while pos < n and line[pos].isspace():
            pos += 1
        m = _PAIR.match(line, pos) if pos < n else None
        if m is None:
            break
        pos = m.end()
    key = re.compile(_KEY).match(line, pos)
    if key is not None and line.startswith("=", key.end()):  # the key reads: its value does not
        pos = key.end() + 1
        quoted = re.compile(_QUOTED).match(line, pos)
        if quoted is not None:
            pos = quoted.end()
            what = f"{line[pos]!r} right after a quoted value"
        elif line.startswith('"', pos):
            what = "an unterminated quoted value"
        else:
            pos += len(re.compile(_BARE).match(line, pos).group(0))
            what = f"{line[pos]!r} inside an unquoted value"
    else:
        what = f"{line[pos]!r}" if pos < n else "the end of the line"
    return (f"line is not logfmt (key=value pairs): {what} at column {pos + 1}; quote values that hold "
            'spaces, = or " ("like this")')


def to_json(pairs: list[tuple[str, str]]) -> str:
    """The pairs as one JSON object, members in order, duplicates kept."""
    return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{json.dumps(v, ensure_ascii=False)}"
                          for k, v in pairs) + "}"


def looks_like_logfmt(head: bytes, lines: int = 1) -> bool:
    """Whether ``head`` starts as logfmt: its first non-blank line decides (SPEC revision 3.1): not
    JSON, it parses and holds at least one ``key=value`` pair (plain text and a CSV header do not).
    A later JSON line is read as one JSON record (``logfmt_chunks``), a malformed one quarantined:
    neither is a reason to read the file as JSON."""
    text = head.decode("utf-8", "replace").lstrip("\ufeff")
    candidates = [ln.rstrip("\r") for ln in text.split("\n")]
    if len(head) >= 64 << 10:  # the head may end inside a line: that line says nothing
        candidates = candidates[:-1]
    verdicts = []
    for ln in candidates:
        if not ln.strip():
            continue
        if ln.lstrip()[:1] in ("{", "["):
            return False
        try:
            parse(ln)
            verdicts.append(any(m.group(2) is not None for m in _PAIR.finditer(ln)))
        except LogfmtError:
            verdicts.append(False)
        if len(verdicts) >= lines:
            break
    return bool(verdicts) and verdicts[0] and 2 * sum(verdicts) > len(verdicts)


def logfmt_chunks(source: Source, progress: Progress | None = None) -> Iterator["pa.Table"]:
    """Raw lines of a logfmt file in chunks (``jsonl_chunks``'s lines, numbered from 1), each
    line one JSON object, or quarantined with the reason it does not parse."""
    import pyarrow as pa

    first = True
    for table in jsonl_chunks(source, progress):
        raws, bads = [], []
        for raw, bad in zip(table.column("raw").to_pylist(), table.column("bad").to_pylist()):
            if bad is not None or not raw:
                raws.append(raw)
                bads.append(bad)
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:  # the stage says so, with its own reason
                raws.append(raw)
                bads.append(None)
                continue
            if first:
                text = text.lstrip("\ufeff")
            first = False
            text = text.rstrip("\r\n")
            # blank: the stage leaves it out, as a blank JSON line; a line that starts with "{" is
            # one JSON record (revision 3.1: services mix the two), read by the stage as JSONL's
            if not text.strip() or text.lstrip().startswith("{"):
                raws.append(raw)
                bads.append(None)
                continue
            try:
                raws.append(to_json(parse(text)).encode("utf-8", "surrogatepass"))
                bads.append(None)
            except LogfmtError as e:
                raws.append(b"")
                bads.append(str(e))
        yield pa.table({"line": table.column("line"), "pos": table.column("pos"),
                        "raw": pa.array(raws, pa.large_binary()), "bad": pa.array(bads, pa.string())})
