"""One funnel for every error the library raises: ``AuditorError`` and its narrow subclasses.

The CLI turns each into one ``Error: ...`` line and an exit code; a Python user catches
``AuditorError`` and never sees a raw DuckDB or OS exception from the pipeline.
"""

from __future__ import annotations


class AuditorError(Exception):
    """Base of every error the auditor raises on purpose (exit code 2 at the command line)."""


class InputError(AuditorError):
    """An input path cannot be read at all (missing, unreadable, unknown format, corrupt archive)."""


class AuditError(AuditorError):
    """The audit could not run (exit code 2)."""


class NoEvents(AuditError):
    """The input held no event at all (empty, or every line quarantined)."""


class StoreError(AuditorError):
    """The DuckDB store could not be opened or written."""


class StoreLocked(StoreError):
    """Another process holds the DuckDB file."""


class ResultClosed(AuditorError):
    """The result was closed: its events are no longer readable (its findings still are)."""
