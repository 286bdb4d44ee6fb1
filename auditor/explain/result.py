"""The audit result: what every door (CLI, Python, OTel) hands back, and what every renderer reads.

An ``AuditResult`` is data. The JSON document is ``to_dict()``; the terminal summary and the HTML
report are renderings of the same object, and the timelines a report draws come with it
(``timelines``, fetched once when the result is made). Event rows stay in the store and are read
on demand (``events_frame``, ``timeline``) so a ten-million-event audit does not hold them in
Python: the store is held by the result's ``AuditSession``, not by the result's data, and
``close()`` (or ``with audit(...) as result:``) lets it go.
"""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass, field
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core.errors import ResultClosed
from .scope import ScopeError
from ..detect.lease.facts import EMPTY as NO_LEASE_HEALTH, LeaseHealth
from ..rules.grades import GRADES
from ..core.model import Diagnostic, DiagnosticKind, Event, Finding, Grade, Incident, Verdict
from ..core.summary import InputSummary, QuarantinedLine, SkippedPath, unplaced_reason
from .workflows import COUNTS, WorkflowSummary, WorkflowTable

if TYPE_CHECKING:  # polars is imported lazily: the CLI's cold start matters
    import polars as pl

    from ..detect.batch.timeline import KeyTimeline
    from .scope import Scope
    from ..store import Store

__all__ = ["AuditResult", "AuditSession", "InputSummary", "QuarantinedLine", "SkippedPath", "WorkflowSummary",
           "WorkflowTable", "SCHEMA", "COUNTS"]

SCHEMA = "split-brain-audit/3"
#: Unplaced events that could change a finding (SPEC rev 3): each counts as lost evidence, and an
#: unplaced ``progress`` too when ``--fail-on`` is ``stale_activity``.
LOST_WHEN_UNPLACED = frozenset({"lease_acquired", "effect_attempted", "effect_committed", "effect_compensated",
                                "resumed", "revalidated", "authority_granted", "authority_revoked"})
LISTS = ("incidents", "findings", "diagnostics", "workflows")  # the document's long lists


class AuditSession:
    """The open store behind a result. Closing it is idempotent; it closes the store.

    ``absent`` says why a result that never had a store cannot read events (a Spark audit's
    stay in Spark): the ``ResultClosed`` message then, instead of "closed".
    """

    __slots__ = ("_store", "_absent")

    def __init__(self, store: "Store | None", absent: str | None = None) -> None:
        self._store = store
        self._absent = absent

    @property
    def open(self) -> bool:
        return self._store is not None

    @property
    def store(self) -> "Store":
        if self._store is None:
            if self._absent is not None:
                raise ResultClosed(self._absent)
            raise ResultClosed("this audit result is closed: its events are no longer readable; "
                               "read them (events_frame, timeline) before close() or the with block ends")
        return self._store

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()


@dataclass(slots=True)
class AuditResult:
    ordering: str
    input: InputSummary
    workflows: WorkflowTable  # a list of summaries is turned into one
    findings: Sequence[Finding]  # a list, or spooled (explain.stream.Findings): read on demand
    incidents: Sequence[Incident]  # likewise (explain.stream.Incidents)
    diagnostics: list[Diagnostic]
    fail_on: Grade = Grade.STALE_ATTEMPT
    allow_quarantined: int = 0  # lost lines accepted before the verdict says incomplete
    allow_unplaced: int = 0  # SPEC rev 3.1: unplaced events that could change a finding, accepted apart
    scope: "Scope | None" = None  # what the lists were narrowed to after detection, if anything
    engine: str = "duckdb"  # what produced it: "duckdb" (one machine) or "spark" (auditor.spark)
    #: SPEC section 7: lease metrics per group and key (its diagnostics are in ``diagnostics``)
    lease_health: LeaseHealth = NO_LEASE_HEALTH
    #: the timelines a report draws (see ``explain.timeline_keys``), by workflow key
    timelines: "dict[str, KeyTimeline]" = field(default_factory=dict, repr=False)
    #: SPEC rev 3: unplaced events by kind (no seq in a key ordered by seq)
    unplaced: dict[str, int] = field(default_factory=dict)
    #: what ``auditor serve``'s spool beside the store holds that the store lacks (acknowledged
    #: requests not yet appended, frames that cannot be read: ``store.spooled.backlog``); None: nothing
    spool: dict[str, Any] | None = None
    #: ``auditor serve``'s attribution: {finding id: {role: token name}} of the events each finding
    #: rests on (``store.attribution``), and every token name the store holds; empty for any other input
    attribution: dict[str, dict[str, str]] = field(default_factory=dict, repr=False)
    token_names: tuple[str, ...] = ()
    session: AuditSession = field(default_factory=lambda: AuditSession(None), repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.workflows, WorkflowTable):
            self.workflows = WorkflowTable.of(self.workflows)

    def close(self) -> None:
        """Let go of the store (a scratch one is deleted). Idempotent; the data stays readable."""
        self.session.close()

    def __enter__(self) -> "AuditResult":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def store(self) -> "Store":
        """The open store (raises ``ResultClosed`` once the result is closed)."""
        return self.session.store

    @property
    def failing(self) -> list[Finding]:
        """Findings at or above ``fail_on``."""
        return [f for f in self.findings if f.grade.at_least(self.fail_on)]

    @property
    def failing_count(self) -> int:
        """How many findings are at or above ``fail_on`` (``len(failing)``, without reading them)."""
        return sum(n for g, n in self._grades().items() if g.at_least(self.fail_on))

    def _grades(self) -> dict[Grade, int]:
        counted = getattr(self.findings, "grades", None)
        if counted is not None:  # a spooled list counted them as they were written
            return counted()
        seen: dict[Grade, int] = {}
        for f in self.findings:
            seen[f.grade] = seen.get(f.grade, 0) + 1
        return seen

    @property
    def event_id_conflicts(self) -> int:
        return sum(1 for d in self.diagnostics if d.kind == DiagnosticKind.EVENT_ID_CONFLICT)

    @property
    def unplaced_lost(self) -> int:
        """Unplaced events that could change a finding at or above ``fail_on`` (SPEC rev 3)."""
        return sum(n for kind, n in self.unplaced.items() if self.lost_kind(kind))

    @property
    def malformed_lost(self) -> int:
        """Events whose dropped value was one a finding rule reads (``malformed_field``, SPEC rev 3)."""
        return sum(d.numbers["lost"] for d in self.diagnostics
                   if d.kind == DiagnosticKind.MALFORMED_FIELD and d.numbers)

    @property
    def lost(self) -> int:
        """Evidence the audit could not use: quarantined lines, ``event_id`` conflicts, unplaced
        events that could change a finding, and values a finding rule reads that were dropped."""
        return self.lost_lines + self.unplaced_lost

    @property
    def lost_lines(self) -> int:
        """What ``allow_quarantined`` accepts: quarantined lines, ``event_id`` conflicts and values a
        finding rule reads that were dropped; never an unplaced event (SPEC revision 3.1)."""
        return self.input.quarantined + self.event_id_conflicts + self.malformed_lost

    @property
    def lost_blocks(self) -> bool:
        """Whether lost evidence stops a pass: more lost lines than ``allow_quarantined``, or more
        unplaced events that could change a finding than ``allow_unplaced``."""
        return blocks(self.lost_lines, self.unplaced_lost, self.allow_quarantined, self.allow_unplaced)

    @property
    def verdict(self) -> Verdict:
        """``fail`` at or above ``fail_on``; else ``incomplete`` when lost evidence goes beyond its
        allowance (``lost_blocks``: a pass cannot be claimed); else ``pass``."""
        if self.failing_count:
            return Verdict.FAIL
        if self.spool_lost:
            return Verdict.INCOMPLETE  # acknowledged evidence not in the store: never a pass, whatever the allowance
        return Verdict.INCOMPLETE if self.lost_blocks else Verdict.PASS

    @property
    def spool_lost(self) -> int:
        """Acknowledged requests of ``auditor serve`` that the store lacks (pending or unreadable)."""
        return 0 if not self.spool else self.spool["pending_requests"] + self.spool["lost_requests"]

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    def evidence_lost(self) -> dict[str, Any]:
        """What was lost and why, for the document's top (before the findings)."""
        return {"quarantined": self.input.quarantined, "event_id_conflicts": self.event_id_conflicts,
                "unplaced": self.unplaced_lost, "malformed": self.malformed_lost,
                "allow_quarantined": self.allow_quarantined,
                # SPEC rev 3.1; only where it applies, so other documents stay byte-identical
                **({"allow_unplaced": self.allow_unplaced} if self.unplaced_lost or self.allow_unplaced else {}),
                "first": self.lost_first()}

    def lost_kind(self, kind: str) -> bool:
        """Whether an unplaced event of ``kind`` could change a finding at or above ``fail_on``."""
        return kind in LOST_WHEN_UNPLACED or (kind == "progress" and self.fail_on is Grade.STALE_ACTIVITY)

    def lost_first(self) -> list[dict[str, Any]]:
        """``evidence_lost.first`` (SPEC rev 3.1): the first file and line of every cause that
        blocks the pass (the first quarantined line, the first dropped value a finding rule reads
        and the first line of the first ``event_id`` conflict when lost lines exceed ``allow_quarantined``; the first unplaced event of each kind that
        could change a finding when those exceed ``allow_unplaced``), then the first quarantined
        lines that are not among them. Where only quarantined lines are lost, the list is those lines."""
        quarantine = [asdict(q) for q in self.input.quarantine]
        blocking: list[dict[str, Any]] = []
        if self.lost_lines > self.allow_quarantined:
            blocking += quarantine[:1]
            blocking += [{"file": d.file, "line": d.line, "reason": d.detail} for d in self.diagnostics
                         if d.kind == DiagnosticKind.MALFORMED_FIELD and d.numbers and d.numbers["lost"]][:1]
            blocking += [{"file": d.file, "line": d.line, "reason": d.detail} for d in self.diagnostics
                         if d.kind == DiagnosticKind.EVENT_ID_CONFLICT and d.file is not None][:1]
        if self.unplaced_lost > self.allow_unplaced:
            seen: set[str] = set()
            for u in self.input.unplaced_first:
                if self.lost_kind(u.kind) and u.kind not in seen:
                    seen.add(u.kind)
                    blocking.append({"file": u.file, "line": u.line, "reason": unplaced_reason(u)})
        return blocking + [q for q in quarantine if q not in blocking]

    def grade_counts(self) -> dict[str, int]:
        """Findings per grade, in the grades' order (counted as they were written, when spooled)."""
        seen = self._grades()
        return {g: seen[g] for g in GRADES if g in seen}  # in the order rules.grades declares

    def summary(self) -> dict[str, Any]:
        acquisitions, handovers, clean = self.workflows.totals()
        return {
            "workflows": len(self.workflows),
            "acquisitions": acquisitions,
            "handovers": handovers,
            "clean_handovers": clean,
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
            "verdict": self.verdict.value,
            "fail_on": self.fail_on.value,
            "evidence_lost": self.evidence_lost(),
            **({"spool": self.spool} if self.spool else {}),  # only a receiver's store with a backlog
            "scope": None if self.scope is None else self.scope.to_dict(),
            "ordering": self.ordering,
            "input": asdict(self.input),
            "summary": self.summary(),
            "lease_health": self.lease_health.to_dict(),
            "incidents": (i.to_dict() for i in self.incidents),
            "findings": (self.finding_item(f) for f in self.findings),
            "diagnostics": (d.to_dict() for d in self.diagnostics),
            "workflows": ({name: getattr(w, name) for name in w.__slots__} for w in self.workflows),
        }

    def finding_item(self, f: Finding) -> dict[str, Any]:
        """A finding's item: ``tokens`` (role -> token name) only when ``auditor serve`` stored its
        evidence under a named token, so documents of every other input stay as they were."""
        d = f.to_dict()
        tokens = self.attribution.get(f.id) if self.attribution else None
        if tokens:
            d["tokens"] = tokens
        return d

    def expected_triples(self) -> set[tuple[str, str, int]]:
        """``(grade, workflow_key, seq)`` of every finding: the shape ``--expect`` compares."""
        return {(f.grade.value, f.workflow_key, f.seq) for f in self.findings}

    # Event access, read from the store on demand (``ResultClosed`` after ``close()``).

    def events_frame(self) -> "pl.DataFrame":
        """All stored events as a polars DataFrame, sorted by workflow key then seq."""
        return self.store.events_frame()

    def quarantine_frame(self) -> "pl.DataFrame":
        """Every quarantined line (file, line, reason), not only the first few in ``input``."""
        return self.store.quarantine_frame()

    def findings_frame(self) -> "pl.DataFrame":
        import polars as pl

        rows = [f.to_dict() for f in self.findings]
        if not rows:
            return pl.DataFrame(schema={"id": pl.Utf8, "grade": pl.Utf8, "workflow_key": pl.Utf8, "seq": pl.Int64})
        return pl.DataFrame(rows)

    def timeline(self, workflow_key: str, limit: int | None = None) -> list[Event]:
        """The events of one workflow key in authoritative order (the first ``limit``)."""
        return self.store.events_of(workflow_key, limit)


def blocks(lines: int, unplaced: int, allow_quarantined: int, allow_unplaced: int) -> bool:
    """SPEC revision 3.1: ``--allow-quarantined`` accepts lost lines and never an unplaced event;
    ``--allow-unplaced`` accepts unplaced events that could change a finding."""
    return lines > allow_quarantined or unplaced > allow_unplaced


def narrow(result: AuditResult, scope: "Scope | None") -> AuditResult:
    """``result`` with only what ``scope`` reports: matching findings, the incidents that keep at
    least one of them, diagnostics and workflow rows of matching keys. Detection is not re-run.

    Lease health keeps the rows of matching keys and the groups they belong to, with the group's
    figures over all of its keys (a lease configuration is judged on all the evidence, as
    detection is); a group's ``lease_timing_risk`` and ``late_extension`` stay with their group,
    whatever the window."""
    if scope is None or not scope.narrows:
        return result
    workflows = [w for w in result.workflows if scope.key_matches(w.workflow_key)]
    if scope.keys and not workflows:  # a typo in --key must not pass over an empty selection
        sample = ", ".join(w.workflow_key for w in result.workflows[:3])
        raise ScopeError(f"no workflow key matches {', '.join(scope.keys)}; the input has "
                         f"{len(result.workflows):,} workflow keys (e.g. {sample})")
    findings = [f for f in result.findings if scope.finding_matches(f)]
    if scope.tokens:
        findings = _delivered_by(result, findings, scope.tokens)
    kept = {f.incident_id for f in findings}
    health = result.lease_health
    keys = tuple(k for k in health.keys if scope.key_matches(k.workflow_key))
    groups = {k.group for k in keys}
    health = dataclasses.replace(health, keys=keys, groups=tuple(g for g in health.groups if g.group in groups),
                                 diagnostics=tuple(d for d in health.diagnostics if _keeps(scope, d, groups)))
    return dataclasses.replace(
        result,
        findings=findings,
        incidents=[i for i in result.incidents if i.id in kept],
        diagnostics=[d for d in result.diagnostics if _keeps(scope, d, groups)],
        workflows=workflows, scope=scope, lease_health=health)


def _delivered_by(result: AuditResult, findings: list[Finding], tokens: tuple[str, ...]) -> list[Finding]:
    """The findings with evidence one of ``tokens`` delivered; naming a token the store never
    recorded is an error (a typo must not pass over an empty selection)."""
    unknown = [t for t in tokens if t not in result.token_names]
    if unknown:
        held = ", ".join(result.token_names) or "none: no record came through auditor serve with a named token"
        raise ScopeError(f"--token {', '.join(unknown)}: no stored record was delivered by that token "
                         f"(the store's token names: {held})")
    wanted = set(tokens)
    return [f for f in findings if wanted.intersection(result.attribution.get(f.id, {}).values())]


#: Lease-health diagnostics about a whole group (one per group): they stay with their group.
_GROUP_DIAGNOSTICS = frozenset({DiagnosticKind.LEASE_TIMING_RISK, DiagnosticKind.LATE_EXTENSION})


def _keeps(scope: "Scope", d: Diagnostic, groups: set) -> bool:
    if d.kind in (DiagnosticKind.EVENT_ID_CONFLICT, DiagnosticKind.MALFORMED_FIELD):
        return True
    if d.kind in _GROUP_DIAGNOSTICS:
        return tuple(d.group.items()) in groups
    return scope.key_matches(d.workflow_key) and scope.in_window(d.seq, None)

