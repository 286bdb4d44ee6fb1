"""Split-brain auditor: did a displaced owner keep acting after a newer epoch took over?

The Python door. ``audit(paths)`` runs the whole pipeline (read -> normalize -> store -> detect ->
explain) and returns an ``AuditResult``; ``report(db)`` re-runs detection over a stored DuckDB file.

    >>> from auditor import audit
    >>> result = audit(["fixtures/seed_split_brain.jsonl"])
    >>> result.verdict, [f.grade.value for f in result.findings]
"""

from __future__ import annotations

from .core.errors import (AuditError, AuditorError, InputError, LimitExceeded, NoEvents, OutputError,
                          ResultClosed, StoreError, StoreLocked)
from .explain.expect import Comparison, ExpectError, compare_expected, load_expected
from .detect.lease.facts import LeaseHealth
from .core.limits import Limits
from .core.model import Diagnostic, Event, Finding, Grade, Incident, Kind, Verdict
from .explain.result import AuditResult, AuditSession
from .explain.scope import Scope, ScopeError
from .store import Store
from .normalize.vocabulary import Vocabulary, VocabularyError
from .pipeline import analyze, audit, check_store, ingest_paths, report

__all__ = ["audit", "ingest_paths", "report", "analyze", "check_store", "AuditResult", "AuditSession",
           "Finding", "Incident", "Diagnostic", "Event", "Grade", "Kind", "Verdict", "Scope", "Store",
           "Limits", "Comparison", "compare_expected", "load_expected", "AuditorError", "AuditError",
           "InputError", "LimitExceeded", "NoEvents", "OutputError", "ResultClosed", "StoreError",
           "StoreLocked", "ExpectError", "ScopeError", "Vocabulary", "VocabularyError", "LeaseHealth"]
