"""Stage 6, render: the HTML incident report, one self-contained file from one ``AuditResult``.

Python decides what goes on the page and where (the ``ReportContext`` below: counts, incident
cards, and timeline layout in pixels); the Jinja templates in ``templates/`` only draw it. Every
string reaches the page through autoescaping, including SVG ``<title>`` tooltips, so a workflow
key like ``<script>`` is shown as text. Prose about findings comes from the data (the incident's
witness and response, ``model.MEANINGS``); the page adds labels only.

Large logs stay readable and small: at most ``MAX_CARDS`` incident cards and ``MAX_TIMELINES``
timelines (most severe first), each timeline at most ``MAX_MARKS`` events chosen around the
evidence; whatever is left out is counted in a note on the page. The table of findings keeps every
finding, grouped by incident. Output is deterministic: no run timestamp, stable ordering.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from . import visible
from ..model import Event, Finding, Grade, Incident, Kind, SinkResult
from ..rules import MEANINGS
from ..result import AuditResult, WorkflowSummary

MAX_CARDS = 50  # incident cards; the rest are in the findings table, grouped by incident
MAX_TIMELINES = 25  # affected workflow keys drawn as timelines
MAX_CLEAN_TIMELINES = 10  # keys with only clean handovers, drawn as the control case
MAX_MARKS = 60  # events drawn per timeline
MAX_FETCH = 100_000  # events read from the store per timeline key
MAX_WORKFLOW_ROWS = 5_000  # rows in the workflow index
MAX_DIAGNOSTIC_ROWS = 500
BIG_TABLE = 400  # rows from which a table is rendered only when scrolled into view
ROW_PX = 27  # estimated row height, for the placeholder size of a table not yet rendered

# Timeline geometry, in SVG user units (pixels at 100 % zoom).
LABEL_W = 168
PAD_X = 22
RULE_BAND = 34  # room above the lanes for two rows of transition labels
LANE_H = 34
AXIS_H = 30
STEP_MIN, STEP_MAX, PLOT_TARGET = 15.0, 64.0, 880.0
MARK = 13  # mark size
TICK_MIN_GAP = 30.0  # minimum distance between seq labels on the axis
CHAR_W = 6.6  # average width of a label character, to keep rule labels inside the drawing

_TEMPLATES = Path(__file__).parent / "templates"
_CONFIDENCE_ORDER = ["high", "medium", "low"]


# The context: everything the template reads, documented field by field.


@dataclass(frozen=True, slots=True)
class GradeCount:
    grade: str  # Grade value; also the CSS class suffix
    count: int
    meaning: str  # model.MEANINGS


@dataclass(frozen=True, slots=True)
class Quarantined:
    file: str
    line: int
    reason: str


@dataclass(frozen=True, slots=True)
class InputView:
    files: list[str]
    lines_read: str  # numbers are preformatted with thousands separators
    events: str
    duplicates: str
    quarantined: str
    ordering: str  # "authoritative", "observed" or "mixed"
    quarantine: list[Quarantined]  # the first quarantined lines, in file order
    quarantine_more: int  # quarantined lines not listed


@dataclass(frozen=True, slots=True)
class Lane:
    y: float  # centre line of the lane
    top: float
    h: float
    label: str  # "epoch 17" or "verification"
    worker: str  # worker that acquired the epoch (shortened to fit)
    title: str  # full lane description for the tooltip
    role: str  # "displaced", "current", "owner" or "verifier": CSS class


@dataclass(frozen=True, slots=True)
class Mark:
    seq: int
    x: float  # top-left corner of the MARK x MARK symbol
    y: float
    symbol: str  # id of the <symbol> in the page's shared defs: s-acquired, s-progress, ...
    css: str  # "g-<grade>" for stale evidence, "stale" or "ok" otherwise
    title: str  # tooltip: every detail of the event (and its findings)


@dataclass(frozen=True, slots=True)
class Rule:
    x: float
    y1: float
    y2: float
    label: str  # "takeover seq 5", "clean handover seq 11", ...
    label_x: float
    label_y: float
    anchor: str  # text-anchor of the label: "start", or "end" when it would leave the drawing
    css: str  # "takeover", "clean" or "regression"
    title: str


@dataclass(frozen=True, slots=True)
class Band:
    """The stale window on the displaced lane: from the transition to the last stale event."""

    x: float
    y: float
    w: float
    h: float
    css: str
    title: str


@dataclass(frozen=True, slots=True)
class Join:
    """A line joining the commits of one effect key under two epochs (a double commit)."""

    x1: float
    y1: float
    x2: float
    y2: float
    title: str


@dataclass(frozen=True, slots=True)
class Tick:
    x: float
    label: str


@dataclass(frozen=True, slots=True)
class Gap:
    """Events left out between two drawn marks."""

    x: float
    title: str


@dataclass(frozen=True, slots=True)
class Timeline:
    anchor: str  # HTML id of the timeline
    workflow_key: str
    width: float
    height: float
    plot_left: float  # where the plot starts, right of the lane labels
    plot_right: float
    axis_y: float
    lanes: list[Lane]
    bands: list[Band]
    rules: list[Rule]
    joins: list[Join]
    marks: list[Mark]
    ticks: list[Tick]
    gaps: list[Gap]
    shown: int  # events drawn
    total: int  # events of the key
    note: str | None  # what was left out, when anything was
    clean: bool  # a control case: handovers, no finding


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


@dataclass(frozen=True, slots=True)
class IncidentCard:
    id: str
    workflow_key: str
    severity: str
    meaning: str  # MEANINGS of the severity
    witness: str  # Incident.witness, verbatim
    response: str  # Incident.response (RESPONSES of the severity), verbatim
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
    seq: int
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


# Rendering.


def _visible(value: Any) -> Any:
    """Every printed value: control characters (ANSI escapes, bidi overrides) shown as ``\\xNN``.

    Autoescaping already stops markup; this stops a log from hiding or reordering text on screen.
    Markup (macro output) was built from values that passed through here already.
    """
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value, keep_layout=True)
    return value


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The one Jinja environment of the package: autoescaped, strict about missing names."""
    env = Environment(
        loader=FileSystemLoader(str(_TEMPLATES)),
        autoescape=select_autoescape(enabled_extensions=("html", "j2", "svg"), default=True,
                                     default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_visible,
    )
    env.filters["num"] = _num
    env.filters["px"] = _px
    return env


def render_html(result: AuditResult) -> str:
    """The report of ``result`` as one self-contained HTML document (inline CSS and SVG, no network).

    Deterministic: the same result gives byte-identical output. Reads event rows from the result's
    store for the timelines (blocking); a result without a store renders without timelines.
    """
    return environment().get_template("report.html.j2").render(report=build_context(result))


def build_context(result: AuditResult) -> ReportContext:
    """Everything ``report.html.j2`` needs, computed from ``result`` (and its store's events)."""
    notes: list[str] = []
    # Most severe first; among equals, what still needs checking (unverified, surer evidence) first.
    incidents = sorted(result.incidents, key=lambda i: (
        -i.severity.rank, i.verification == "verified", _CONFIDENCE_ORDER.index(i.confidence.value),
        i.workflow_key, i.window_first_seq, i.displaced.epoch or 0))
    by_incident: dict[str, list[Finding]] = defaultdict(list)
    by_key: dict[str, list[Finding]] = defaultdict(list)
    for f in result.findings:
        by_incident[f.incident_id].append(f)
        by_key[f.workflow_key].append(f)
    workflows = {w.workflow_key: w for w in result.workflows}

    carded = incidents[:MAX_CARDS]
    if len(incidents) > len(carded):
        notes.append(f"Showing the {len(carded):,} most severe of {len(incidents):,} incidents as cards; "
                     f"the other {len(incidents) - len(carded):,} are listed with their findings in "
                     "the table of findings.")

    timeline_keys: list[str] = []
    for inc in carded:
        if inc.workflow_key not in timeline_keys:
            timeline_keys.append(inc.workflow_key)
    affected_keys = len({i.workflow_key for i in incidents})
    drawn = timeline_keys[:MAX_TIMELINES]
    if affected_keys > len(drawn):
        notes.append(f"Timelines are drawn for {len(drawn):,} of {affected_keys:,} affected workflow "
                     f"keys (those of the most severe incidents); the other {affected_keys - len(drawn):,} "
                     "keys are in the workflow index without a timeline.")
    timelines = {k: _timeline(result, k, by_key.get(k, []), workflows.get(k), clean=False)
                 for k in drawn}
    if result.store is None and drawn:
        notes.append("Timelines are left out: this result carries no event store.")

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

    clean_keys = [w.workflow_key for w in result.workflows if w.findings == 0 and w.clean_handovers > 0]
    clean_timelines = [_timeline(result, k, [], workflows[k], clean=True)
                       for k in clean_keys[:MAX_CLEAN_TIMELINES]]
    clean_timelines = [t for t in clean_timelines if t is not None]
    clean_note = None
    if len(clean_keys) > MAX_CLEAN_TIMELINES:
        clean_note = (f"Showing {MAX_CLEAN_TIMELINES} of {len(clean_keys):,} workflow keys whose handovers "
                      "were all clean.")

    groups = [_group(inc, by_incident[inc.id], i < len(carded)) for i, inc in enumerate(incidents)]

    wf_rows, workflows_note = _workflow_rows(result.workflows, timelines, clean_timelines, incidents)
    if workflows_note:
        notes.append(workflows_note)
    diagnostics = [DiagnosticRow(d.kind.value, d.workflow_key, _opt(d.seq), _opt(d.epoch), d.detail)
                   for d in result.diagnostics[:MAX_DIAGNOSTIC_ROWS]]
    diagnostics_note = None
    if len(result.diagnostics) > MAX_DIAGNOSTIC_ROWS:
        diagnostics_note = (f"Showing the first {MAX_DIAGNOSTIC_ROWS} of {len(result.diagnostics):,} "
                            "diagnostics; the JSON document has them all.")
        notes.append(diagnostics_note)

    counts = result.grade_counts()
    inp = result.input
    summary = result.summary()
    return ReportContext(
        title=_title(result),
        verdict=result.verdict,
        fail_on=result.fail_on.value,
        failing=len(result.failing),
        grade_counts=[GradeCount(g.value, counts.get(g.value, 0), MEANINGS[g]) for g in Grade],
        total_findings=len(result.findings),
        input=InputView(
            files=list(inp.files), lines_read=_num(inp.lines_read), events=_num(inp.events),
            duplicates=_num(inp.duplicates), quarantined=_num(inp.quarantined),
            ordering=result.ordering,
            quarantine=[Quarantined(q.file, q.line, q.reason) for q in inp.quarantine],
            quarantine_more=max(0, inp.quarantined - len(inp.quarantine))),
        stats=[Fact("workflows", _num(summary["workflows"])),
               Fact("acquisitions", _num(summary["acquisitions"])),
               Fact("handovers", _num(summary["handovers"])),
               Fact("clean handovers", _num(summary["clean_handovers"])),
               Fact("incidents", _num(len(incidents))),
               Fact("diagnostics", _num(len(result.diagnostics)))],
        cards=cards,
        clean_timelines=clean_timelines, clean_note=clean_note,
        groups=groups, findings_defer=_defer(len(result.findings) + len(groups)),
        workflows=wf_rows, workflows_note=workflows_note, workflows_defer=_defer(len(wf_rows)),
        diagnostics=diagnostics, diagnostics_note=diagnostics_note,
        grades=[GradeCount(g.value, counts.get(g.value, 0), MEANINGS[g]) for g in reversed(Grade)],
        notes=notes,
    )


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


def _owner(worker: str | None, epoch: int | None) -> str:
    if epoch is None:
        return worker or "unknown"
    return f"epoch {epoch} ({worker or 'unknown'})"


def _short_owner(worker: str | None, epoch: int | None) -> str:
    # A no-break space keeps "3 (worker-05)" on one line; the cell wraps at the arrow.
    return "?" if epoch is None else f"{epoch}\u00a0({worker or 'unknown'})"


def _card(inc: Incident, findings: list[Finding], timeline: Timeline | None, ref: str | None,
          no_timeline: str | None) -> IncidentCard:
    facts = [
        Fact("displaced owner", _owner(inc.displaced.worker, inc.displaced.epoch), "displaced"),
        Fact("current owner", _owner(inc.current.worker, inc.current.epoch), "current"),
        Fact("transition", f"seq {inc.transition_seq}" if inc.transition_seq is not None else "not seen"),
    ]
    window = (f"seq {inc.window_first_seq}" if inc.window_first_seq == inc.window_last_seq
              else f"seqs {inc.window_first_seq}\u2013{inc.window_last_seq}")
    if inc.window_seconds is not None and inc.window_seconds >= 0:
        window += f", until {_duration(inc.window_seconds)} after the transition"
    elif inc.window_seconds is not None:  # late arrival: the source clock disagrees with seq
        window += f", ts {_duration(-inc.window_seconds)} earlier than the transition's ts"
    facts.append(Fact("stale window", window))
    for label, ref in (("first stale", inc.first_stale), ("last stale", inc.last_stale)):
        if ref is not None:
            parts = [f"seq {ref.seq}", ref.kind.value] + ([ref.ts] if ref.ts else [])
            facts.append(Fact(label, " \u00b7 ".join(parts)))
    facts.append(Fact("sink", inc.sink_outcome.value if inc.sink_outcome else "no effect",
                      f"sink-{inc.sink_outcome.value}" if inc.sink_outcome else ""))
    facts.append(Fact("verification", inc.verification, f"v-{inc.verification.replace('/', '')}"))
    facts.append(Fact("confidence", inc.confidence.value, f"c-{inc.confidence.value}"))
    if inc.freshness_seconds is not None:
        facts.append(Fact("freshness", f"last stale event {_duration(inc.freshness_seconds)} "
                                       "before the newest event"))
    counts = inc.grades
    grades = [GradeCount(g.value, counts[g.value], MEANINGS[g])
              for g in reversed(Grade) if counts.get(g.value)]
    effects = [EffectRow(e.effect_key, e.sink_outcome.value,
                         f"verified at seq {e.verified_seq}" if e.verified else "unverified", e.verified)
               for e in inc.effects]
    return IncidentCard(
        id=inc.id, workflow_key=inc.workflow_key, severity=inc.severity.value,
        meaning=MEANINGS[inc.severity], witness=inc.witness, response=inc.response,
        facts=facts, effects=effects, grades=grades,
        finding_ids=[f.id for f in sorted(findings, key=lambda f: (f.seq, f.grade.rank))],
        timeline=timeline, timeline_ref=ref, timeline_note=no_timeline)


def _group(inc: Incident, findings: list[Finding], has_card: bool) -> FindingGroup:
    rows = []
    for f in sorted(findings, key=lambda f: (f.seq, f.grade.rank)):
        rows.append(FindingRow(
            id=f.id, grade=f.grade.value, workflow_key=f.workflow_key, seq=f.seq, kind=f.kind.value,
            owner=_short_owner(f.worker, f.epoch), current=_short_owner(f.current_worker, f.current_epoch),
            transition_seq=_opt(f.transition_seq), effect_key=f.effect_key or "",
            outcome=_finding_outcome(f), ts=f.ts or ""))
    return FindingGroup(inc.id, inc.workflow_key, inc.severity.value,
                        f"{_owner(inc.displaced.worker, inc.displaced.epoch)} \u2192 "
                        f"{_owner(inc.current.worker, inc.current.epoch)}",
                        has_card, rows)


def _finding_outcome(f: Finding) -> str:
    parts = []
    if f.outcome is not None:
        parts.append(f.outcome.value)
    if f.receipt_seq is not None and f.receipt_seq != f.seq:
        parts.append(f"receipt seq {f.receipt_seq}")
    if f.epochs:
        parts.append("epochs " + ", ".join(str(e) for e in f.epochs))
    if f.unstable_effect_key:
        parts.append(f"unstable effect key (step {f.step_id})")
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


# Timelines: lanes per epoch, marks along the authoritative sequence.


def _timeline(result: AuditResult, key: str, findings: list[Finding], wf: WorkflowSummary | None,
              clean: bool) -> Timeline | None:
    if result.store is None:
        return None
    total = wf.events if wf is not None else None
    events = result.timeline(key, MAX_FETCH if total is None or total > MAX_FETCH else None)
    if not events:
        return None
    total = max(total or 0, len(events))
    note_parts = []
    if total > len(events):
        note_parts.append(f"only the first {len(events):,} of {total:,} events of this key were read")

    at_seq: dict[int, list[Finding]] = defaultdict(list)
    for f in findings:
        at_seq[f.seq].append(f)
    index: dict[int, int] = {}
    for i, e in enumerate(events):
        index.setdefault(e.seq, i)
    acquirer: dict[int, str] = {}
    for e in events:
        if e.kind is Kind.LEASE_ACQUIRED and e.epoch is not None:
            acquirer.setdefault(e.epoch, e.worker)

    joins_by_seq = _double_commit_partners(events, findings)
    chosen = _choose(events, findings, joins_by_seq, index)
    shown = [events[i] for i in chosen]
    if len(shown) < len(events):
        note_parts.append(f"{len(shown):,} of {len(events):,} events drawn (every takeover and stale "
                          f"event first, then their neighbours); {len(events) - len(shown):,} left out, "
                          "marked \u2026 on the axis")
    note = ("Timeline capped: " + "; ".join(note_parts) + ".") if note_parts else None

    # Lanes: one per epoch (lowest on top), then one for verification events.
    epochs = sorted({e.epoch for e in shown if e.epoch is not None})
    displaced = {f.epoch for f in findings if f.grade is not Grade.DOUBLE_COMMIT}
    current = {f.current_epoch for f in findings if f.current_epoch is not None}
    lanes: list[Lane] = []
    lane_y: dict[int | None, float] = {}
    top = RULE_BAND
    for ep in epochs:
        worker = acquirer.get(ep)
        role = "displaced" if ep in displaced else "current" if ep in current else "owner"
        who = worker if worker is not None else next(e.worker for e in shown if e.epoch == ep)
        title = f"epoch {ep}: " + (f"acquired by {worker}" if worker is not None
                                   else f"never acquired in this log (evidence from {who})")
        lane_y[ep] = top + LANE_H / 2
        lanes.append(Lane(top + LANE_H / 2, top, LANE_H, f"epoch {ep}", _short(who, 24), title, role))
        top += LANE_H
    if any(e.epoch is None for e in shown):
        lane_y[None] = top + LANE_H / 2
        lanes.append(Lane(top + LANE_H / 2, top, LANE_H, "verification", "", "outcome_verified events",
                          "verifier"))
        top += LANE_H
    lanes_bottom = top

    n = len(shown)
    step = STEP_MAX if n <= 1 else min(STEP_MAX, max(STEP_MIN, PLOT_TARGET / (n - 1)))
    x0 = LABEL_W + PAD_X
    xpos = [x0 + i * step for i in range(n)]
    xs: dict[int, float] = {}  # by seq: the first drawn event of a seq (two share one in a conflict)
    for e, x in zip(shown, xpos):
        xs.setdefault(e.seq, x)
    plot_right = x0 + (n - 1) * step + PAD_X
    axis_y = lanes_bottom + 4

    highest_before = _highest_before(events)
    receipts: dict[int, list[Finding]] = defaultdict(list)
    for f in findings:
        if f.receipt_seq is not None and f.receipt_seq != f.seq:
            receipts[f.receipt_seq].append(f)
    marks = [_mark(e, x, lane_y[e.epoch], at_seq.get(e.seq, []), receipts.get(e.seq, []),
                   e.kind is not Kind.LEASE_ACQUIRED and e.epoch is not None
                   and highest_before[i] is not None and e.epoch < highest_before[i])
             for i, e, x in zip(chosen, shown, xpos)]

    rules = []
    row = 0
    named = {f.transition_seq for f in findings}
    highest: int | None = None
    for e in events:
        if e.kind is not Kind.LEASE_ACQUIRED or e.epoch is None:
            continue
        if highest is None:
            highest = e.epoch
            continue
        if e.epoch > highest:
            css, label = ("takeover", f"takeover seq {e.seq}") if e.seq in named else (
                "clean", f"clean handover seq {e.seq}")
            what = (f"epoch {e.epoch} ({e.worker}) acquired at seq {e.seq}, displacing epoch {highest}"
                    + ("" if e.seq in named else "; no evidence of the older epoch follows"))
            highest = e.epoch
        else:
            css, label = "regression", f"epoch regression seq {e.seq}"
            what = f"epoch {e.epoch} ({e.worker}) acquired at seq {e.seq} while epoch {highest} was current"
        if e.seq in xs:
            x = xs[e.seq]
            fits = x + 4 + len(label) * CHAR_W <= plot_right
            rules.append(Rule(x, RULE_BAND - 2, lanes_bottom, label, x + 4 if fits else x - 4,
                              12 if row % 2 == 0 else 26, "start" if fits else "end", css, what))
            row += 1

    bands = []
    for (epoch, tseq), fs in sorted(_windows(findings).items()):
        last = max(f.seq for f in fs)
        if epoch not in lane_y or last not in xs:
            continue
        start = xs.get(tseq) if tseq is not None else None
        if start is None:
            start = min(xs[f.seq] for f in fs if f.seq in xs)
        worst = max((f.grade for f in fs), key=lambda g: g.rank)
        bands.append(Band(start, lane_y[epoch] - LANE_H / 2 + 3, max(xs[last] - start, 0) + MARK / 2,
                          LANE_H - 6, f"g-{worst.value}",
                          f"stale window of epoch {epoch}: seq {min(f.seq for f in fs)} to {last}"))

    joins = []
    for seq, partners in sorted(joins_by_seq.items()):
        if seq not in xs:
            continue
        d = next(f for f in at_seq[seq] if f.grade is Grade.DOUBLE_COMMIT)
        for p in partners:
            if p.seq in xs:
                what = d.effect_key if not d.unstable_effect_key else f"step {d.step_id}"
                joins.append(Join(xs[p.seq], lane_y[p.epoch], xs[seq], lane_y[d.epoch],
                                  f"{what} committed under epoch {p.epoch} at seq {p.seq} "
                                  f"and under epoch {d.epoch} at seq {seq}"))

    ticks = []
    last_tick = -math.inf
    for e, x in zip(shown, xpos):
        if x - last_tick >= TICK_MIN_GAP:
            ticks.append(Tick(x, str(e.seq)))
            last_tick = x
    gaps = []
    for pos, (a, b) in enumerate(zip(chosen, chosen[1:])):
        if b - a > 1:
            left = events[a + 1].seq
            right = events[b - 1].seq
            gaps.append(Gap((xpos[pos] + xpos[pos + 1]) / 2,
                            f"{b - a - 1:,} events left out, seq {left} to {right}"))
    if chosen and chosen[-1] < len(events) - 1:
        gaps.append(Gap(plot_right - PAD_X / 2, f"{len(events) - 1 - chosen[-1]:,} later events left out"))
    if chosen and chosen[0] > 0:
        gaps.append(Gap(x0 - PAD_X / 2, f"{chosen[0]:,} earlier events left out"))

    width = max([plot_right] + [r.label_x + len(r.label) * CHAR_W for r in rules if r.anchor == "start"]) + 8
    return Timeline(
        anchor=_key_anchor("tl", key), workflow_key=key, width=width,
        height=axis_y + AXIS_H, plot_left=LABEL_W, plot_right=plot_right, axis_y=axis_y, lanes=lanes,
        bands=bands,        rules=rules, joins=joins, marks=marks, ticks=ticks, gaps=gaps, shown=len(shown), total=total,
        note=note, clean=clean)


def _highest_before(events: list[Event]) -> list[int | None]:
    """H(k, s) of SPEC section 3 at each event: the highest epoch acquired earlier in the key.

    Marks use it to draw ungraded stale evidence (a rejection receipt) as stale too."""
    out: list[int | None] = []
    highest: int | None = None
    for e in events:
        out.append(highest)
        if e.kind is Kind.LEASE_ACQUIRED and e.epoch is not None:
            highest = e.epoch if highest is None else max(highest, e.epoch)
    return out


def _windows(findings: list[Finding]) -> dict[tuple[int, int | None], list[Finding]]:
    out: dict[tuple[int, int | None], list[Finding]] = defaultdict(list)
    for f in findings:
        if f.grade is not Grade.DOUBLE_COMMIT:
            out[(f.epoch, f.transition_seq)].append(f)
    return out


def _double_commit_partners(events: list[Event], findings: list[Finding]) -> dict[int, list[Event]]:
    """For each double commit (by seq), the first commit of its effect key (or step) under each
    other epoch it names."""
    out: dict[int, list[Event]] = {}
    for d in findings:
        if d.grade is not Grade.DOUBLE_COMMIT:
            continue
        partners = []
        for ep in d.epochs:
            if ep == d.epoch:
                continue
            for e in events:
                same_step = d.unstable_effect_key and d.step_id is not None and e.step_id == d.step_id
                if (e.kind is Kind.EFFECT_COMMITTED and e.epoch == ep and e.seq != d.seq
                        and (e.effect_key == d.effect_key or same_step)):
                    partners.append(e)
                    break
        out[d.seq] = partners
    return out


def _choose(events: list[Event], findings: list[Finding], partners: dict[int, list[Event]],
            index: dict[int, int]) -> list[int]:
    """Indices of the events to draw: all when they fit; else the evidence (transitions, stale
    events, double-commit partners, receipts), the acquisitions of the epochs involved, and then
    the neighbours of the evidence, nearest first, so the incident sits in the middle."""
    if len(events) <= MAX_MARKS:
        return list(range(len(events)))
    focus: list[int] = []
    for f in findings:
        if f.transition_seq in index:
            focus.append(index[f.transition_seq])
    for f in sorted(findings, key=lambda f: (-f.grade.rank, f.seq)):
        focus.append(index[f.seq])
    for seq in sorted(partners):
        focus += [index[p.seq] for p in partners[seq]]
    for f in findings:
        if f.receipt_seq in index:
            focus.append(index[f.receipt_seq])
    acquisitions = [i for i, e in enumerate(events) if e.kind is Kind.LEASE_ACQUIRED]
    if not findings:  # a control case: the handovers are the evidence
        focus += acquisitions[1:]
    involved = {e for f in findings for e in (f.epoch, f.current_epoch, *f.epochs)}
    owners = [i for i in acquisitions if events[i].epoch in involved]

    chosen: dict[int, None] = {}  # insertion-ordered set
    for i in focus + owners:
        if len(chosen) >= MAX_MARKS:
            break
        chosen.setdefault(i)
    base = sorted(set(focus)) or [0]
    radius = 1
    while len(chosen) < MAX_MARKS and radius < len(events):
        for i in base:
            for j in (i - radius, i + radius):
                if 0 <= j < len(events) and len(chosen) < MAX_MARKS:
                    chosen.setdefault(j)
        radius += 1
    return sorted(chosen)


_SYMBOL = {Kind.LEASE_ACQUIRED: "s-acquired", Kind.PROGRESS: "s-progress",
           Kind.EFFECT_ATTEMPTED: "s-attempted", Kind.EFFECT_COMMITTED: "s-committed",
           Kind.OUTCOME_VERIFIED: "s-verified"}


def _mark(e: Event, x: float, y: float, findings: list[Finding], receipt_of: list[Finding],
          stale: bool) -> Mark:
    symbol = _SYMBOL[e.kind]
    if e.kind is Kind.EFFECT_ATTEMPTED and e.sink_result is SinkResult.REJECTED:
        symbol = "s-rejected"
    lines = [f"seq {e.seq} \u00b7 {e.kind.value}"
             + (f" \u00b7 sink_result {e.sink_result.value}" if e.sink_result else "")]
    lines.append(_owner(e.worker, e.epoch) if e.epoch is not None else f"worker {e.worker}")
    details = []
    if e.effect_key:
        details.append(f"effect key {e.effect_key}")
    if e.step_id:
        details.append(f"step {e.step_id}")
    if e.sink:
        details.append(f"sink {e.sink}")
    if e.reporter:
        details.append(f"reported by {e.reporter.value}")
    if details:
        lines.append(" \u00b7 ".join(details))
    if e.ts:
        lines.append(f"ts {e.ts}")
    if e.attrs:
        attrs = json.dumps(e.attrs, sort_keys=True, ensure_ascii=False, default=str)
        lines.append("attrs " + (attrs if len(attrs) <= 160 else attrs[:159] + "\u2026"))
    for f in sorted(findings, key=lambda f: -f.grade.rank):
        lines.append(f"{f.grade.value} ({f.id}): {MEANINGS[f.grade]}")
    for f in receipt_of:
        lines.append(f"rejection receipt of {f.grade.value} ({f.id}) at seq {f.seq}")
    if findings or receipt_of:
        css = "g-" + max((f.grade for f in findings + receipt_of), key=lambda g: g.rank).value
    else:
        css = "stale" if stale else "ok"
    return Mark(e.seq, x - MARK / 2, y - MARK / 2, symbol, css, "\n".join(lines))


# Small formatting helpers (also registered as template filters).


def _key_anchor(prefix: str, key: str) -> str:
    """A DOM id for a workflow key: keys hold any character, ids should not."""
    return f"{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def _short(text: str, limit: int = 20) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _opt(value: object) -> str:
    return "" if value is None else str(value)


def _num(value: int) -> str:
    return f"{value:,}"


def _px(value: float) -> str:
    """SVG coordinates with at most one decimal, so output does not depend on float noise."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _duration(seconds: float) -> str:
    neg = seconds < 0
    s = abs(seconds)
    if s < 60:
        text = f"{s:.3g} s"
    elif s < 3600:
        m, rest = divmod(round(s), 60)
        text = f"{m} min" + (f" {rest} s" if rest else "")
    else:
        h, rest = divmod(round(s) // 60, 60)
        text = f"{h} h" + (f" {rest} min" if rest else "")
    return ("-" if neg else "") + text
