"""The HTML report's context: everything ``report.html.j2`` reads, computed from one ``AuditResult``.

Python decides what goes on the page and where (the ``ReportContext`` below: counts, incident
cards, tables; the timelines come from ``timeline``); the templates only draw it. Prose about
findings comes from the data (the incident's witness and response, ``rules.MEANINGS``); the page
adds labels only. Large logs stay readable and small: at most ``MAX_CARDS`` incident cards and
``MAX_TIMELINES`` timelines (most urgent first, ``explain.by_urgency``); whatever is left out is
counted in a note on the page. Output is deterministic: no run timestamp, stable ordering.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ...explain.incidents import MAX_CARDS, MAX_CLEAN_TIMELINES, by_urgency, timeline_keys
from ...core.model import Finding, Incident
from ...explain.result import AuditResult, WorkflowSummary
from ...rules.grades import ordered, spec
from ..words import actions, not_displaced, reported_by, transition
from .format import _duration, _key_anchor, _num, _opt, _owner, _short_owner
from .input_view import InputView, input_view
from .lease import LeaseHealthView, lease_view
from .timeline import Timeline, draw

MAX_WORKFLOW_ROWS = 5_000  # rows in the workflow index
MAX_DIAGNOSTIC_ROWS = 500
BIG_TABLE = 400  # rows from which a table is rendered only when scrolled into view
ROW_PX = 27  # estimated row height, for the placeholder size of a table not yet rendered


# The context: everything the template reads, documented field by field.


@dataclass(frozen=True, slots=True)
class GradeCount:
    grade: str  # Grade value; also the CSS class suffix
    count: int
    meaning: str  # model.MEANINGS


@dataclass(frozen=True, slots=True)
class EffectRow:
    effect_key: str
    sink_outcome: str  # committed / rejected / unknown
    verification: str  # "verified at seq N" or "unverified"
    verified: bool


@dataclass(frozen=True, slots=True)
class Fact:
    label: str
    value: str
    css: str = ""
    parts: tuple[str, ...] = ()  # the value's " \u00b7 "-separated parts, each kept on one line
    where: str = ""  # the value's file:line, its last part: broken only after a "/" (or where it cannot fit)


@dataclass(frozen=True, slots=True)
class IncidentCard:
    id: str
    workflow_key: str
    severity: str
    meaning: str  # MEANINGS of the severity
    witness: str  # Incident.witness, verbatim
    response: str  # Incident.response (RESPONSES of the severity), verbatim
    responses: tuple[str, ...]  # every action the incident's findings call for, most urgent first
    facts: list[Fact]  # owner, transition, window, sink, verification, confidence, freshness
    effects: list[EffectRow]
    grades: list[GradeCount]  # findings of this incident, most severe first
    finding_ids: list[str]
    timeline: Timeline | None  # drawn in the first card of its key
    timeline_ref: str | None  # anchor of the key's timeline when drawn elsewhere
    timeline_note: str | None  # why no timeline is drawn


@dataclass(frozen=True, slots=True)
class FindingRow:
    id: str
    grade: str
    workflow_key: str
    seq: str  # "position N" when the log gave no seq (SPEC rev 3: never an invented seq)
    kind: str
    owner: str  # "17 (alpha)": the table's header says these are epochs
    current: str
    transition_seq: str
    effect_key: str
    outcome: str  # outcome, receipt seq, epochs of a double commit, unstable key
    ts: str


@dataclass(frozen=True, slots=True)
class FindingGroup:
    incident_id: str
    workflow_key: str
    severity: str
    header: str  # "epoch 17 (alpha) -> epoch 18 (beta)"
    has_card: bool
    rows: list[FindingRow]


@dataclass(frozen=True, slots=True)
class WorkflowRow:
    workflow_key: str
    anchor: str
    severity: str  # grade value, or "" when the key has no finding
    findings: int
    events: int
    acquisitions: int
    handovers: int
    clean_handovers: int
    ordering: str
    timeline: str | None  # anchor of its timeline when drawn
    incident: str | None  # anchor of its most severe incident card


@dataclass(frozen=True, slots=True)
class DiagnosticRow:
    kind: str
    workflow_key: str
    seq: str
    epoch: str
    detail: str


@dataclass(frozen=True, slots=True)
class ReportContext:
    """Everything the page shows. Strings are plain text; the template escapes them."""

    title: str
    verdict: str  # "pass" / "fail"
    fail_on: str
    failing: int  # findings at or above fail_on
    grade_counts: list[GradeCount]  # every grade, least to most severe
    total_findings: int
    input: InputView
    stats: list[Fact]  # workflows, acquisitions, handovers, clean handovers, incidents, diagnostics
    cards: list[IncidentCard]  # most severe first
    clean_timelines: list[Timeline]
    clean_note: str | None
    groups: list[FindingGroup]  # every finding, grouped by incident, same order as the cards
    findings_defer: int | None  # estimated height in px when the table is big enough to render lazily
    workflows: list[WorkflowRow]  # affected first
    workflows_defer: int | None
    workflows_note: str | None
    diagnostics: list[DiagnosticRow]
    diagnostics_note: str | None
    grades: list[GradeCount]  # legend: every grade with its meaning
    notes: list[str] = field(default_factory=list)  # every cap that applied, for the header
    lease: LeaseHealthView | None = None  # lease health (SPEC section 7), when keys carry lease evidence


def build_context(result: AuditResult) -> ReportContext:
    """Everything ``report.html.j2`` needs, computed from ``result`` (its findings and the
    timeline facts it carries; it needs no open store)."""
    notes: list[str] = []
    incidents = by_urgency(result.incidents)
    by_incident: dict[str, list[Finding]] = defaultdict(list)
    by_key: dict[str, list[Finding]] = defaultdict(list)
    for f in result.findings:
        by_incident[f.incident_id].append(f)
        by_key[f.workflow_key].append(f)

    carded = incidents[:MAX_CARDS]
    if len(incidents) > len(carded):
        notes.append(f"Showing the {len(carded):,} most severe of {len(incidents):,} incidents as cards; "
                     f"the other {len(incidents) - len(carded):,} are listed with their findings in "
                     "the table of findings.")

    drawn, clean_keys = timeline_keys(result.incidents, result.workflows)
    affected_keys = len({i.workflow_key for i in incidents})
    if affected_keys > len(drawn):
        notes.append(f"Timelines are drawn for {len(drawn):,} of {affected_keys:,} affected workflow "
                     f"keys (those of the most severe incidents); the other {affected_keys - len(drawn):,} "
                     "keys are in the workflow index without a timeline.")
    timelines = {k: draw(result.timelines[k], by_key.get(k, []), clean=False)
                 for k in drawn if k in result.timelines}
    if drawn and not timelines:
        notes.append("Timelines are left out: this result carries no timeline facts.")

    cards = _cards(carded, by_incident, timelines)
    clean_timelines = [draw(result.timelines[k], [], clean=True) for k in clean_keys if k in result.timelines]
    clean_note = None
    all_clean = sum(1 for w in result.workflows if w.findings == 0 and w.clean_handovers > 0)
    if all_clean > MAX_CLEAN_TIMELINES:
        clean_note = (f"Showing {MAX_CLEAN_TIMELINES} of {all_clean:,} workflow keys whose handovers "
                      "were all clean.")

    groups = [_group(inc, by_incident[inc.id], i < len(carded), result.attribution)
              for i, inc in enumerate(incidents)]

    wf_rows, workflows_note = _workflow_rows(result.workflows, timelines, clean_timelines, incidents)
    if workflows_note:
        notes.append(workflows_note)
    diagnostics, diagnostics_note = _diagnostic_rows(result)
    if diagnostics_note:
        notes.append(diagnostics_note)

    counts = result.grade_counts()
    summary = result.summary()
    return ReportContext(
        title=_title(result),
        verdict=result.verdict,
        fail_on=result.fail_on.value,
        failing=result.failing_count,
        grade_counts=[GradeCount(g.grade, counts.get(g.grade, 0), g.meaning) for g in ordered()],
        total_findings=len(result.findings),
        input=input_view(result),
        stats=[_stat(n, noun) for n, noun in (
            (summary["workflows"], "workflow"), (summary["acquisitions"], "acquisition"),
            (summary["handovers"], "handover"), (summary["clean_handovers"], "clean handover"),
            (len(incidents), "incident"), (len(result.diagnostics), "diagnostic"))],
        cards=cards,
        clean_timelines=clean_timelines, clean_note=clean_note,
        groups=groups, findings_defer=_defer(len(result.findings) + len(groups)),
        workflows=wf_rows, workflows_note=workflows_note, workflows_defer=_defer(len(wf_rows)),
        diagnostics=diagnostics, diagnostics_note=diagnostics_note,
        grades=[GradeCount(g.grade, counts.get(g.grade, 0), g.meaning) for g in reversed(ordered())],
        notes=notes,
        lease=lease_view(result.lease_health, result.diagnostics),
    )


def _stat(n: int, noun: str) -> Fact:
    """A count of the summary line, its noun in the number's form: ``1 clean handover``, ``2 incidents``."""
    return Fact(noun if n == 1 else noun + "s", _num(n))


def _cards(carded: list[Incident], by_incident: dict[str, list[Finding]],
           timelines: dict[str, Timeline]) -> list[IncidentCard]:
    """The cards of the most urgent incidents: each key's timeline drawn in the first card of the
    key, and linked from its others."""
    cards = []
    placed: set[str] = set()
    for inc in carded:
        tl = timelines.get(inc.workflow_key)
        here = tl is not None and inc.workflow_key not in placed
        if here:
            placed.add(inc.workflow_key)
        missing = None if tl is not None else "No timeline drawn for this key (see the notes at the top)."
        cards.append(_card(inc, by_incident[inc.id], tl if here else None,
                           tl.anchor if tl is not None and not here else None, missing))
    return cards


def _diagnostic_rows(result: AuditResult) -> tuple[list[DiagnosticRow], str | None]:
    """The first ``MAX_DIAGNOSTIC_ROWS`` diagnostics as rows, and a note when there are more."""
    rows = [DiagnosticRow(d.kind.value, d.workflow_key,
                          _opt(d.seq) if d.seq is not None or d.position is None else f"position {d.position}",
                          _opt(d.epoch), d.detail)
            for d in result.diagnostics[:MAX_DIAGNOSTIC_ROWS]]
    note = None
    if len(result.diagnostics) > MAX_DIAGNOSTIC_ROWS:
        note = (f"Showing the first {MAX_DIAGNOSTIC_ROWS} of {len(result.diagnostics):,} "
                "diagnostics; the JSON document has them all.")
    return rows, note


def _defer(rows: int) -> int | None:
    """A placeholder height for a big table: the browser then lays it out only when it is scrolled
    into view, instead of again and again while the page streams in (seconds at 10,000 rows)."""
    return rows * ROW_PX + 40 if rows >= BIG_TABLE else None


def _title(result: AuditResult) -> str:
    files = result.input.files
    name = Path(files[0]).name if files else "store"
    if len(files) > 1:
        name += f" and {len(files) - 1} more"
    return f"Split-brain audit: {name}"


# Incident cards and the findings table.


def _card(inc: Incident, findings: list[Finding], timeline: Timeline | None, ref: str | None,
          no_timeline: str | None) -> IncidentCard:
    facts = [Fact("owner", _owner(inc.current.worker, inc.current.epoch) + ", the current owner")] if not_displaced(
        inc) else [Fact("displaced owner", _owner(inc.displaced.worker, inc.displaced.epoch), "displaced"),
                   Fact("current owner", _owner(inc.current.worker, inc.current.epoch), "current")]
    facts.append(Fact("transition", transition(inc) or "not seen"))
    if inc.window_first_seq is not None and inc.window_last_seq is not None:
        word, first, last = "seq", inc.window_first_seq, inc.window_last_seq
    else:
        word, first, last = "position", inc.window_first_position, inc.window_last_position
    window = f"{word} {first}" if first == last else f"{word}s {first}\u2013{last}"
    if inc.window_seconds is not None and inc.window_seconds >= 0:
        window += f", until {_duration(inc.window_seconds)} after the transition"
    elif inc.window_seconds is not None:  # late arrival: the source clock disagrees with seq
        window += f", ts {_duration(-inc.window_seconds)} earlier than the transition's ts"
    facts.append(Fact("stale window", window))
    for label, stale in (("first stale", inc.first_stale), ("last stale", inc.last_stale)):
        if stale is not None:  # not "ref": that is the timeline's anchor, linked below
            parts = [f"seq {stale.seq}" if stale.seq is not None else f"position {stale.position} (no seq)",
                     stale.kind.value] + ([stale.ts] if stale.ts else [])
            where = f"{stale.file}:{stale.line}" if stale.file and stale.line else ""
            facts.append(Fact(label, " \u00b7 ".join(parts + ([where] if where else [])), "wide", tuple(parts),
                              where))
    facts.append(Fact("sink", inc.sink_outcome.value if inc.sink_outcome else "no effect",
                      f"sink-{inc.sink_outcome.value}" if inc.sink_outcome else ""))
    facts.append(Fact("verification", inc.verification, f"v-{inc.verification.replace('/', '')}"))
    facts.append(Fact("confidence", f"{inc.confidence.value}: {reported_by(f.reporter or '' for f in findings)}",
                      f"c-{inc.confidence.value}"))
    if inc.freshness_seconds is not None:
        facts.append(Fact("freshness", f"last stale event {_duration(inc.freshness_seconds)} "
                                       "before the newest event"))
    counts = inc.grades
    grades = [GradeCount(g.grade, counts[g.grade], g.meaning) for g in reversed(ordered()) if counts.get(g.grade)]
    effects = [EffectRow(e.effect_key, e.sink_outcome.value,
                         (f"verified at seq {e.verified_seq}" if e.verified_seq is not None
                          else f"verified at position {e.verified_position}") if e.verified else "unverified",
                         e.verified)
               for e in inc.effects]
    return IncidentCard(
        id=inc.id, workflow_key=inc.workflow_key, severity=inc.severity.value,
        meaning=spec(inc.severity).meaning, witness=inc.witness, response=inc.response, responses=actions(inc),
        facts=facts, effects=effects, grades=grades,
        finding_ids=[f.id for f in sorted(findings, key=lambda f: (f.place, f.grade.rank))],
        timeline=timeline, timeline_ref=ref, timeline_note=no_timeline)


def _group(inc: Incident, findings: list[Finding], has_card: bool,
           tokens: dict[str, dict[str, str]]) -> FindingGroup:
    rows = []
    for f in sorted(findings, key=lambda f: (f.place, f.grade.rank)):
        rows.append(FindingRow(
            id=f.id, grade=f.grade.value, workflow_key=f.workflow_key,
            seq=_opt(f.seq) if f.seq is not None else f"position {f.position}", kind=f.kind.value,
            owner=_short_owner(f.worker, f.epoch), current=_short_owner(f.current_worker, f.current_epoch),
            transition_seq=(_opt(f.transition_seq) if f.transition_seq is not None or f.transition_position is None
                            else f"position {f.transition_position}"), effect_key=f.effect_key or "",
            outcome=_finding_outcome(f, tokens.get(f.id)), ts=f.ts or ""))
    return FindingGroup(inc.id, inc.workflow_key, inc.severity.value,
                        f"{_owner(inc.displaced.worker, inc.displaced.epoch)} \u2192 "
                        f"{_owner(inc.current.worker, inc.current.epoch)}",
                        has_card, rows)


def _finding_outcome(f: Finding, tokens: dict[str, str] | None = None) -> str:
    parts = []
    if f.outcome is not None:
        parts.append(f.outcome.value)
    if f.receipt_place is not None and f.receipt_place != f.place:
        parts.append(f"receipt seq {f.receipt_seq}" if f.receipt_seq is not None
                     else f"receipt position {f.receipt_position}")
    if f.epochs:
        parts.append("epochs " + ", ".join(str(e) for e in f.epochs))
    if f.unstable_effect_key:
        parts.append(f"unstable effect key (step {f.step_id})")
    if tokens:  # auditor serve's attribution: which token delivered each event it rests on
        parts.append("delivered by token " + ", ".join(f"{name} ({role})" for role, name in tokens.items()))
    return "; ".join(parts)


def _workflow_rows(workflows: list[WorkflowSummary], timelines: dict[str, Timeline | None],
                   clean: list[Timeline], incidents: list[Incident]
                   ) -> tuple[list[WorkflowRow], str | None]:
    anchors = {k: t.anchor for k, t in timelines.items() if t is not None}
    anchors.update({t.workflow_key: t.anchor for t in clean})
    first_incident: dict[str, str] = {}
    for inc in incidents:
        first_incident.setdefault(inc.workflow_key, inc.id)
    ordered = sorted(workflows, key=lambda w: (-(w.severity.rank + 1) if w.severity else 0, w.workflow_key))
    rows = [WorkflowRow(w.workflow_key, _key_anchor("w", w.workflow_key),
                        w.severity.value if w.severity else "", w.findings, w.events, w.acquisitions,
                        w.handovers, w.clean_handovers, w.ordering, anchors.get(w.workflow_key),
                        first_incident.get(w.workflow_key))
            for w in ordered[:MAX_WORKFLOW_ROWS]]
    note = None
    if len(ordered) > MAX_WORKFLOW_ROWS:
        note = (f"The workflow index lists {MAX_WORKFLOW_ROWS:,} of {len(ordered):,} workflow keys "
                "(affected ones first); the JSON document has them all.")
    return rows, note


