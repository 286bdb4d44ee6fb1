"""One funnel for every error the library raises: ``AuditorError`` and its narrow subclasses.

The CLI turns each into one ``Error: ...`` line and an exit code; a Python user catches
``AuditorError`` and never sees a raw DuckDB or OS exception from the pipeline.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


class AuditorError(Exception):
    """Base of every error the auditor raises on purpose (exit code 2 at the command line)."""


class InputError(AuditorError):
    """An input path cannot be read at all (missing, unreadable, unknown format, corrupt archive)."""


class AuditError(AuditorError):
    """The audit could not run (exit code 2)."""


class NoEvents(AuditError):
    """The input held no event at all (empty, or every line quarantined)."""

    def __init__(self, message: str, details: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        #: Lines that follow the message (the quarantine's reasons by count, the next step).
        self.details = details


class StoreError(AuditorError):
    """The DuckDB store could not be opened or written."""


class StoreLocked(StoreError):
    """Another process holds the DuckDB file."""


class ResultClosed(AuditorError):
    """The result was closed: its events are no longer readable (its findings still are)."""


class LimitExceeded(InputError):
    """An input goes past one of the limits of ``core.limits``; the message says which and how
    to raise it."""


class OutputError(AuditorError):
    """A report (``--json``, ``--html``) could not be written; nothing half-written is left."""


def at_the_edge(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a public library function: DuckDB and OS errors leave it as ``AuditorError``s.

    The narrow errors are raised where the cause is known; this is the net under them, so a
    Python user catching ``AuditorError`` never meets a raw ``duckdb.Error`` or ``OSError``.
    """
    @functools.wraps(fn)
    def edge(*args: P.args, **kwargs: P.kwargs) -> R:
        import duckdb

        try:
            return fn(*args, **kwargs)
        except duckdb.Error as e:
            if isinstance(e, duckdb.InterruptException):
                raise
            raise StoreError(f"DuckDB failed: {str(e).strip().splitlines()[0] if str(e).strip() else e}") from e
        except OSError as e:
            where = f"{e.filename}: " if e.filename else ""
            raise AuditorError(f"{where}{e.strerror or e}") from e

    return edge
