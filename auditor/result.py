"""The audit result: what every door (CLI, Python, OTel) hands back, and what every renderer reads.

An ``AuditResult`` is data. The JSON document is ``to_dict()``; the terminal summary and the HTML
report are renderings of the same object. Event rows stay in the store and are read on demand
(``events_frame``, ``timeline``) so a ten-million-event audit does not hold them in Python.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .model import Diagnostic, Event, Finding, Grade, Incident

if TYPE_CHECKING:  # polars is imported lazily: the CLI's cold start matters
    import polars as pl

    from .store import Store

SCHEMA = "split-brain-audit/1"
LISTS = ("incidents", "findings", "diagnostics", "workflows")  # the document's long lists


@dataclass(frozen=True, slots=True)
class QuarantinedLine:
    file: str
    line: int
    reason: str


@dataclass(slots=True)
class InputSummary:
    files: list[str] = field(default_factory=list)
    lines_read: int = 0
    events: int = 0
    duplicates: int = 0
    quarantined: int = 0
    quarantine: list[QuarantinedLine] = field(default_factory=list)  # the first few, in file order


@dataclass(frozen=True, slots=True)
class WorkflowSummary:
    """One workflow key: its size, its owners, and how bad its worst finding is."""

    workflow_key: str
    events: int
    acquisitions: int
    handovers: int
    clean_handovers: int
    findings: int
    severity: Grade | None
    ordering: str  # "authoritative" (seq) or "observed" (file order: seq was missing)


@dataclass(slots=True)
class AuditResult:
    ordering: str
    input: InputSummary
    workflows: list[WorkflowSummary]
    findings: list[Finding]
    incidents: list[Incident]
    diagnostics: list[Diagnostic]
    fail_on: Grade = Grade.STALE_ATTEMPT
    engine: str = "duckdb"  # what produced it: "duckdb" (one machine) or "spark" (auditor.spark)
    store: "Store | None" = field(default=None, repr=False, compare=False)

    @property
    def failing(self) -> list[Finding]:
        """Findings at or above ``fail_on``."""
        return [f for f in self.findings if f.grade.at_least(self.fail_on)]

    @property
    def verdict(self) -> str:
        return "fail" if self.failing else "pass"

    @property
    def exit_code(self) -> int:
        return 1 if self.failing else 0

    def grade_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for g in Grade:
            n = sum(1 for f in self.findings if f.grade is g)
            if n:
                counts[g.value] = n
        return counts

    def summary(self) -> dict[str, Any]:
        return {
            "workflows": len(self.workflows),
            "acquisitions": sum(w.acquisitions for w in self.workflows),
            "handovers": sum(w.handovers for w in self.workflows),
            "clean_handovers": sum(w.clean_handovers for w in self.workflows),
            "findings": self.grade_counts(),
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of SPEC section 4 (keys stable, lists sorted by workflow key then seq)."""
        return {k: v if k not in LISTS else list(v) for k, v in self.document().items()}

    def document(self) -> dict[str, Any]:
        """``to_dict()`` with the long lists (``LISTS``) as lazy iterators of item dicts, for a
        renderer that writes them one by one: those of a big audit do not fit in memory as dicts."""
        return {
            "schema": SCHEMA,
            "engine": self.engine,
            "verdict": self.verdict,
            "fail_on": self.fail_on.value,
            "ordering": self.ordering,
            "input": asdict(self.input),
            "summary": self.summary(),
            "incidents": (i.to_dict() for i in self.incidents),
            "findings": (f.to_dict() for f in self.findings),
            "diagnostics": (d.to_dict() for d in self.diagnostics),
            "workflows": ({name: getattr(w, name) for name in w.__slots__} for w in self.workflows),
        }

    def expected_triples(self) -> set[tuple[str, str, int]]:
        """``(grade, workflow_key, seq)`` of every finding: the shape ``--expect`` compares."""
        return {(f.grade.value, f.workflow_key, f.seq) for f in self.findings}

    # Event access, read from the store on demand.

    def events_frame(self) -> "pl.DataFrame":
        """All stored events as a polars DataFrame, sorted by workflow key then seq."""
        return self._store().events_frame()

    def quarantine_frame(self) -> "pl.DataFrame":
        """Every quarantined line (file, line, reason), not only the first few in ``input``."""
        return self._store().quarantine_frame()

    def findings_frame(self) -> "pl.DataFrame":
        import polars as pl

        rows = [f.to_dict() for f in self.findings]
        if not rows:
            return pl.DataFrame(schema={"id": pl.Utf8, "grade": pl.Utf8, "workflow_key": pl.Utf8, "seq": pl.Int64})
        return pl.DataFrame(rows)

    def timeline(self, workflow_key: str, limit: int | None = None) -> list[Event]:
        """The events of one workflow key in authoritative order (the first ``limit``)."""
        return self._store().events_of(workflow_key, limit)

    def _store(self) -> "Store":
        if self.store is None:
            raise RuntimeError("this result was built without a store; events are not available")
        return self.store
