"""Stage 1, read: OTLP JSON lines, as the OpenTelemetry Collector's file exporter writes them.

Each line is one ``{"resourceSpans": [...]}`` or ``{"resourceLogs": [...]}`` export request
(protobuf JSON mapping, except that trace and span ids are hex and int64 values are decimal
strings). Spans, span events and log records go through the same mapping as the live processors
(``auditor.otel.map_span``, ``map_log``) and come out as raw
canonical records, which the store's one SQL normalizer then judges like any other line. A line
can therefore yield zero records (a valid line without ownership evidence, or a logs/metrics
line), one, or several; a line that is not OTLP JSON yields one reason and is quarantined, and a
malformed span yields one reason for itself while the line's other spans are read. So for OTLP the
accounting counts records, not lines: ``lines_read`` is the records (and unreadable lines or
spans) found, each quarantined entry names its input line.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from ..core.limits import Limits
from .otel_mapping import two_values


if TYPE_CHECKING:
    import pyarrow as pa

    from . import Progress, Source

#: Records per arrow chunk handed to the store.
CHUNK_RECORDS = 50_000

Yield = tuple[int, dict[str, Any] | None, str | None]


class _BadLine(Exception):
    """The line is JSON but not an OTLP traces export request."""


ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def is_framed(head: bytes) -> bool:
    """True for the file exporter's length-prefixed layout: each export request as a 4-byte
    big-endian size and one zstd frame (``format: json`` with ``compression: zstd``, unless the
    Collector's native-compression feature gate writes a plain zstd stream of lines instead)."""
    return len(head) >= 8 and head[4:8] == ZSTD_MAGIC


def read_otlp(src: IO[bytes] | IO[str] | str | Path, source_name: str = "",
              limits: "Limits | None" = None, shaped: bool = False) -> Iterator[Yield]:
    """Yield ``(line, canonical record, None)`` per ownership event, ``(line, None, reason)`` per bad
    line or per bad span (a line with several spans can yield records and reasons).

    ``src`` is a path or an open file, binary or text. Its content may be JSON lines, gzip or
    zstd JSON lines, or the file exporter's length-prefixed zstd frames, where ``line`` is the
    frame's number. Lines are numbered from 1; blank lines carry nothing. A compressed stream
    cut short yields what came before it, then one reason. ``source_name`` is only for callers'
    messages; ``limits`` (the defaults when None) bounds line length and decompression.
    ``shaped``: every log record is a record too (``otel_mapping.shaped_log``), for a vocabulary
    that reads logs as teams write them.
    """
    limits = limits or Limits()
    if isinstance(src, (str, Path)):
        with open(src, "rb") as raw:
            framed = is_framed(raw.read(8))
        if framed:
            with open(src, "rb") as raw:
                yield from _documents(_frames(raw), shaped)
            return
        from . import open_bytes

        with open_bytes(Path(src), limits, source_name or None) as f:
            yield from _documents(_lines(f, limits.max_line_bytes), shaped)
        return
    if isinstance(src, io.BufferedReader) and is_framed(src.peek(8)[:8]):
        yield from _documents(_frames(src), shaped)
        return
    yield from _documents(_lines(src, limits.max_line_bytes), shaped)


def _lines(f: IO[bytes] | IO[str], max_line: int) -> Iterator[tuple[int, bytes | str | None, str | None]]:
    """Numbered lines; blocks are split here so that a stream damaged mid-way still hands out
    every whole line before the damage (a buffered line iterator would lose its buffer). A line
    longer than ``max_line`` bytes is a reason, and is never held whole."""
    from . import DamagedStream
    from .jsonl import too_long_reason

    if isinstance(f, io.TextIOBase):
        yield from ((n, line, None) for n, line in enumerate(f, start=1))
        return
    n, carry, skipping = 0, b"", False
    while True:
        try:
            block = f.read(1 << 20)
        except DamagedStream as e:
            yield n + 1, None, f"{e}; the lines before it were read"
            return
        if not block:
            if skipping or carry:
                yield n + 1, None if skipping else carry, too_long_reason(max_line) if skipping else None
            return
        if isinstance(block, str):  # a text stream that is not a TextIOBase
            block = block.encode()
        parts = (carry + block).split(b"\n")
        carry = parts.pop()
        if skipping and parts:  # the long line ends in this block
            n += 1
            yield n, None, too_long_reason(max_line)
            parts, skipping = parts[1:], False
        for part in parts:
            n += 1
            yield (n, None, too_long_reason(max_line)) if len(part) > max_line else (n, part, None)
        if skipping or len(carry) > max_line:
            carry, skipping = b"", True


def _frames(f: IO[bytes]) -> Iterator[tuple[int, bytes | None, str | None]]:
    import zstandard

    n = 0
    while True:
        head = f.read(4)
        if not head:
            return
        n += 1
        size = int.from_bytes(head, "big") if len(head) == 4 else -1
        frame = f.read(size) if size >= 0 else b""
        if size < 0 or len(frame) < size:
            yield n, None, "the file ends inside a frame: it was cut short; re-copy it"
            return
        if frame[:4] != ZSTD_MAGIC:
            yield n, None, ("frame is not zstd-compressed JSON; the file exporter's format: proto is not "
                            "supported, write format: json")
            continue
        try:
            yield n, zstandard.ZstdDecompressor().decompressobj().decompress(frame), None
        except zstandard.ZstdError as e:
            yield n, None, f"frame is damaged ({e}); re-copy the file"


def _documents(items: Iterator[tuple[int, bytes | str | None, str | None]], shaped: bool = False) -> Iterator[Yield]:
    """JSON export requests (one per line or frame) to canonical records or reasons."""
    for n, raw, reason in items:
        if reason is not None:
            yield n, None, reason
            continue
        if isinstance(raw, bytes):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                yield n, None, "line is not valid UTF-8; re-encode the file as UTF-8"
                continue
        else:
            text = raw
        text = text.strip().lstrip("\ufeff")
        if not text:
            continue
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            yield n, None, "line is not valid JSON; the Collector's file exporter writes one JSON object per line"
            continue
        try:
            items = list(_records(doc, shaped))
        except _BadLine as e:
            yield n, None, str(e)
            continue
        for rec, bad in items:
            yield n, rec, bad


def _records(doc: Any, shaped: bool = False) -> Iterator[tuple[dict[str, Any] | None, str | None]]:
    """``(record, None)`` per ownership record of one export request, ``(None, reason)`` per span
    that cannot be read: one malformed span costs only itself, not the other spans of its line.
    A request whose structure above the spans is not OTLP raises ``_BadLine``."""
    if not isinstance(doc, dict):
        raise _BadLine("line is JSON but not an object; expected an OTLP export request")
    resource_spans = doc.get("resourceSpans")
    resource_logs = doc.get("resourceLogs")
    if resource_spans is None and resource_logs is None:
        if "resourceMetrics" in doc or "resourceProfiles" in doc:
            return  # another signal in the same file: no spans or logs, nothing to audit
        raise _BadLine('line has no "resourceSpans" or "resourceLogs"; expected OTLP JSON traces or logs '
                       '(Collector file exporter)')
    yield from _walk(resource_spans, "resourceSpans", "scopeSpans", "spans", "span", _span)
    yield from _walk(resource_logs, "resourceLogs", "scopeLogs", "logRecords", "log record",
                     _shaped_log if shaped else _log)


def _walk(resources: Any, top: str, scopes: str, items: str, what: str,
          records: Callable[[dict[str, Any], dict[str, Any]], list[dict[str, Any]]]
          ) -> Iterator[tuple[dict[str, Any] | None, str | None]]:
    """The records of one signal's ``resource* -> scope* -> items`` tree; a malformed item costs
    only itself (one reason naming it), not the line's other items."""
    nth = 0
    for r in _list(resources, top):
        r = _obj(r, top + "[]")
        resource = _attributes(_obj(r.get("resource") or {}, "resource").get("attributes"))
        for sc in _list(r.get(scopes), scopes):
            for item in _list(_obj(sc, scopes + "[]").get(items), items):
                nth += 1
                try:
                    found = records(_obj(item, what.replace(" ", "")), resource)
                except _BadLine as e:
                    yield None, f"{what} {nth} of this line: {e}; the line's other {what}s were read"
                    continue
                for rec in found:
                    yield rec, None


def _log(log: dict[str, Any], resource: dict[str, Any], shaped: bool = False) -> list[dict[str, Any]]:
    from .otel_mapping import map_log

    name = log.get("eventName")
    rec = map_log(name if isinstance(name, str) else None,
                   _int(log.get("timeUnixNano"), "timeUnixNano") or _int(log.get("observedTimeUnixNano"),
                                                                        "observedTimeUnixNano"),
                   _attributes(log.get("attributes")), resource,
                   bool(_int(log.get("droppedAttributesCount"), "droppedAttributesCount")),
                   _value(log.get("body")) if shaped else None, shaped)
    return [] if rec is None else [rec]


def _shaped_log(log: dict[str, Any], resource: dict[str, Any]) -> list[dict[str, Any]]:
    return _log(log, resource, shaped=True)


def _span(span: dict[str, Any], resource: dict[str, Any]) -> list[dict[str, Any]]:
    events = []
    for ev in _list(span.get("events"), "events"):
        ev = _obj(ev, "event")
        events.append((str(ev.get("name", "")), _int(ev.get("timeUnixNano"), "timeUnixNano"),
                       _attributes(ev.get("attributes")), _int(ev.get("droppedAttributesCount"), "droppedAttributesCount") or 0))
    capped = bool(_int(span.get("droppedAttributesCount"), "droppedAttributesCount")
                  or _int(span.get("droppedEventsCount"), "droppedEventsCount"))
    from .otel_mapping import map_span

    return map_span(_hex_id(span.get("traceId"), 32, "traceId"), _hex_id(span.get("spanId"), 16, "spanId"),
                    str(span.get("name", "")), _int(span.get("startTimeUnixNano"), "startTimeUnixNano"),
                    _attributes(span.get("attributes")), events, resource, capped)


def _list(v: Any, what: str) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise _BadLine(f'"{what}" is not a list; expected OTLP JSON')
    return v


def _obj(v: Any, what: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise _BadLine(f'"{what}" is not an object; expected OTLP JSON')
    return v


def _int(v: Any, what: str) -> int | None:
    """An OTLP int64: a decimal string in JSON, though some writers emit a number."""
    if v is None or v == "":
        return None
    if isinstance(v, bool):
        raise _BadLine(f'"{what}" is {v!r}, expected an int64 (a decimal string)')
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        try:
            return int(v)
        except ValueError:
            pass
    raise _BadLine(f'"{what}" is {str(v)[:40]!r}, expected an int64 (a decimal string)')


def _hex_id(v: Any, width: int, what: str) -> str:
    """Trace and span ids are hex in OTLP JSON; accept base64 (the plain protobuf mapping) too."""
    if not v:
        return "0" * width
    if not isinstance(v, str):
        raise _BadLine(f'"{what}" is not a string; expected a hex id')
    if len(v) == width:
        try:
            int(v, 16)
            return v.lower()
        except ValueError:
            pass
    try:
        raw = base64.b64decode(v, validate=True)
    except ValueError:
        raw = b""
    if len(raw) == width // 2:
        return raw.hex()
    raise _BadLine(f'"{what}" is {v[:40]!r}, expected {width} hex digits')


def _attributes(kvs: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kv in _list(kvs, "attributes"):
        kv = _obj(kv, "attribute")
        key = kv.get("key")
        if not isinstance(key, str):
            raise _BadLine('an attribute has no "key"; expected OTLP JSON key/value pairs')
        value = _value(kv.get("value"))
        # An ownership attribute given twice with different values is ambiguous (FORMAT section 4,
        # as a JSON line naming a field twice): the record is refused, not read as the last one,
        # where the attribute can cost it; a descriptive one is dropped (revision 3.1).
        if key in out and key.startswith("ownership.") and out[key] != value:
            value = two_values(key, out[key], value)  # a descriptive one: dropped, kept (rev 3.1)
            if value is None:
                raise _BadLine(f'attribute "{key}" is given twice with different values; the record is '
                               "ambiguous, keep one of them")
        out[key] = value
    return out


def _value(v: Any) -> Any:
    """An OTLP ``AnyValue`` as plain JSON data."""
    if v is None:
        return None
    if not isinstance(v, dict):
        raise _BadLine("an attribute value is not an AnyValue object; expected OTLP JSON")
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return _int(v["intValue"], "intValue")
    if "boolValue" in v:
        b = v["boolValue"]
        if isinstance(b, str) and b.strip().lower() in ("true", "false"):
            return b.strip().lower() == "true"  # bool("false") would be True
        return bool(b)
    if "doubleValue" in v:
        d = v["doubleValue"]
        if isinstance(d, str):
            try:
                return float(d)
            except ValueError:
                raise _BadLine(f'"doubleValue" is {d[:40]!r}, expected a number') from None
        return float(d) if isinstance(d, (int, float)) and not isinstance(d, bool) else None
    # A malformed value costs its span (a reason naming it), never the whole audit.
    if "arrayValue" in v:
        return [_value(x) for x in _list(_obj(v["arrayValue"] or {}, "arrayValue").get("values"), "arrayValue")]
    if "kvlistValue" in v:
        return _attributes(_obj(v["kvlistValue"] or {}, "kvlistValue").get("values"))
    if "bytesValue" in v:
        return v["bytesValue"]  # base64, as written: kept, never interpreted
    return None  # an empty AnyValue


def otlp_chunks(source: "Source", progress: "Progress | None" = None,
                chunk_records: int = CHUNK_RECORDS, shaped: bool = False) -> Iterator["pa.Table"]:
    """The store's raw-line chunks for one OTLP file: one row per canonical record or bad line.

    ``line`` is the input line a record came from (several records can share it); ``pos``
    numbers records in the order they were found, which is the observation order when seq is
    missing.
    """
    import pyarrow as pa

    lines: list[int] = []
    raws: list[bytes] = []
    bads: list[str | None] = []

    def table() -> "pa.Table":
        start = pos - len(lines) + 1
        return pa.table({"line": pa.array(lines, pa.int64()),
                         "pos": pa.array(range(start, start + len(lines)), pa.int64()),
                         "raw": pa.array(raws, pa.large_binary()),
                         "bad": pa.array(bads, pa.string())})

    pos = 0
    for line, record, reason in read_otlp(source.path, source.name, source.limits, shaped):
        pos += 1
        lines.append(line)
        raws.append(b"" if record is None else json.dumps(record, ensure_ascii=False, default=str).encode())
        bads.append(reason)
        if len(lines) >= chunk_records:
            yield table()
            lines, raws, bads = [], [], []
    if lines:
        yield table()
    if progress is not None:
        progress(source.size)


def request_records(doc: Any, shaped: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """The records of one decoded OTLP JSON export request (traces or logs), and the reasons of
    the spans or log records that could not be read; ``ValueError`` when it is not OTLP JSON.
    ``shaped`` as in ``read_otlp``."""
    records, reasons = [], []
    try:
        for rec, bad in _records(doc, shaped):
            if rec is not None:
                records.append(rec)
            else:
                reasons.append(bad)
    except _BadLine as e:
        raise ValueError(str(e)) from None
    return records, reasons
