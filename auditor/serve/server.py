"""Running the receiver: uvicorn with bounds per connection, TLS, and every stop signal handled alike.

uvicorn parses HTTP with httptools (C) when it is installed (the ``serve`` extra brings it), and
httptools has no bound of its own on a request's headers nor a deadline for them: the protocol
here adds both (431 past ``max_header_bytes`` received before the headers end, an unterminated
line included; 408 and the connection closed when a request's headers have not arrived within
``idle_timeout`` of the connection's start, or of the request's first byte on a kept-alive
connection). Idle keep-alive connections close after ``idle_timeout`` too (uvicorn's own setting),
and past ``max_connections`` a new connection closes the oldest one that holds no request (uvicorn
answers 503 only when all of them hold one). SIGHUP stops the receiver as SIGTERM and SIGINT do: it
stops accepting, stores everything acknowledged, then returns. A receiver that cannot listen is an
error (exit 2), not uvicorn's exit 3, which is the auditor's code for incomplete.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import ssl
import threading

import uvicorn

from ..core.errors import AuditorError
from .app import app
from .config import ServeConfig, allowed_hosts
from .pool import tune_gc, tune_switching
from .receiver import Receiver

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_logger = logging.getLogger("auditor.serve")


try:  # uvicorn parses with httptools when it is installed (the serve extra brings it)
    import httptools
    from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
except ImportError:  # pragma: no cover - h11 then, with its own header bound
    httptools = None
    HttpToolsProtocol = object


class _TooLarge(Exception):
    pass


class BoundedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with a bound on the request line and headers (the bytes
    received while they are incomplete, so an unterminated line counts too) and an absolute
    deadline for them (from the connection's start, or the request's first byte on a kept-alive
    connection; more bytes never restart it). Past ``max_connections`` a new connection closes the
    oldest one that has sent no request's headers, or sits idle between requests, instead of being
    refused: idle connections cannot keep a sender out. The bounds are set per server
    (``_bounded_protocol``)."""

    max_header_bytes = 64 << 10
    idle_timeout = 15.0
    max_connections = 1024

    def connection_made(self, transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head, self._deadline, self._too_large = 0, None, False
        self._waiting, self._raw, self._born = True, 0, self.loop.time()
        self._arm()
        if len(self.connections) > self.max_connections:
            self._evict()

    def _evict(self) -> None:
        """Close the oldest connection that holds no request (see the class docstring)."""
        idle = [c for c in self.connections if c is not self and not c.transport.is_closing() and (
            (getattr(c, "_waiting", False) and c.cycle is None) or c.timeout_keep_alive_task is not None)]
        if idle:
            oldest = min(idle, key=lambda c: c._born)
            oldest._refuse(408, "closed for a new connection: the receiver is at --max-connections and this one "
                                "held no request")
            self.connections.discard(oldest)  # now: its connection_lost comes a turn of the loop later

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.idle_timeout, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self._refuse(408, "request headers not received in time")

    def _refuse(self, status: int, message: str) -> None:
        body = message.encode("ascii")
        self.transport.write(b"".join([STATUS_LINE[status], b"content-type: text/plain; charset=utf-8\r\n",
                                       b"content-length: ", str(len(body)).encode(), b"\r\n",
                                       b"connection: close\r\n\r\n", body]))
        self.transport.close()

    def _count(self, n: int) -> None:
        self._head += n
        if self._head > self.max_header_bytes:
            self._too_large = True
            raise _TooLarge()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head, self._waiting = 0, True
        if self._deadline is None:  # a kept-alive connection's next request; else the deadline runs on
            self._arm()

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._disarm()
        self._waiting, self._raw = False, 0
        super().on_headers_complete()

    def data_received(self, data: bytes) -> None:
        if self._too_large:
            return
        self._unset_keepalive_if_required()
        before = self._waiting
        try:
            self.parser.feed_data(data)
            if before and self._waiting:  # headers still incomplete: every byte of them counts
                self._raw += len(data)
                if self._raw > self.max_header_bytes:
                    self._too_large = True
                    raise httptools.HttpParserError("headers too large")
        except httptools.HttpParserUpgrade:
            self._refuse(400, "upgrades are not supported")
        except httptools.HttpParserError:
            if self._too_large:
                self._disarm()
                self._refuse(431, f"request headers over {self.max_header_bytes} bytes")
            else:
                self._refuse(400, "invalid HTTP request")


def _bounded_protocol(max_header_bytes: int, idle_timeout: float, max_connections: int):
    """``BoundedHttpTools`` with these bounds; None without httptools."""
    if httptools is None:
        return None
    return type("BoundedHttpTools", (BoundedHttpTools,), {"max_header_bytes": max_header_bytes,
                                                          "idle_timeout": idle_timeout,
                                                          "max_connections": max_connections})


class _Server(uvicorn.Server):
    """uvicorn's server, stopped gracefully by SIGHUP too, and returning rather than re-raising the signal."""

    @contextlib.contextmanager
    def capture_signals(self):
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


def uvicorn_config(application, config: ServeConfig, host: str, port: int) -> uvicorn.Config:
    """uvicorn's settings for ``config``: the bounds, the protocol, TLS."""
    protocol = _bounded_protocol(config.max_header_bytes, config.idle_timeout, config.max_connections)
    settings = dict(host=host, port=port, log_level=os.environ.get("AUDITOR_SERVE_LOG", "warning"),
                    timeout_graceful_shutdown=30, timeout_keep_alive=max(1, int(config.idle_timeout)),
                    # uvicorn answers 503 at its limit: one above ours, which closes idle connections first
                    limit_concurrency=config.max_connections + (1 if protocol is not None else 0),
                    server_header=False,
                    http=protocol if protocol is not None else "h11",
                    h11_max_incomplete_event_size=config.max_header_bytes, lifespan="on")
    if config.tls_cert is not None:
        settings.update(ssl_certfile=str(config.tls_cert), ssl_keyfile=str(config.tls_key))
        if config.tls_client_ca is not None:
            settings.update(ssl_ca_certs=str(config.tls_client_ca), ssl_cert_reqs=ssl.CERT_REQUIRED)
    settings.update(config.extra)
    return uvicorn.Config(application, **settings)


def serve(config: ServeConfig, host: str = "127.0.0.1", port: int = 4318) -> int:
    """Run the receiver until SIGINT, SIGTERM or SIGHUP (blocking). Returns the count of records
    acknowledged but not in the store (0 normally; more when the store stayed locked: they stay
    in the spool and are appended at the next start)."""
    tune_gc()
    tune_switching()
    receiver = Receiver(config, who=f"auditor serve on {host}:{port}")
    try:
        server = _Server(uvicorn_config(app(receiver, allowed_hosts(host, config)), config, host, port))
        try:
            server.run()
        except SystemExit as e:  # uvicorn's start failed (exit 3, which is the auditor's code for incomplete)
            if server.started:
                raise
            raise AuditorError(f"--host {host} --port {port}: cannot listen there (uvicorn's exit {e.code}: the "
                               "address is in use or not this machine's, see the line above); choose another "
                               "--port or stop what listens on it") from None
    finally:
        leftover = receiver.close()
    return leftover
