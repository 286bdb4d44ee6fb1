"""``auditor serve``: an OTLP/HTTP receiver that audits every sender's evidence live.

The door for fleets: workers (or the OpenTelemetry Collector in front of them) export spans and
log records with an ``otlphttp`` exporter to ``POST /v1/traces`` and ``POST /v1/logs`` (protobuf
or JSON, optionally gzip). Each request is decoded to canonical records (``otel.otlp_proto`` or
the OTLP JSON reader, both on ``otel.mapping``) and handed whole to the live audit's core
(``otel.core.LiveAudit``: reorder window, live detector, one alert per incident, batched appends
to the DuckDB store). ``GET /findings`` and ``GET /incidents`` answer with the JSON document's
lists, from the batch audit of the store, so they are exactly ``auditor report --db``'s.

Memory is bounded: a request body is at most ``max_body_bytes`` (decompressed too), at most
``max_queue`` requests wait for the worker, and past that a request is refused with
``429 Too Many Requests`` and ``Retry-After`` (the OTLP exporters retry it), never dropped.
Shutdown (SIGINT, SIGTERM) stops accepting, audits and stores what was accepted, then exits.

Decoding (gunzip, protobuf or JSON, the mapping to records, and the records' split into the
store's typed columns, ``store_typed.prepare``) runs in ``decoders`` worker processes
(``--decoders``, default 2; 0 decodes on the event loop's thread): it is half of a request's
Python work, and off the receiver's GIL it runs beside the audit and the store writer; two
decode two senders' requests at once. The audit and the store both read those typed columns;
the records themselves come pickled (``PackedRecords``) and are read only for the few that the
split did not type. A request the workers cannot decode (a worker died) is decoded in the
receiver itself: never dropped.
"""

from __future__ import annotations

import logging
import os
import pickle
from contextlib import asynccontextmanager
import tempfile
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .otel.core import LiveAudit
from .otel.metrics import _version

_logger = logging.getLogger("auditor.serve")

PROTOBUF = "application/x-protobuf"
JSON = "application/json"


class _RecordAudit(LiveAudit):
    """The core over batches of canonical records: one item per accepted request, ``(records, their
    split for the store made by the decoder, or None)``."""

    def _records_of(self, item: tuple[list[dict[str, Any]], Any]) -> list[dict[str, Any]]:
        return item[0]

    def _prepared_of(self, item: tuple[list[dict[str, Any]], Any]) -> Any:
        return item[1]


@dataclass
class ServeConfig:
    """What ``auditor serve`` runs with; ``db`` None means a temporary store removed on exit."""

    db: Path | None = None
    vocabulary: Path | None = None
    max_body_bytes: int = 16 << 20
    max_queue: int = 64
    retry_after_seconds: int = 1
    reorder_window_millis: float = 1000.0
    max_workflow_keys: int = 100_000
    decoders: int = 0
    persist_batch: int = 131_072
    lease_by: tuple[str, ...] | None = None  # lease health's dimensions (None: tool, model, provider)


class Receiver:
    """The receiver's state: the live audit, the store path, and its own counters.

    ``accept(signal, body, content_type, encoding)`` is the whole ingest path (thread safe,
    O(request)); the ASGI app in ``app()`` only moves bytes in and out.
    """

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self._tmp = None
        if config.db is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="auditor-serve-")
            self.db = Path(self._tmp.name) / "serve.duckdb"
        else:
            self.db = Path(config.db)
        self.audit = _RecordAudit(db=self.db, vocabulary=config.vocabulary, max_queue_size=config.max_queue,
                                  reorder_window_millis=config.reorder_window_millis,
                                  max_workflow_keys=config.max_workflow_keys, source_name="otlp:serve",
                                  lease_by=config.lease_by,
                                  # an item is a request (up to thousands of records): the writer
                                  # appends big batches and runs beside the worker, not in turn.
                                  # A store append's cost per record falls with its size (each
                                  # stage and commit has a fixed part): 5.7 us at 25k records, 4.5
                                  # at 65k, 3.5 at 100k; two batches in flight bound the memory.
                                  persist_batch=config.persist_batch,
                                  max_unwritten=2 * config.persist_batch,
                                  logger=logging.getLogger("auditor.otel"))
        self.records = 0
        self.refused = 0
        self.bad_items = 0
        self._lock = threading.Lock()
        self._closed = False
        self._decoding = 0
        _warm_store()  # paid now, not by the first append under load (a second of GIL)
        for signal in ("traces", "logs"):  # the response classes' imports: not on the first request
            _success(signal, PROTOBUF, 0, "")
        _error(PROTOBUF, "")
        self._pool = _decoder_pool(config.decoders) if config.decoders > 0 else None
        from opentelemetry.metrics import get_meter_provider

        meter = get_meter_provider().get_meter("auditor.serve", _version())
        self._requests = meter.create_counter("auditor.serve.requests", unit="{request}",
                                              description="OTLP export requests, by signal and HTTP status")
        self._records_counter = meter.create_counter("auditor.serve.records", unit="{record}",
                                                     description="Ownership records accepted")

    def accept(self, signal: str, body: bytes, content_type: str, encoding: str) -> tuple[int, bytes, str, dict]:
        """One export request -> ``(status, body, content type, headers)``."""
        status, out, ctype, headers = self._accept(signal, body, content_type, encoding)
        self._requests.add(1, {"signal": signal, "http.response.status_code": status})
        return status, out, ctype, headers

    def _accept(self, signal: str, body: bytes, content_type: str, encoding: str) -> tuple[int, bytes, str, dict]:
        ctype = JSON if content_type.startswith(JSON) else PROTOBUF
        refused = self._refusal(ctype)
        if refused is not None:
            return refused
        return self._admit(signal, ctype, decode_request(signal, body, content_type, encoding,
                                                         self.config.max_body_bytes))

    async def accept_async(self, signal: str, body: bytes, content_type: str, encoding: str
                           ) -> tuple[int, bytes, str, dict]:
        """``accept`` for the event loop: the body is decoded by a worker process (``decoders``),
        so the loop and this process's GIL only move bytes and queue the records."""
        pool = self._pool
        if pool is None:
            return self.accept(signal, body, content_type, encoding)
        import asyncio
        from concurrent.futures import BrokenExecutor

        ctype = JSON if content_type.startswith(JSON) else PROTOBUF
        refused = self._refusal(ctype)
        if refused is None:
            with self._lock:
                self._decoding += 1
            try:
                try:
                    decoded = await asyncio.wrap_future(pool.submit(
                        decode_request, signal, body, content_type, encoding, self.config.max_body_bytes, True))
                except BrokenExecutor:  # a decoder died (killed, out of memory): decode here
                    self._pool_failed()
                    decoded = decode_request(signal, body, content_type, encoding, self.config.max_body_bytes)
            finally:
                with self._lock:
                    self._decoding -= 1
            refused = self._admit(signal, ctype, decoded)
        status, out, ctype, headers = refused
        self._requests.add(1, {"signal": signal, "http.response.status_code": status})
        return status, out, ctype, headers

    def _refusal(self, ctype: str) -> tuple[int, bytes, str, dict] | None:
        """503 while shutting down, 429 while ``max_queue`` requests already wait for a decoder."""
        if self._closed:
            return 503, _error(ctype, "shutting down"), ctype, {"Retry-After": str(self.config.retry_after_seconds)}
        if self._decoding >= self.config.max_queue:
            return self._busy(ctype)
        return None

    def _busy(self, ctype: str) -> tuple[int, bytes, str, dict]:
        with self._lock:
            self.refused += 1
        return 429, _error(ctype, "the audit queue is full; retry later"), ctype, {
            "Retry-After": str(self.config.retry_after_seconds)}

    def _admit(self, signal: str, ctype: str, decoded: "Decoded") -> tuple[int, bytes, str, dict]:
        """Queue a decoded request's records for the audit, or say why not."""
        if decoded[0] == "error":
            _, status, ctype, message = decoded
            return status, _error(ctype, message), ctype, {}
        _, records, reasons, prepared = decoded
        if records and not self.audit._enqueue((records, prepared), refuse=True):  # noqa: SLF001 - the core's door
            return self._busy(ctype)
        with self._lock:
            self.records += len(records)
            self.bad_items += len(reasons)
        if records:
            self._records_counter.add(len(records), {"signal": signal})
        return 200, _success(signal, ctype, len(reasons), reasons[0] if reasons else ""), ctype, {}

    def _pool_failed(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            _logger.warning("auditor serve: a decoder process failed; decoding in the receiver from now on")
            pool.shutdown(wait=False, cancel_futures=False)

    def health(self) -> dict[str, Any]:
        a = self.audit
        return {"status": "shutting_down" if self._closed else "ok", "records": self.records,
                "refused_requests": self.refused, "unreadable_items": self.bad_items, "queue": len(a._queue),  # noqa: SLF001
                "findings_live": len(a.findings), "unmapped": a.unmapped, "persisted": a.persisted,
                "persist_failures": a.persist_failures, "late_events": a.detector.late_events,
                "evicted_keys": a.detector.evicted_keys,
                "decoders": self.config.decoders if self._pool is not None else 0}

    def document_list(self, key: str) -> bytes:
        """``key`` ("findings" or "incidents") of the batch audit of everything accepted so far."""
        from . import report
        from .core.errors import NoEvents
        from .render.json import render_json

        self.audit.force_flush()
        try:
            result = report(self.db, lock_timeout=30.0)
        except NoEvents:
            return b"[]"
        try:
            return orjson.dumps(orjson.loads(render_json(result))[key])
        finally:
            store = getattr(result, "store", None)
            if store is not None:
                store.close()

    def close(self) -> None:
        """Stop accepting, audit and store everything accepted. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=False)
        self.audit.shutdown()
        if self._tmp is not None:
            self._tmp.cleanup()


def _gunzip(body: bytes, limit: int) -> bytes:
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = d.decompress(body, limit + 1)
    if len(out) > limit or d.unconsumed_tail:
        raise ValueError(f"decompressed body is over {limit} bytes")
    if not d.eof:
        raise zlib.error("truncated")
    return out


#: What a decoder gives: ("ok", records, reasons, their split for the store or None) or
#: ("error", HTTP status, content type, message).
Decoded = tuple


def decode_request(signal: str, body: bytes, content_type: str, encoding: str, limit: int,
                   prepare: bool = False) -> Decoded:
    """One request body -> its canonical records (or the HTTP error); runs in a decoder process
    or, with ``decoders=0``, in the receiver. Plain data in and out: it pickles cheaply (the split,
    Arrow columns, as buffers). ``prepare`` (in a decoder process) also splits the records for the
    store (``store_typed.prepare``): that Python runs off the receiver's GIL, beside it."""
    ctype = JSON if content_type.startswith(JSON) else PROTOBUF
    if encoding == "gzip":
        try:
            body = _gunzip(body, limit)
        except ValueError as e:
            return "error", 413, ctype, str(e)
        except (OSError, EOFError, zlib.error):
            return "error", 400, ctype, "body is not valid gzip"
    elif encoding not in ("", "identity"):
        return "error", 415, ctype, f"Content-Encoding {encoding!r} is not supported; use gzip"
    if not (content_type.startswith(JSON) or content_type.startswith(PROTOBUF)):
        return "error", 415, JSON, f"Content-Type {content_type!r}: send {PROTOBUF} or {JSON}"
    try:
        records, reasons = _decode(signal, body, ctype)
    except ValueError as e:
        return "error", 400, ctype, str(e)
    if prepare and records:
        from .store.typed import prepare as split_ahead

        # the live store keeps no payloads
        return "ok", PackedRecords(records), reasons, split_ahead(records)
    return "ok", records, reasons, None


class PackedRecords(Sequence):
    """A decoded request's records, pickled in the decoder process and unpickled in the receiver
    only when one is read. The typed columns of their split (``store_typed.prepare``) carry every
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


def _decoder_pool(workers: int):
    """``workers`` spawned decoder processes, warmed up (imports done) before the port opens."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_decoder_init)
    for f in [pool.submit(_decoder_ready) for _ in range(workers)]:
        f.result(timeout=120)
    return pool


def _warm_store() -> None:
    """One record through a scratch store: the modules the store writer imports on first use
    (pyarrow.compute, pandas behind ``pa.array``, DuckDB's own) load now, not under the first load."""
    from .store import Store

    with Store() as store:
        store.append_records("warm-up", [(1, {"workflow_key": "k", "kind": "progress", "epoch": 1, "seq": 1,
                                              "worker": "w", "ts": "2026-01-01T00:00:00Z", "attrs": {"a": "b"}})])


def _decoder_init() -> None:
    import signal

    # The receiver owns the decoders' lifetime: a Ctrl-C (the whole process group) or a SIGTERM
    # must not kill them under requests in flight; the receiver shuts the pool down on exit.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    tune_gc()


def _decoder_ready() -> bool:
    from google.protobuf.message import DecodeError  # noqa: F401 - the imports, paid before serving

    from .ingest.otlp import request_records  # noqa: F401
    from .otel.otlp_proto import log_records, trace_records  # noqa: F401
    from .store.typed import prepare

    prepare([{"workflow_key": "k", "kind": "progress", "epoch": 1, "seq": 1}])  # pyarrow's first table
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: F401
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest  # noqa: F401

    return True


def tune_gc() -> None:
    """A server process's collector: what is alive at start-up is frozen (never scanned again) and
    young collections run every 50,000 allocations, not 700. The records of a request are freed by
    reference counting (they hold no cycles); collecting every 700 of them, with the detector's
    state in the older generations, was a third of the receiver's CPU."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def _decode(signal: str, body: bytes, ctype: str) -> tuple[list[dict[str, Any]], list[str]]:
    if ctype == JSON:
        from .ingest.otlp import request_records

        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise ValueError("body is not valid JSON") from None
        return request_records(doc)
    from google.protobuf.message import DecodeError

    from .otel.otlp_proto import log_records, trace_records

    reasons: list[str] = []
    try:
        return (trace_records(body, reasons) if signal == "traces" else log_records(body, reasons)), reasons
    except DecodeError:
        raise ValueError(f"body is not an OTLP protobuf {signal} export request") from None


def _success(signal: str, ctype: str, rejected: int, message: str) -> bytes:
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


def _error(ctype: str, message: str) -> bytes:
    if ctype == JSON:
        return orjson.dumps({"code": 3, "message": message})
    from google.rpc.status_pb2 import Status

    return Status(code=3, message=message).SerializeToString()


def app(receiver: Receiver):
    """The ASGI application (Starlette) over ``receiver``."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    limit = receiver.config.max_body_bytes

    async def export(request: Request, signal: str) -> Response:
        size = request.headers.get("content-length")
        if size is not None and size.isdigit() and int(size) > limit:
            return Response(status_code=413)
        # The ASGI messages themselves, not request.stream(): an async generator per request
        # costs the event loop a WeakSet entry (asyncio tracks them), a few percent of its time.
        chunks, total = [], 0
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":  # the sender left: nothing to answer
                return Response(status_code=400)
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > limit:
                return Response(status_code=413)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        status, body, ctype, headers = await receiver.accept_async(
            signal, b"".join(chunks), request.headers.get("content-type", ""),
            request.headers.get("content-encoding", "").strip().lower())
        return Response(body, status_code=status, media_type=ctype, headers=headers)

    async def traces(request: Request) -> Response:
        return await export(request, "traces")

    async def logs(request: Request) -> Response:
        return await export(request, "logs")

    async def listing(request: Request) -> Response:
        key = request.url.path.strip("/")
        return Response(await run_in_threadpool(receiver.document_list, key), media_type=JSON)

    async def health(request: Request) -> Response:
        h = receiver.health()
        return JSONResponse(h, status_code=200 if h["status"] == "ok" else 503)

    @asynccontextmanager
    async def lifespan(_app):
        yield
        await run_in_threadpool(receiver.close)

    return Starlette(routes=[Route("/v1/traces", traces, methods=["POST"]), Route("/v1/logs", logs, methods=["POST"]),
                             Route("/findings", listing), Route("/incidents", listing),
                             Route("/healthz", health)], lifespan=lifespan)


def serve(config: ServeConfig, host: str = "127.0.0.1", port: int = 4318) -> None:
    """Run the receiver until SIGINT or SIGTERM (blocking); the store holds everything accepted."""
    import uvicorn

    tune_gc()
    receiver = Receiver(config)
    try:
        uvicorn.run(app(receiver), host=host, port=port, log_level=os.environ.get("AUDITOR_SERVE_LOG", "warning"),
                    timeout_graceful_shutdown=30)
    finally:
        receiver.close()
