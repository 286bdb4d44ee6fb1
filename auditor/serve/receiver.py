"""The receiver: a request's way from its bytes to an answer that says whether it was kept.

``accept`` / ``accept_async`` take one export request with its sender's roles: decoded (``decode``,
in a decoder process when there are some), then written to the spool (``spool``) and only then
answered. 200 (with ``partialSuccess`` naming the records refused) means every record of the
request is on disk, and each refused one is on its way to the store's quarantine with its reason;
a request refused whole by a sender of ours (400, 413, 415) is spooled as one quarantined item
too, so ``auditor report --db`` says INCOMPLETE exactly where ``auditor audit`` of the same OTLP
would. 429 (with ``Retry-After``) when the audit queue or the store writer is behind, 503 while
shutting down or when the spool cannot be written: the sender retries, nothing is lost.

At start the spool's entries not yet in the store are appended (``durable``), then the live
audit is rebuilt from the store (``audit``), before the port opens.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
import threading
import time
from concurrent.futures import BrokenExecutor
from pathlib import Path
from typing import Any

import orjson

from .. import report
from ..core.errors import NoEvents
from ..store.spooled import Hold, backlog
from ..otel.metrics import _version
from ..render.json import render_json
from ..normalize.vocabulary import vocabulary_of
from .audit import RecordAudit
from .auth import ANY
from .config import ServeConfig
from .evidence import OUT_OF_SCOPE
from .decode import content_type_of, decode_request, error, success
from .durable import Item, Keeper
from .pool import decoder_pool, warm_up
from .replay import carry as _carry, replay
from .spool import Spool

_logger = logging.getLogger("auditor.serve")
Answer = tuple[int, bytes, str, dict]


class Receiver:
    """The receiver's state: spool, store writer, live audit, decoders and counters (see the module
    docstring). Thread safe; ``close`` is idempotent and returns the records not stored."""

    def __init__(self, config: ServeConfig, who: str = "auditor serve") -> None:
        self.config = config
        self._tmp = None
        if config.db is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="auditor-serve-")
            self.db = Path(self._tmp.name) / "serve.duckdb"
        else:
            self.db = Path(config.db)
        self.spool_dir = Path(config.spool) if config.spool else self.db.with_name(self.db.name + ".spool")
        self._vocab_path = None if config.vocabulary is None else str(config.vocabulary)
        self._vocabulary = vocabulary_of(config.vocabulary)
        self.records = self.refused = self.bad_items = self.refused_requests = self.out_of_scope = 0
        self._lock = threading.Lock()
        self._closed = False
        self._inflight = 0
        self.leftover = 0
        self.hold = Hold(self.spool_dir, who)  # one receiver per store: a second one is refused here
        try:
            last, line = replay(self)
        except BaseException:
            self.hold.release()
            raise
        self.keeper = Keeper(self.db, self._vocabulary, line, self._stored,
                             max_unwritten=2 * config.persist_batch, wait=config.store_wait, batch=config.persist_batch)
        self.keeper.stored_number = self.keeper.put_number = last
        self.audit = RecordAudit(self.keeper, vocabulary=self._vocabulary, max_queue_size=1 << 30,
                                 reorder_window_millis=config.reorder_window_millis,
                                 max_workflow_keys=config.max_workflow_keys, source_name="otlp:serve",
                                 lease_by=config.lease_by, logger=logging.getLogger("auditor.otel"))
        self.audit.rebuild(self.db, config.store_wait, _logger)
        self.spool = Spool(self.spool_dir, last + 1)
        self._order = threading.Lock()
        self._reading = threading.Lock()  # one batch audit at a time (GET /findings, /incidents)
        self._read = None                 # ((stored number, drained), its lists and headers)
        self._ready: dict[int, tuple] = {}  # entries spooled and decoded, waiting for those before them
        self._next = last + 1
        warm_up()
        self._pool = decoder_pool(config.decoders) if config.decoders > 0 else None
        self._meters()

    def _meters(self) -> None:
        from opentelemetry.metrics import get_meter_provider

        meter = get_meter_provider().get_meter("auditor.serve", _version())
        self._requests = meter.create_counter("auditor.serve.requests", unit="{request}",
                                              description="OTLP export requests, by signal and HTTP status")
        self._records_counter = meter.create_counter("auditor.serve.records", unit="{record}",
                                                     description="Ownership records accepted")

    # The request path. A request's body goes to the spool while it is decoded (the disk's latency
    # hidden behind the decoding); it is answered once both are done, and handed on in spool order.

    def accept(self, signal: str, body: bytes, content_type: str, encoding: str,
               roles: frozenset[str] = ANY) -> Answer:
        """One export request -> ``(status, body, content type, headers)``, blocking until it is
        on disk (the decoding runs in this thread)."""
        answer = self._refusal(content_type_of(content_type))
        if answer is None:
            answer = self.admit(signal, self._decode_here(signal, body, content_type, encoding, roles), body,
                                content_type, encoding, roles)
        self._requests.add(1, {"signal": signal, "http.response.status_code": answer[0]})
        return answer

    def admit(self, signal: str, decoded, body: bytes | None, content_type: str, encoding: str,
              roles: frozenset[str] = ANY) -> Answer:
        """A decoded request (``decode.decode_request``'s answer for ``body``; ``body`` None: refused
        before it was read) spooled, handed on and answered; blocking until it is on disk."""
        done = threading.Event()
        result: list = []
        self.spool.submit(_meta(signal, decoded, body, content_type, encoding, roles), body or b"",
                          lambda number, failure: (result.append((number, failure)), done.set()))
        done.wait()
        return self._answer(signal, content_type_of(content_type), decoded, *result[0])

    async def accept_async(self, signal: str, body: bytes, content_type: str, encoding: str,
                           roles: frozenset[str] = ANY) -> Answer:
        """``accept`` for the event loop: decoded by a worker process (``decoders``) while the spool
        writes, so the loop and this process's GIL only move bytes."""
        answer = self._refusal(content_type_of(content_type))
        if answer is None:
            with self._lock:
                self._inflight += 1
            try:
                # Shielded: once spooled, the request is handed on even if its sender goes away.
                answer = await asyncio.shield(self._accept_async(signal, body, content_type, encoding, roles))
            finally:
                with self._lock:
                    self._inflight -= 1
        self._requests.add(1, {"signal": signal, "http.response.status_code": answer[0]})
        return answer

    async def _accept_async(self, signal, body, content_type, encoding, roles) -> Answer:
        loop = asyncio.get_running_loop()
        durable = loop.create_future()
        self.spool.submit(_meta(signal, None, body, content_type, encoding, roles), body,
                          lambda number, failure: loop.call_soon_threadsafe(_resolve, durable, (number, failure)))
        try:
            decoded = await self._decode_async(signal, body, content_type, encoding, roles)
        except Exception as e:  # noqa: BLE001 - never leave a spooled entry without its item
            decoded = ("error", 400, content_type_of(content_type),
                       f"the body could not be decoded ({type(e).__name__})")
        number, failure = await durable
        return self._answer(signal, content_type_of(content_type), decoded, number, failure)

    async def _decode_async(self, signal, body, content_type, encoding, roles):
        pool = self._pool
        if pool is None:
            return self._decode_here(signal, body, content_type, encoding, roles)
        try:
            return await asyncio.wrap_future(pool.submit(
                decode_request, signal, body, content_type, encoding, self.config.max_body_bytes, True,
                roles, self.config.max_key_bytes, self._vocab_path, self.config.max_gzip_members,
                self.config.decode_seconds))
        except BrokenExecutor:  # a decoder died (killed, out of memory): decode here
            self._pool_failed()
            return self._decode_here(signal, body, content_type, encoding, roles)

    def _decode_here(self, signal, body, content_type, encoding, roles):
        return decode_request(signal, body, content_type, encoding, self.config.max_body_bytes, False, roles,
                              self.config.max_key_bytes, self._vocab_path, self.config.max_gzip_members,
                              self.config.decode_seconds)

    def refuse_request(self, signal: str, ctype: str, status: int, message: str, roles: frozenset[str]) -> Answer:
        """A request from a sender of ours refused before it was read whole (413, 408): counted in
        the store's quarantine like one refused by its content. Blocking until spooled."""
        return self.admit(signal, ("error", status, ctype, message), None, ctype, "", roles)

    def _answer(self, signal: str, ctype: str, decoded, number: int, failure: BaseException | None) -> Answer:
        """The answer to a request whose spool entry is ``number`` (or failed), handing it on first."""
        if failure is not None:
            return 503, error(ctype, "the receiver cannot keep this request now; retry later"), ctype, {
                "Retry-After": str(self.config.retry_after_seconds)}
        self._hand(number, _carry(signal, decoded))
        if decoded[0] == "error":
            _, status, ectype, message = decoded
            return status, error(ectype, message), ectype, {}
        reasons = decoded[2]
        return 200, success(signal, ctype, len(reasons), reasons[0] if reasons else ""), ctype, {}

    def _hand(self, number: int, carry: tuple) -> None:
        """Entry ``number``'s records to the store writer and the live audit, in spool order (an
        entry decoded sooner waits for those before it)."""
        with self._order:
            self._ready[number] = carry
            while self._next in self._ready:
                records, prepared, reasons = self._ready.pop(self._next)
                self.keeper.put(Item(self._next, records, prepared, reasons))
                if records:
                    self.audit._queue.append((records, prepared))  # noqa: SLF001 - admitted already (_refusal)
                    self.audit._wake.set()  # noqa: SLF001
                    self._records_counter.add(len(records))
                with self._lock:
                    self.records += len(records)
                    self.bad_items += len(reasons)
                    self.out_of_scope += sum(1 for r in reasons if OUT_OF_SCOPE in r)
                    self.refused_requests += bool(not records and reasons and "refused whole" in reasons[0])
                self._next += 1

    def _refusal(self, ctype: str) -> Answer | None:
        """503 while shutting down; 429 while ``max_queue`` requests wait for the audit or the store
        writer is behind (the sender retries after ``Retry-After``)."""
        retry = {"Retry-After": str(self.config.retry_after_seconds)}
        if self._closed:
            return 503, error(ctype, "shutting down"), ctype, retry
        if self._inflight + len(self.audit._queue) >= self.config.max_queue or self.keeper.behind():  # noqa: SLF001
            with self._lock:
                self.refused += 1
            return 429, error(ctype, "the audit queue is full; retry later"), ctype, retry
        return None

    def _pool_failed(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            _logger.warning("auditor serve: a decoder process failed; decoding in the receiver from now on")
            pool.shutdown(wait=False, cancel_futures=False)

    # Reading.

    def health(self) -> dict[str, Any]:
        a, k = self.audit, self.keeper
        return {"status": "shutting_down" if self._closed else "ok", "records": self.records,
                "refused_requests": self.refused, "unreadable_items": self.bad_items,
                "requests_refused_whole": self.refused_requests, "out_of_scope": self.out_of_scope, "queue": len(a._queue),  # noqa: SLF001
                "findings_live": len(a.findings), "unmapped": a.unmapped, "ignored": a.ignored,
                "persisted": k.persisted, "quarantined": k.quarantined, "unwritten": k.unwritten,
                "spooled": self.spool.written, "spool_syncs": self.spool.syncs, "store_retries": k.retries,
                "persist_failures": 0, "late_events": a.detector.late_events, "evicted_keys": a.detector.evicted_keys,
                # issue 45: "alerts" counts the alerts raised (the stderr lines), not the incidents alerted
                "alerts": a.alerts_raised, "incidents_alerted": len(a._alerted), "decoders": self.config.decoders if self._pool is not None else 0}  # noqa: SLF001

    def document_list(self, key: str) -> tuple[bytes, dict[str, str]]:
        """``key`` ("findings" or "incidents") of the batch audit of everything acknowledged so far,
        and the headers that carry its verdict (``Auditor-Verdict``, ``Auditor-Spool-Pending``,
        ``Auditor-Spool-Lost``). Readers take turns: one audit runs at a time, and readers who
        waited for it share its answer while nothing new was stored (any number of them)."""
        with self._reading:
            drained = self.keeper.drain(self.config.store_wait)
            upto = self.keeper.put_number if drained else self.keeper.stored_number
            cached = self._read
            if cached is None or cached[0] != (self.keeper.stored_number, drained):
                cached = self._read = ((self.keeper.stored_number, drained), self._audit_now(upto, drained))
        lists, headers = cached[1]
        return lists[key], headers

    def _audit_now(self, upto: int, drained: bool) -> tuple[dict[str, bytes], dict[str, str]]:
        try:
            result = report(self.db, lock_timeout=self.config.store_wait)
        except NoEvents:
            spool = None if drained else backlog(self.db, self.keeper.stored_number)
            verdict = "incomplete" if spool else "pass"
            return {"findings": b"[]", "incidents": b"[]"}, _verdict_headers(verdict, spool)
        try:
            # The receiver's own view: what a drained writer stored is not pending, what is still
            # in the spool past the store's mark is (a drain that timed out, a damaged frame).
            result.spool = backlog(self.db, self.keeper.stored_number, None if not drained else upto)
            doc = orjson.loads(render_json(result))
            return ({k: orjson.dumps(doc[k]) for k in ("findings", "incidents")},
                    _verdict_headers(doc["verdict"], result.spool))
        finally:
            store = getattr(result, "store", None)
            if store is not None:
                store.close()

    def _stored(self, number: int) -> None:
        self.spool.committed(number)

    def close(self) -> int:
        """Stop accepting; store everything acknowledged (waiting up to ``store_wait`` seconds for a
        store another process holds); the count of records left in the spool for the next start
        (0 when all is stored). Idempotent."""
        if self._closed:
            return self.leftover
        self._closed = True
        self.spool.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=False)
        self.audit.shutdown()  # the open attempts reported: their alerts go to the store below
        self.leftover = self.keeper.close(self.config.store_wait)
        self.spool.committed(self.keeper.stored_number)
        self.hold.release()
        if self._tmp is not None:
            self._tmp.cleanup()
        return self.leftover


def _verdict_headers(verdict: str, spool: dict | None) -> dict[str, str]:
    spool = spool or {}
    return {"Auditor-Verdict": verdict, "Auditor-Spool-Pending": str(spool.get("pending_requests", 0)),
            "Auditor-Spool-Lost": str(spool.get("lost_requests", 0))}


def _resolve(future: asyncio.Future, value) -> None:
    if not future.done():
        future.set_result(value)


def _meta(signal: str, decoded, body: bytes | None, content_type: str, encoding: str, roles) -> dict[str, Any]:
    """A spool entry's header: how to decode its body again, or (no body) why it was refused."""
    if body is None:
        return {"refused": _carry(signal, decoded)[2][0], "at": round(time.time(), 3)}
    return {"signal": signal, "ctype": content_type, "encoding": encoding, "roles": sorted(roles),
            "at": round(time.time(), 3)}
