"""The decoder processes (``--decoders``) and the receiver's warm-up.

Decoding (gunzip, protobuf or JSON, the mapping to records, the screening and the split into the
store's typed columns) is half of a request's Python work: in spawned worker processes it runs
beside the audit and the store writer, off the receiver's GIL. A decoder dies with its receiver,
however the receiver ends (``kill -9`` included): the kernel's parent-death signal where there
is one (Linux), and a watchdog thread that sees the receiver gone everywhere.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from ..store.typed import prepare
from .decode import JSON, PROTOBUF, error, success


def decoder_pool(workers: int):
    """``workers`` spawned decoder processes, warmed up (imports done) before the port opens."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_decoder_init, initargs=(os.getpid(),))
    for f in [pool.submit(_decoder_ready) for _ in range(workers)]:
        f.result(timeout=120)
    return pool


def _decoder_init(receiver: int) -> None:
    import signal

    # The receiver owns the decoders' lifetime: a Ctrl-C (the whole process group) or a SIGTERM
    # must not kill them under requests in flight; the receiver shuts the pool down on exit.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _die_with(receiver)
    tune_gc()


def _die_with(receiver: int) -> None:
    """End this process when ``receiver`` (its parent) ends, whatever ends it."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != receiver:  # it died before the signal was armed
        os._exit(0)

    def watch() -> None:
        while os.getppid() == receiver:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=watch, name="auditor.serve.watchdog", daemon=True).start()


def _decoder_ready() -> bool:
    warm_up(store=False)
    return True


def warm_up(store: bool = True) -> None:
    """The imports and first uses a request pays for, paid now: the protobuf and response
    classes, pyarrow's first table, and (``store``) one record through a scratch store."""
    from google.protobuf.message import DecodeError  # noqa: F401
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest  # noqa: F401
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: F401

    prepare([{"workflow_key": "k", "kind": "progress", "epoch": 1, "seq": 1}])  # pyarrow's first table
    for signal in ("traces", "logs"):
        for ctype in (PROTOBUF, JSON):
            success(signal, ctype, 1, "")
    error(PROTOBUF, "")
    if store:
        from ..store import Store  # here: the decoder processes import this module, DuckDB stays out of them

        with Store() as s:  # the modules the store writer imports on first use (a second of GIL)
            s.append_records("warm-up", [(1, {"workflow_key": "k", "kind": "progress", "epoch": 1, "seq": 1,
                                              "worker": "w", "ts": "2026-01-01T00:00:00Z", "attrs": {"a": "b"}})])


def tune_gc() -> None:
    """A server process's collector: what is alive at start-up is frozen (never scanned again) and
    young collections run every 50,000 allocations, not 700. The records of a request are freed by
    reference counting (they hold no cycles); collecting every 700 of them, with the detector's
    state in the older generations, was a third of the receiver's CPU."""
    import gc

    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def tune_switching() -> None:
    """The receiver's threads hand each request on (event loop, spool, event loop) while the audit
    and the store writer run Python: at the interpreter's default 5 ms switch interval each hand-off
    can wait that long for the GIL. A request's acknowledgement waits for two of them."""
    sys.setswitchinterval(0.0005)
