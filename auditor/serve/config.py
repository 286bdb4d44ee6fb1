"""What ``auditor serve`` runs with: the receiver's settings and its bounds, with their defaults.

Plain data: the CLI builds one ``ServeConfig`` and every module of the package reads it. Each
bound has one name here and one flag (docs/OTEL.md lists them with these defaults).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path

from .auth import Tokens


@dataclass
class ServeConfig:
    """What ``auditor serve`` runs with; ``db`` None means a temporary store removed on exit.

    ``tokens`` None: no authentication, every sender is ``any`` (allowed on loopback only, or
    with ``insecure``). ``spool`` None: ``<db>.spool`` beside the store (a temporary directory
    with a temporary store).
    """

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
    tokens: Tokens | None = None
    spool: Path | None = None
    # Bounds (issue 36): per connection and in total.
    max_key_bytes: int = 1024             # a longer workflow_key or effect_key is quarantined
    max_gzip_members: int = 1024          # gzip members in one body: 413 past it (issue 44)
    decode_seconds: float = 10.0          # a body's decompression within this, or 413 (issue 44)
    max_header_bytes: int = 64 << 10      # request line and headers: 431 past it
    idle_timeout: float = 15.0            # a connection sends a request's headers within this, or is closed (408)
    body_timeout: float = 60.0            # a request body arrives whole within this, or 408
    max_inflight_bytes: int = 128 << 20   # request bodies held at once, all connections: 429 past it
    max_connections: int = 1024           # open connections: 503 past it
    store_wait: float = 30.0              # how long start and shutdown wait for a store another process holds
    # The network door.
    allow_hosts: tuple[str, ...] = ()     # Host header names answered; empty: the bind address and localhost
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_client_ca: Path | None = None
    extra: dict = field(default_factory=dict)  # uvicorn settings for tests (never needed in use)


class ServeRefused(ValueError):
    """A configuration ``auditor serve`` will not run with (the message says which flag fixes it)."""


def is_loopback(host: str) -> bool:
    """True for a name or address that only this machine reaches (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, config: ServeConfig, insecure: bool) -> None:
    """Refuse to listen beyond loopback without ``--tokens`` (unless ``insecure``), and TLS given by halves."""
    if not is_loopback(host) and config.tokens is None and not insecure:
        raise ServeRefused(f"--host {host}: listening beyond this machine without --tokens lets anyone who "
                           "reaches the port write evidence and read findings; pass --tokens FILE (and "
                           "--tls-cert/--tls-key), or --insecure to accept that")
    if (config.tls_cert is None) != (config.tls_key is None):
        raise ServeRefused("--tls-cert and --tls-key go together: give both, or neither")
    if config.tls_client_ca is not None and config.tls_cert is None:
        raise ServeRefused("--tls-client-ca needs --tls-cert and --tls-key (client certificates are checked over TLS)")
    for flag, path in (("--tls-cert", config.tls_cert), ("--tls-key", config.tls_key),
                       ("--tls-client-ca", config.tls_client_ca)):
        if path is not None and not Path(path).is_file():
            raise ServeRefused(f"{flag} {path}: no such file")


def allowed_hosts(host: str, config: ServeConfig) -> frozenset[str]:
    """The Host header names answered (lowercase, without port): ``--allow-host`` names, else the
    bind address and localhost (both loopback spellings when bound to loopback)."""
    if config.allow_hosts:  # "name:port" names the host as well: a Host header is compared without its port
        return frozenset(host_name(h) for h in config.allow_hosts)
    names = {host.lower().strip("[]"), "localhost"}
    if is_loopback(host):
        names |= {"127.0.0.1", "::1"}
    return frozenset(names)


def host_name(host: str) -> str:
    """A Host header's (or ``--allow-host``'s) name, lowercase, without its port or an IPv6
    address's brackets."""
    v = host.strip().lower()
    if v.startswith("["):
        return v[1:].split("]", 1)[0]
    return v.split(":", 1)[0] if v.count(":") == 1 else v
