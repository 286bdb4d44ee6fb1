"""One OTLP/HTTP export request body -> the records ``auditor serve`` keeps and those it refuses.

Runs in a decoder process (``pool``) or, with ``--decoders 0``, in the receiver; plain data in and
out. A body is gunzipped member by member (every member, or the body is refused), decoded as OTLP
protobuf or JSON and mapped (``otel.otlp_proto``, ``ingest.otlp``), then screened
(``evidence.screen``: the sender's role, the key bounds). A record that cannot be read or is
not believed costs only itself, wherever the body can be decoded: a JSON body that the strict
reader refuses (a ``NaN`` or ``1e400`` seq, text that is not UTF-8) is read again by Python's
reader, which takes them, and a protobuf body with text that is not UTF-8 by ``lenient``; only
the records that hold the fault are refused. A body that cannot be decoded at all is refused
whole with the HTTP status and the reason.
"""

from __future__ import annotations

import json
import pickle
import time
import zlib
from collections.abc import Sequence
from functools import cache
from typing import Any

import orjson

from ..ingest.otlp import request_records
from ..otel.otlp_proto import log_records, trace_records
from ..store.typed import prepare as split_ahead
from ..normalize.vocabulary import vocabulary_of
from .evidence import screen
from .lenient import lenient_records

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

#: What a decoder gives: ("ok", records, refusal reasons (one per record refused), their split
#: for the store or None) or ("error", HTTP status, content type, message).
Decoded = tuple


def content_type_of(content_type: str) -> str:
    return JSON if content_type.startswith(JSON) else PROTOBUF


#: Input fed to one gzip member's decompressor at a time: a member's end leaves at most this much
#: unread, so many members cost time in proportion to the body, not to the members squared.
_WINDOW = 64 << 10


class DecodeBound(ValueError):
    """A body past a bound of its decoding (members, time): refused whole with 413."""


def gunzip(body: bytes, limit: int, max_members: int = 1024, deadline: float | None = None) -> bytes:
    """Every member of a gzip body (RFC 1952 allows several, one after another), at most ``limit``
    bytes in all, ``max_members`` members, before ``deadline`` (``time.monotonic()``);
    ``DecodeBound`` past a bound, ``zlib.error`` for a body that is not gzip whole (a cut member,
    bytes after the last that are not a member)."""
    out: list[bytes] = []
    view, at, total, members = memoryview(body), 0, 0, 0
    while True:
        members += 1
        if members > max_members:
            raise DecodeBound(f"the gzip body has more than {max_members:,} members (--max-gzip-members)")
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        while not d.eof:
            if deadline is not None and time.monotonic() > deadline:
                raise DecodeBound("the body could not be decompressed within the decoding time bound "
                                  "(--decode-seconds)")
            chunk = view[at:at + _WINDOW]
            if not chunk and not d.unconsumed_tail:
                raise zlib.error("truncated")
            piece = d.decompress(d.unconsumed_tail or chunk, limit + 1 - total)
            if not d.unconsumed_tail:
                at += len(chunk)
            total += len(piece)
            out.append(piece)
            if total > limit:
                raise DecodeBound(f"decompressed body is over {limit} bytes (--max-body-mb)")
        at -= len(d.unused_data)
        if at >= len(body):
            return b"".join(out)


@cache
def _vocabulary(path: str | None):
    return vocabulary_of(path)


def decode_request(signal: str, body: bytes, content_type: str, encoding: str, limit: int,
                   prepare: bool = False, roles: frozenset[str] = frozenset(("any",)),
                   max_key_bytes: int = 1024, vocabulary: str | None = None, max_members: int = 1024,
                   time_limit: float | None = None) -> Decoded:
    """One request body -> its records (or the HTTP error). ``prepare`` (in a decoder process)
    also splits the records for the store (``store.typed.prepare``): that Python runs off the
    receiver's GIL, beside it. ``roles`` are the sender's (``auth``), ``vocabulary`` the
    ``--map`` file's path; ``max_members`` and ``time_limit`` (seconds) bound the decompression.
    Never raises: a body the decoder cannot take is refused whole (400) with the error's name."""
    ctype = content_type_of(content_type)
    try:
        return _decode_request(signal, body, content_type, ctype, encoding, limit, prepare, roles, max_key_bytes,
                               vocabulary, max_members, time_limit)
    except Exception as e:  # noqa: BLE001 - a request is refused, never the receiver stopped
        return "error", 400, ctype, f"the body could not be decoded ({type(e).__name__})"


def _decode_request(signal, body, content_type, ctype, encoding, limit, prepare, roles, max_key_bytes,
                    vocabulary, max_members, time_limit) -> Decoded:
    if encoding == "gzip":
        deadline = None if time_limit is None else time.monotonic() + time_limit
        try:
            body = gunzip(body, limit, max_members, deadline)
        except DecodeBound as e:
            return "error", 413, ctype, str(e)
        except (OSError, EOFError, zlib.error):
            return "error", 400, ctype, "body is not valid gzip (every member whole)"
    elif encoding not in ("", "identity"):
        return "error", 415, ctype, f"Content-Encoding {encoding[:40]!r} is not supported; use gzip"
    if not (content_type.startswith(JSON) or content_type.startswith(PROTOBUF)):
        return "error", 415, JSON, f"Content-Type {content_type[:60]!r}: send {PROTOBUF} or {JSON}"
    vocab = _vocabulary(vocabulary)
    try:
        records, reasons = _decode(signal, body, ctype, vocab.shaped)
    except ValueError as e:
        return "error", 400, ctype, str(e)
    what = "span or span event" if signal == "traces" else "log record"
    records, refused = screen(records, roles, max_key_bytes, vocab, what)
    reasons += refused
    if prepare and records:
        return "ok", PackedRecords(records), reasons, split_ahead(records)
    return "ok", records, reasons, None


def _decode(signal: str, body: bytes, ctype: str, shaped: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """``shaped`` (a ``--map`` that reads logs as teams write them, ``Vocabulary.shaped``): every
    log record is a record, its body and attributes one log line (``otel_mapping.shaped_log``)."""
    if ctype == JSON:
        return _decode_json(body, shaped)
    from google.protobuf.message import DecodeError

    reasons: list[str] = []
    try:
        return (trace_records(body, reasons) if signal == "traces" else log_records(body, reasons, shaped)), reasons
    except DecodeError:
        pass
    try:
        return lenient_records(signal, body, shaped)
    except DecodeError:
        raise ValueError(f"body is not an OTLP protobuf {signal} export request") from None


def _decode_json(body: bytes, shaped: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    try:
        return request_records(orjson.loads(body), shaped)
    except orjson.JSONDecodeError:
        pass
    # Python's reader takes NaN, Infinity and 1e400 (the normalizer then refuses such a seq, per
    # record), and bytes that are not UTF-8 come through as lone surrogates, refused per record.
    try:
        doc = json.loads(body.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):
        raise ValueError("body is not valid JSON") from None
    records, reasons = request_records(doc, shaped)
    kept = []
    for n, rec in enumerate(records, 1):
        if _has_surrogate(rec):
            reasons.append(f"record {n} of this request holds text that is not valid UTF-8; fix the sender's encoding")
        else:
            kept.append(rec)
    return kept, reasons


def _has_surrogate(v: Any) -> bool:
    if isinstance(v, str):
        try:
            v.encode("utf-8")
            return False
        except UnicodeEncodeError:
            return True
    if isinstance(v, dict):
        return any(_has_surrogate(k) or _has_surrogate(x) for k, x in v.items())
    if isinstance(v, list):
        return any(_has_surrogate(x) for x in v)
    return False


class PackedRecords(Sequence):
    """A decoded request's records, pickled in the decoder process and unpickled in the receiver
    only when one is read. The typed columns of their split (``store.typed.prepare``) carry every
    record the split types, to the audit (``convert.typed_events``) and to the store alike, so
    the dicts are read only for the few records that take the checked way. Unpickling a
    thousand dicts per request, and holding them until they are written, was the receiver's
    largest cost after the audit itself (and the garbage collector's walk over them)."""

    __slots__ = ("_blob", "_n", "_list")

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self._blob = pickle.dumps(records, pickle.HIGHEST_PROTOCOL)
        self._n = len(records)
        self._list: list[dict[str, Any]] | None = None

    def __reduce__(self):
        return _packed, (self._blob, self._n)

    def _records(self) -> list[dict[str, Any]]:
        # Two threads (the audit, the store writer) may unpickle at once: each gets equal records.
        out = self._list
        if out is None:
            out = self._list = pickle.loads(self._blob)
        return out

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        return self._records()[i]

    def __iter__(self):
        return iter(self._records())


def _packed(blob: bytes, n: int) -> PackedRecords:
    out = PackedRecords.__new__(PackedRecords)
    out._blob, out._n, out._list = blob, n, None
    return out


def success(signal: str, ctype: str, rejected: int, message: str) -> bytes:
    """The export response body: ``partialSuccess`` names how many records were refused and why
    (the first reason); every one of them is quarantined in the store too."""
    if ctype == JSON:
        if not rejected:
            return b"{}"
        field = "rejectedSpans" if signal == "traces" else "rejectedLogRecords"
        return orjson.dumps({"partialSuccess": {field: str(rejected), "errorMessage": message}})
    if signal == "traces":
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse as Response
    else:
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse as Response
    r = Response()
    if rejected:
        if signal == "traces":
            r.partial_success.rejected_spans = rejected
        else:
            r.partial_success.rejected_log_records = rejected
        r.partial_success.error_message = message
    return r.SerializeToString()


def error(ctype: str, message: str) -> bytes:
    """An OTLP error body (``google.rpc.Status``, as protobuf or JSON)."""
    if ctype == JSON:
        return orjson.dumps({"code": 3, "message": message})
    from google.rpc.status_pb2 import Status

    return Status(code=3, message=message).SerializeToString()
