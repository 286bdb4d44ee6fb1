"""``auditor serve``: an OTLP/HTTP receiver you can expose, auditing every sender's evidence live.

The door for fleets: workers (or the OpenTelemetry Collector in front of them) export spans and
log records with an ``otlphttp`` exporter to ``POST /v1/traces`` and ``POST /v1/logs`` (protobuf
or JSON, optionally gzip). ``GET /findings`` and ``GET /incidents`` answer with the JSON
document's lists from the batch audit of the store, exactly ``auditor report --db``'s.

A request's way, one module each:

- ``app``: the HTTP door. Host check (421), bearer token and role (``auth``; 401, 403), the body
  read within bounds (408, 413, 429); ``server`` runs it on uvicorn with the per-connection bounds,
  TLS and the stop signals.
- ``decode`` (in ``pool``'s decoder processes): the body to canonical records, every gzip member,
  one bad record costing only itself (``lenient`` for protobuf text that is not UTF-8), then
  ``evidence.screen``: the records the sender's role may not report, or with keys too long, are
  refused with a reason.
- ``receiver``: the request written to the ``spool`` (fsynced, group commit) before it is
  answered, so 200 means kept; then handed to the store writer (``durable``: in order, exactly
  once, refused records quarantined with their reasons) and to the live audit (``audit``:
  rebuilt from the store at start, one alert per incident across restarts).

Settings and bounds: ``config.ServeConfig``. docs/OTEL.md is the operator's guide.
"""

from __future__ import annotations

from typing import Any

from .config import ServeConfig, ServeRefused, check_exposure
from .auth import Tokens, TokensError, load_tokens

__all__ = ["Receiver", "ServeConfig", "ServeRefused", "Tokens", "TokensError", "app", "check_exposure",
           "decode_request", "load_tokens", "serve"]

# The receiver's modules load on first use: a decoder process imports ``serve.decode`` only, not
# the web stack.
_LAZY = {"Receiver": ".receiver", "app": ".app", "serve": ".server", "decode_request": ".decode",
         "PackedRecords": ".decode", "tune_gc": ".pool"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(module, __name__), name)
