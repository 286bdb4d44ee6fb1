"""The HTTP door: who may ask what (Host, bearer token, role), and bodies read within bounds.

Every request first has its ``Host`` checked (421 Misdirected Request for a name not allowed: a
DNS-rebinding page cannot read findings through a browser), then, with ``--tokens``, its bearer
token (401 without a valid one; 403 when the token's roles do not cover the method: POST needs a
sender's role, GET ``reader`` or ``any``). A body is read within ``body_timeout`` (408), at most
``max_body_bytes`` (413) and within the global budget of bytes held by all requests at once,
counted as they arrive (429 with ``Retry-After``). A request of ours refused before it was read whole is counted in
the store's quarantine (``Receiver.refuse_request``); one that was never ours (401, 403, 421)
is not evidence and is only counted in ``/healthz``.
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from .auth import ANY, READERS, WRITERS
from .config import host_name
from .decode import JSON, content_type_of, error
from .receiver import Receiver


class Budget:
    """Bytes of request bodies held at once, across connections (thread safe)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.held = limit, 0
        self._lock = threading.Lock()

    def take(self, n: int) -> bool:
        with self._lock:
            if self.held + n > self.limit:
                return False
            self.held += n
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.held -= n


class HostCheck:
    """ASGI middleware: 421 for a ``Host`` header not in ``allowed`` (compared without its port)."""

    def __init__(self, app, allowed: frozenset[str], door: "Door | None" = None) -> None:
        self.app, self.allowed, self.door = app, allowed, door
        self.refused = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            host = next((v for k, v in scope["headers"] if k == b"host"), b"").decode("latin-1")
            if host_name(host) not in self.allowed:
                self.refused += 1
                if self.door is not None:  # counted in /healthz with the other requests not of ours
                    self.door.unauthorized += 1
                await PlainTextResponse("misdirected request: this receiver does not answer for that Host "
                                        "(--allow-host)", status_code=421)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Door:
    """The routes over one receiver (see the module docstring)."""

    def __init__(self, receiver: Receiver) -> None:
        self.receiver = receiver
        self.config = receiver.config
        self.budget = Budget(self.config.max_inflight_bytes)
        self.unauthorized = 0

    def roles(self, request: Request, write: bool) -> frozenset[str] | Response:
        tokens = self.config.tokens
        if tokens is None:
            return ANY
        roles = tokens.grants(request.headers.get("authorization"))  # roles, and the token's name and scope
        if roles is None:
            self.unauthorized += 1
            return PlainTextResponse("a valid bearer token is needed (Authorization: Bearer TOKEN)",
                                     status_code=401, headers={"WWW-Authenticate": 'Bearer realm="auditor"'})
        if not roles & (WRITERS if write else READERS):
            self.unauthorized += 1
            need = "a sender's role (worker, sink, coordinator, verifier or any)" if write else "reader or any"
            return PlainTextResponse(f"this token's roles do not allow it: {need} is needed", status_code=403)
        return roles

    async def export(self, request: Request, signal: str) -> Response:
        roles = self.roles(request, write=True)
        if isinstance(roles, Response):
            return roles
        ctype = content_type_of(request.headers.get("content-type", ""))
        limit = self.config.max_body_bytes
        size = request.headers.get("content-length")
        declared = int(size) if size is not None and size.isdigit() else None
        if declared is not None and declared > limit:
            return await self._refused(signal, ctype, 413, f"request body of {declared} bytes is over "
                                       f"{limit} (--max-body-mb)", roles)
        # Bytes count against --max-inflight-mb as they arrive, not as declared: senders trickling
        # large bodies hold only what they sent, and cannot keep the others out (issue 44).
        body = await self._body(request, 0, limit)
        if isinstance(body, Response):
            if body.status_code in (408, 413):
                return await self._refused(signal, ctype, body.status_code, body.body.decode(), roles)
            return body
        status, out, ctype, headers = await self.receiver.accept_async(
            signal, body, request.headers.get("content-type", ""),
            request.headers.get("content-encoding", "").strip().lower(), roles)
        return Response(out, status_code=status, media_type=ctype, headers=headers)

    async def _refused(self, signal: str, ctype: str, status: int, message: str, roles) -> Response:
        status, out, ctype, headers = await run_in_threadpool(
            self.receiver.refuse_request, signal, ctype, status, message, roles)
        return Response(out, status_code=status, media_type=ctype, headers={**headers, "Connection": "close"})

    async def _body(self, request: Request, reserve: int, limit: int) -> bytes | Response:
        """The whole body, or the response that refuses it (408, 413, 429, 400 when the sender left)."""
        retry = {"Retry-After": str(self.config.retry_after_seconds)}
        if not self.budget.take(reserve):
            return Response(error(JSON, "too many request bodies in flight; retry later"), status_code=429,
                            media_type=JSON, headers={**retry, "Connection": "close"})
        held = reserve
        chunks, total = [], 0
        try:
            async with asyncio.timeout(self.config.body_timeout):
                while True:
                    # The ASGI messages themselves, not request.stream(): an async generator per
                    # request costs the event loop a WeakSet entry, a few percent of its time.
                    message = await request.receive()
                    if message["type"] == "http.disconnect":  # the sender left: nothing to answer
                        return Response(status_code=400)
                    chunk = message.get("body", b"")
                    total += len(chunk)
                    if total > limit:
                        return Response(f"request body is over {limit} bytes (--max-body-mb)".encode(),
                                        status_code=413)
                    if total > held:
                        if not self.budget.take(total - held):
                            return Response(error(JSON, "too many request bodies in flight; retry later"),
                                            status_code=429, media_type=JSON, headers={**retry, "Connection": "close"})
                        held = total
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks)
        except TimeoutError:
            return Response(f"request body not received within {self.config.body_timeout:g} s".encode(),
                            status_code=408)
        finally:
            self.budget.give(held)

    async def listing(self, request: Request) -> Response:
        roles = self.roles(request, write=False)
        if isinstance(roles, Response):
            return roles
        key = request.url.path.strip("/")
        body, headers = await run_in_threadpool(self.receiver.document_list, key)
        return Response(body, media_type=JSON, headers=headers)

    async def health(self, request: Request) -> Response:
        roles = self.roles(request, write=False)
        if isinstance(roles, Response):
            return roles
        h = self.receiver.health()
        h["unauthorized"] = self.unauthorized
        h["inflight_body_bytes"] = self.budget.held
        return JSONResponse(h, status_code=200 if h["status"] == "ok" else 503)


def app(receiver: Receiver, allowed_hosts: frozenset[str] | None = None):
    """The ASGI application over ``receiver``; ``allowed_hosts`` None answers every Host (in process tests)."""
    door = Door(receiver)

    async def traces(request: Request) -> Response:
        return await door.export(request, "traces")

    async def logs(request: Request) -> Response:
        return await door.export(request, "logs")

    @asynccontextmanager
    async def lifespan(_app):
        yield
        await run_in_threadpool(receiver.close)

    inner = Starlette(routes=[Route("/v1/traces", traces, methods=["POST"]), Route("/v1/logs", logs, methods=["POST"]),
                              Route("/findings", door.listing), Route("/incidents", door.listing),
                              Route("/healthz", door.health)], lifespan=lifespan)
    return inner if allowed_hosts is None else HostCheck(inner, allowed_hosts, door)
