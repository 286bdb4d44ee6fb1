"""OTLP protobuf requests that hold text which is not UTF-8: read per resource and per span.

The protobuf runtime refuses a whole message when one ``string`` field holds bytes that are not
UTF-8, so one bad attribute would cost every record of the request. This module reads such a
request with a copy of the OTLP schema whose strings are ``bytes`` (the same wire format, never
refused for its text), then hands each resource's, and failing that each span's or log record's,
own bytes back to the real schema and to ``otel.otlp_proto``'s mapping: what is UTF-8 is read as
usual, and only what is not is refused, each with a reason.

Only for requests the strict parse refused: the usual path never pays for it.
"""

from __future__ import annotations

from functools import cache, partial
from typing import Any

from ..otel.otlp_proto import log_records, trace_records

_NOT_UTF8 = "holds text that is not valid UTF-8 (protobuf strings must be UTF-8); fix the sender's encoding"


def _as_bytes(message) -> None:
    """Every ``string`` field of a ``DescriptorProto`` (and its nested types) made ``bytes``."""
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto

    for f in message.field:
        if f.type == FieldDescriptorProto.TYPE_STRING:
            f.type = FieldDescriptorProto.TYPE_BYTES
    for nested in message.nested_type:
        _as_bytes(nested)


@cache
def _lenient(signal: str):
    """The export request class of ``signal`` over the bytes-for-strings schema (built once)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    if signal == "traces":
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest as Request
    else:
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest as Request
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(fd) -> None:
        if fd.name in added:
            return
        for dep in fd.dependencies:
            add(dep)
        proto = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(proto)
        for m in proto.message_type:
            _as_bytes(m)
        pool.Add(proto)
        added.add(fd.name)

    add(Request.DESCRIPTOR.file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(Request.DESCRIPTOR.full_name)), Request


def _strict(cls, raw: bytes):
    from google.protobuf.message import DecodeError

    try:
        return cls.FromString(raw)
    except DecodeError:
        return None


def lenient_records(signal: str, body: bytes, shaped: bool = False) -> tuple[list[dict[str, Any]], list[str]]:
    """The records and refusal reasons of a request the strict parse refused; raises
    ``google.protobuf.message.DecodeError`` when even the lenient schema cannot read it (then it
    is not an OTLP request at all). ``shaped`` as in ``otlp_proto.log_records``."""
    Lenient, Strict = _lenient(signal)
    request = Lenient.FromString(body)
    records: list[dict[str, Any]] = []
    reasons: list[str] = []
    traces = signal == "traces"
    groups = request.resource_spans if traces else request.resource_logs
    read = trace_records if traces else partial(log_records, shaped=shaped)
    what = "span" if traces else "log record"
    nth = 0
    for group in groups:
        whole = _strict(Strict, _field(1, group.SerializeToString()))  # field 1: the resource groups
        items = [i for scope in (group.scope_spans if traces else group.scope_logs)
                 for i in (scope.spans if traces else scope.log_records)]
        if whole is not None:  # this resource is all UTF-8: read as usual
            records += read(whole.SerializeToString(), reasons)
            nth += len(items)
            continue
        records += _per_item(group, Strict, traces, read, what, nth, reasons)
        nth += len(items)
    return records, reasons


def _field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (the wire format both schemas share)."""
    key = (number << 3) | 2
    return _varint(key) + _varint(len(payload)) + payload


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _per_item(group, Strict, traces: bool, read, what: str, nth: int, reasons: list[str]) -> list[dict[str, Any]]:
    """A resource group that is not all UTF-8: each span (log record) on its own, with its scope."""
    records: list[dict[str, Any]] = []
    resource = group.resource.SerializeToString()
    resource_ok = _strict(Strict, _field(1, _field(1, resource))) is not None
    for scope in (group.scope_spans if traces else group.scope_logs):
        head = _field(1, scope.scope.SerializeToString())
        for item in (scope.spans if traces else scope.log_records):
            nth += 1
            if not resource_ok:
                reasons.append(f"{what} {nth} of this request: its resource {_NOT_UTF8}")
                continue
            # ResourceSpans/ResourceLogs: 1 resource, 2 scope groups; a scope group: 1 scope, 2 items.
            one = _field(1, _field(1, resource) + _field(2, head + _field(2, item.SerializeToString())))
            strict = _strict(Strict, one)
            if strict is None:
                reasons.append(f"{what} {nth} of this request: it {_NOT_UTF8}")
                continue
            records += read(strict.SerializeToString(), reasons)
    return records
