"""The command line's process edge: signals and a reader that goes away.

SIGINT, SIGTERM and SIGHUP end a run with one ``Error:`` line and the shell's code for the signal
(130, 143, 129), after the same clean-up as any other exit: the copy of standard input and the
scratch store are removed by their ``atexit`` and ``weakref.finalize`` hooks, a transaction in
flight is rolled back (a ``--db`` keeps the files committed before it). Only the CLI installs
the handlers: a library must not take over its host program's signals.

DuckDB runs a Python signal handler while it checks for interrupts, and turns whatever it raised
into ``RuntimeError: Query interrupted``; so the handler also records the signal, and the CLI's
error funnel asks ``check()`` before it treats an exception as an error of its own.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: The first signal received, if any.
received: int | None = None


class Interrupted(BaseException):
    """A signal asked the auditor to stop. A ``BaseException``: no ``except Exception`` swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _handler(signum: int, frame: object) -> None:
    global received
    if received is not None:
        return  # a second Ctrl-C must not break the clean-up the first one started
    received = signum
    raise Interrupted(signum)


def check() -> None:
    """Raise ``Interrupted`` if a signal arrived (whatever exception it was turned into)."""
    if received is not None:
        raise Interrupted(received)


@contextmanager
def handled() -> Iterator[None]:
    """Run the CLI: a signal ends it with one line and exit code 128 + the signal number."""
    previous = {sig: signal.signal(sig, _handler) for sig in SIGNALS}
    try:
        yield
    except BaseException as e:
        if not isinstance(e, Interrupted) and (received is None or isinstance(e, SystemExit)):
            raise
        signum = received if received is not None else e.signum
        for sig in SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        name = signal.Signals(signum).name
        print(f"Error: interrupted by {name}; temporary copies and the scratch store are removed; "
              "files ingested into --db before it are kept", file=sys.stderr)
        raise SystemExit(128 + signum) from None
    finally:
        if received is None:
            for sig, old in previous.items():
                signal.signal(sig, old)


def default_signals() -> None:
    """Give the signals back to their defaults, for a command that handles them itself (serve)."""
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_DFL)


@contextmanager
def quiet_pipe() -> Iterator[None]:
    """Writing to standard output whose reader went away (``| head``): stop writing, quietly.

    The exit code stays the one the audit earned. Standard output is pointed at /dev/null, so
    the interpreter's own flush at exit does not fail again.
    """
    try:
        yield
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
