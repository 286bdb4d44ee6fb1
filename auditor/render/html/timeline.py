"""The HTML report's timelines: one workflow key's events along its authoritative sequence.

Draws the facts the detector emitted (``detect.timeline.KeyTimeline``: stale evidence, takeovers,
clean handovers, regressions, double-commit partners) and decides only geometry and selection:
lanes per epoch, marks placed by seq (a run of seqs with no event of the key is shortened and
marked), and at most ``MAX_MARKS`` events chosen around the evidence; whatever is left out is
said in the timeline's note, with its seqs.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import timezone

from ...detect.batch.timeline import KeyTimeline
from ...explain.incidents import at
from ...core.model import Event, Finding, Kind, SinkResult
from ...rules import TWICE
from ...rules.grades import spec
from .format import _key_anchor, _owner, _short

MAX_MARKS = 60  # events drawn per timeline

# Timeline geometry, in SVG user units (pixels at 100 % zoom).
LABEL_W = 168
PAD_X = 22
RULE_BAND = 34  # room above the lanes for two rows of transition labels
LANE_H = 34
AXIS_H = 30
STEP_MIN, STEP_MAX, PLOT_TARGET = 15.0, 64.0, 880.0  # pixels per seq
GAP_SEQS = 3  # a longer run of seqs without a drawn event is drawn as this many, and marked
MARK = 13  # mark size
TICK_MIN_GAP = 30.0  # minimum distance between seq labels on the axis
CHAR_W = 6.6  # average width of a label character, to keep rule labels inside the drawing


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




def draw(tl: KeyTimeline, findings: list[Finding], clean: bool) -> Timeline:
    """The timeline of one key from its facts and the findings of that key."""
    key = tl.workflow_key
    events = [t.event for t in tl.events]
    total = max(tl.total, len(events))
    at_seq: dict[int, list[Finding]] = defaultdict(list)
    for f in findings:
        at_seq[f.place].append(f)
    word = _word(events)
    index: dict[int, int] = {}
    for i, e in enumerate(events):
        index.setdefault(e.seq, i)
    acquirer: dict[int, str] = {}
    for e in events:
        if e.kind is Kind.LEASE_ACQUIRED and e.epoch is not None:
            acquirer.setdefault(e.epoch, e.worker)

    chosen = _choose(events, findings, tl.partners, index)
    shown = [events[i] for i in chosen]
    note = _cut_note(events, chosen, total)

    # Lanes: one per epoch (lowest on top), then one for verification events.
    epochs = sorted({e.epoch for e in shown if e.epoch is not None})
    displaced = {f.epoch for f in findings if f.grade not in TWICE}
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
        if any(e.epoch is None and e.kind in _MANDATE_KINDS for e in shown):
            lanes.append(Lane(top + LANE_H / 2, top, LANE_H, "records", "", "events recorded outside an "
                              "owner epoch: mandates (authority_granted, authority_revoked), compensations, "
                              "outcome checks", "verifier"))
        else:
            lanes.append(Lane(top + LANE_H / 2, top, LANE_H, "verification", "", "outcome_verified events",
                              "verifier"))
        top += LANE_H
    lanes_bottom = top

    x0 = LABEL_W + PAD_X
    xpos, breaks = _spaced(shown, chosen, x0)
    xs: dict[int, float] = {}  # by seq: the first drawn event of a seq (two share one in a conflict)
    for e, x in zip(shown, xpos):
        xs.setdefault(e.seq, x)
    plot_right = (xpos[-1] if xpos else x0) + PAD_X
    axis_y = lanes_bottom + 4

    receipts: dict[int, list[Finding]] = defaultdict(list)
    for f in findings:
        if f.receipt_place is not None and f.receipt_place != f.place:
            receipts[f.receipt_place].append(f)
    marks = [_mark(tl.events[i].event, x, lane_y[tl.events[i].event.epoch], at_seq.get(e.seq, []),
                   receipts.get(e.seq, []), tl.events[i].stale)
             for i, e, x in zip(chosen, shown, xpos)]

    rules = []
    row = 0
    for t in tl.events:
        e, acq = t.event, t.acquisition
        if acq is None or acq.role == "first" or e.seq not in xs:
            continue
        if acq.role == "regression":
            css, label = "regression", f"epoch regression {_at(e)}"
            what = f"epoch {e.epoch} ({e.worker}) acquired at {_at(e)} while epoch {acq.displaced} was current"
        else:
            css = acq.role
            label = f"takeover {_at(e)}" if css == "takeover" else f"clean handover {_at(e)}"
            what = (f"epoch {e.epoch} ({e.worker}) acquired at {_at(e)}, displacing epoch {acq.displaced}"
                    + ("" if css == "takeover" else "; no evidence of the older epoch follows"))
        x = xs[e.seq]
        fits = x + 4 + len(label) * CHAR_W <= plot_right
        rules.append(Rule(x, RULE_BAND - 2, lanes_bottom, label, x + 4 if fits else x - 4,
                          12 if row % 2 == 0 else 26, "start" if fits else "end", css, what))
        row += 1

    mandate_rules, lives = _mandates(tl, shown, xs, plot_right, lanes_bottom, row)
    rules += mandate_rules
    bands = lives
    for (epoch, tseq), fs in sorted(_windows(findings).items()):
        last = max(f.place for f in fs)
        if epoch not in lane_y or last not in xs:
            continue
        start = xs.get(tseq) if tseq is not None else None
        if start is None:
            start = min(xs[f.place] for f in fs if f.place in xs)
        worst = max((f.grade for f in fs), key=lambda g: g.rank)
        bands.append(Band(start, lane_y[epoch] - LANE_H / 2 + 3, max(xs[last] - start, 0) + MARK / 2,
                          LANE_H - 6, f"g-{worst.value}",
                          f"stale window of epoch {epoch}: {word} {min(f.place for f in fs)} to {last}"))

    joins = []
    epoch_at = {e.seq: e.epoch for e in events}
    for seq, partners in sorted(tl.partners.items()):
        if seq not in xs:
            continue
        d = next(f for f in at_seq[seq] if f.grade in TWICE)
        for p in partners:
            if p in xs:
                what = d.effect_key if not d.unstable_effect_key else f"step {d.step_id}"
                joins.append(Join(xs[p], lane_y[epoch_at[p]], xs[seq], lane_y[d.epoch],
                                  f"{what} committed under epoch {epoch_at[p]} at {word} {p} "
                                  f"and under epoch {d.epoch} at {word} {seq}"))

    ticks = []
    last_tick = -math.inf
    for e, x in zip(shown, xpos):
        if x - last_tick >= TICK_MIN_GAP:
            ticks.append(Tick(x, str(e.seq)))
            last_tick = x
    gaps = list(breaks)
    for pos, (a, b) in enumerate(zip(chosen, chosen[1:])):
        if b - a > 1:
            gaps.append(Gap((xpos[pos] + xpos[pos + 1]) / 2,
                            f"{b - a - 1:,} events left out, {word} {events[a + 1].seq} to {events[b - 1].seq}"))
    if chosen and chosen[-1] < len(events) - 1:
        gaps.append(Gap(plot_right - PAD_X / 2, f"{len(events) - 1 - chosen[-1]:,} later events left out"))
    if chosen and chosen[0] > 0:
        gaps.append(Gap(x0 - PAD_X / 2, f"{chosen[0]:,} earlier events left out"))
    gaps.sort(key=lambda g: g.x)

    width = max([plot_right] + [r.label_x + len(r.label) * CHAR_W for r in rules if r.anchor == "start"]) + 8
    return Timeline(
        anchor=_key_anchor("tl", key), workflow_key=key, width=width,
        height=axis_y + AXIS_H, plot_left=LABEL_W, plot_right=plot_right, axis_y=axis_y, lanes=lanes,
        bands=bands, rules=rules, joins=joins, marks=marks, ticks=ticks, gaps=gaps, shown=len(shown),
        total=total, note=note, clean=clean)


def _word(events: list[Event]) -> str:
    """How a key's places are named: ``seq``, or ``position`` in a key ordered by observation (SPEC
    rev 3: a timeline never shows an invented seq). A timeline's events are all one or the other."""
    return "position" if events and events[0].observed else "seq"


def _at(e: Event) -> str:
    """An event's place in words: ``seq 5`` or ``position 5``."""
    return f"{'position' if e.observed else 'seq'} {e.seq}"


def _mandate(authority_id: str | None) -> str:
    """A mandate's name: its authority_id, or the key's unnamed mandate (a grant without one)."""
    return authority_id if authority_id is not None else "unnamed mandate"


def _spaced(shown: list[Event], chosen: list[int], x0: float) -> tuple[list[float], list[Gap]]:
    """x of each drawn event, spaced by seq: one step per seq, a run of more than ``GAP_SEQS``
    seqs between two drawn events shortened to ``GAP_SEQS`` steps (and, when no event was left out
    between them, returned as a marked gap), so a sparse key does not stretch the page. Events
    sharing a seq share an x."""
    units = [0.0]
    for a, b in zip(shown, shown[1:]):
        units.append(units[-1] + min(max(b.seq - a.seq, 0), GAP_SEQS))
    span = units[-1]
    step = STEP_MAX if span <= 0 else min(STEP_MAX, max(STEP_MIN, PLOT_TARGET / span))
    xpos = [x0 + u * step for u in units]
    breaks = [Gap((xpos[i] + xpos[i + 1]) / 2,
                  f"{_word(shown)}s {a.seq + 1} to {b.seq - 1} hold no event of this key (axis shortened)")
              for i, (a, b) in enumerate(zip(shown, shown[1:]))
              if b.seq - a.seq > GAP_SEQS and chosen[i + 1] - chosen[i] == 1]
    return xpos, breaks


def _cut_note(events: list[Event], chosen: list[int], total: int) -> str | None:
    """What the timeline leaves out, in events and seqs: never read (past the fetch limit), or
    read but not drawn (past ``MAX_MARKS``)."""
    parts = []
    if total > len(events):
        after = f" (after {_at(events[-1])})" if events else ""
        parts.append(f"only the first {len(events):,} of {total:,} events of this key were read; "
                     f"the last {total - len(events):,}{after} are not drawn")
    if len(chosen) < len(events):
        runs, start = [], None
        kept = set(chosen)
        for i, e in enumerate(events):
            if i in kept:
                if start is not None:
                    runs.append((start, i - 1))
                    start = None
            elif start is None:
                start = i
        if start is not None:
            runs.append((start, len(events) - 1))
        seqs = ", ".join(str(events[a].seq) if a == b else f"{events[a].seq}\u2013{events[b].seq}"
                         for a, b in runs[:8]) + (", \u2026" if len(runs) > 8 else "")
        parts.append(f"{len(chosen):,} of {len(events):,} events drawn (every takeover and stale event "
                     f"first, then their neighbours); {len(events) - len(chosen):,} left out "
                     f"({_word(events)}s {seqs}), "
                     "marked \u2026 on the axis")
    return ("Timeline capped: " + "; ".join(parts) + ".") if parts else None


def _windows(findings: list[Finding]) -> dict[tuple[int, int | None], list[Finding]]:
    out: dict[tuple[int, int | None], list[Finding]] = defaultdict(list)
    for f in findings:
        if f.grade not in TWICE:
            out[(f.epoch, f.transition_place)].append(f)
    return out


def _choose(events: list[Event], findings: list[Finding], partners: dict[int, tuple[int, ...]],
            index: dict[int, int]) -> list[int]:
    """Indices of the events to draw: all when they fit; else the evidence (transitions, stale
    events, double-commit partners, receipts), the acquisitions of the epochs involved, and then
    the neighbours of the evidence, nearest first, so the incident sits in the middle."""
    if len(events) <= MAX_MARKS:
        return list(range(len(events)))
    focus: list[int] = []
    for f in findings:
        if f.transition_place in index:
            focus.append(index[f.transition_place])
    for f in sorted(findings, key=lambda f: (-f.grade.rank, f.place)):
        if f.place in index:
            focus.append(index[f.place])
    for seq in sorted(partners):
        focus += [index[p] for p in partners[seq] if p in index]
    for f in findings:
        if f.receipt_place in index:
            focus.append(index[f.receipt_place])
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



_MANDATE_KINDS = frozenset({Kind.AUTHORITY_GRANTED, Kind.AUTHORITY_REVOKED, Kind.EFFECT_COMPENSATED})
_MANDATE_RULES = {Kind.AUTHORITY_GRANTED: "mandate", Kind.AUTHORITY_REVOKED: "mandate-end",
                  Kind.RESUMED: "resume", Kind.REVALIDATED: "mandate"}


def _mandates(tl: KeyTimeline, shown: list[Event], xs: dict[int, float], plot_right: float,
              lanes_bottom: float, row: int) -> tuple[list[Rule], list[Band]]:
    """SPEC section 8 on the timeline: a rule at each grant, revocation, resume and revalidation,
    one at the first drawn event past a mandate's expiry, and each mandate's lifetime as a band
    along the top, from its grant to its revocation or expiry (or the end of the drawing)."""
    from ...core.instants import when

    rules, bands, ends, grants = [], [], {}, []
    for t in tl.events:
        e = t.event
        css = _MANDATE_RULES.get(e.kind)
        if css is None or e.seq not in xs:
            continue
        if e.kind is Kind.REVALIDATED:
            label = f"revalidated {e.decision or '(no readable decision)'} {_at(e)}"
            css = "mandate" if e.decision == "continue" else "mandate-end"
        elif e.kind is Kind.RESUMED:
            label = f"resumed {_at(e)}"
        else:
            verb = "granted" if e.kind is Kind.AUTHORITY_GRANTED else "revoked"
            label = f"{_mandate(e.authority_id)} {verb} {_at(e)}"
            if verb == "granted":
                grants.append(e)
            elif e.authority_id is None:  # revokes every mandate granted before it (SPEC rev 3)
                for g in grants:
                    ends.setdefault(g.authority_id, xs[e.seq])
            else:
                ends.setdefault(e.authority_id, xs[e.seq])
        what = label + (f", expires {_instant(e.expires_at)}" if e.expires_at else "") + (
            f", scope {e.scope}" if e.scope else "")
        rules.append(_rule(xs[e.seq], label, css, what, plot_right, lanes_bottom, row))
        row += 1
    for g in grants:
        if g.expires_at is None:
            continue
        past = next((e for e in shown if e.seq > g.seq and (t := when(e.ts)) is not None and t > g.expires_at),
                    None)
        if past is not None and past.seq in xs:
            x = xs[past.seq] - 4
            label = f"{_mandate(g.authority_id)} expired {_instant(g.expires_at)}"
            rules.append(_rule(x, label, "mandate-end", label + f" (before the event at {_at(past)})",
                               plot_right, lanes_bottom, row))
            row += 1
            ends.setdefault(g.authority_id, x)
    for g in grants:
        start = xs[g.seq]
        end = ends.get(g.authority_id, plot_right - PAD_X / 2)
        if end > start:
            bands.append(Band(start, RULE_BAND - 8, end - start, 4, "mandate-life",
                              f"lifetime of {_mandate(g.authority_id)}: from its grant at {_at(g)}"))
    return rules, bands


def _rule(x: float, label: str, css: str, what: str, plot_right: float, lanes_bottom: float, row: int) -> Rule:
    fits = x + 4 + len(label) * CHAR_W <= plot_right
    return Rule(x, RULE_BAND - 2, lanes_bottom, label, x + 4 if fits else x - 4,
                12 if row % 2 == 0 else 26, "start" if fits else "end", css, what)


_SYMBOL = {Kind.LEASE_ACQUIRED: "s-acquired", Kind.PROGRESS: "s-progress",
           Kind.EFFECT_ATTEMPTED: "s-attempted", Kind.EFFECT_COMMITTED: "s-committed",
           Kind.OUTCOME_VERIFIED: "s-verified", Kind.AUTHORITY_GRANTED: "s-authority",
           Kind.AUTHORITY_REVOKED: "s-authority", Kind.REVALIDATED: "s-authority",
           Kind.RESUMED: "s-resumed", Kind.EFFECT_COMPENSATED: "s-compensated"}
assert set(_SYMBOL) == set(Kind)


def _instant(t) -> str | None:
    """An instant field in the words of the JSON document: RFC 3339, UTC."""
    return None if t is None else t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def _mark(e: Event, x: float, y: float, findings: list[Finding], receipt_of: list[Finding],
          stale: bool) -> Mark:
    symbol = _SYMBOL[e.kind]
    if e.kind is Kind.EFFECT_ATTEMPTED and e.sink_result is SinkResult.REJECTED:
        symbol = "s-rejected"
    where = f"position {e.seq} (no seq)" if e.observed else _at(e)
    lines = [f"{where} \u00b7 {e.kind.value}"
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
        details.append(f"reported by {e.reporter}")
    if details:
        lines.append(" \u00b7 ".join(details))
    optional = [f"{name} {value}" for name, value in (
        ("authority", e.authority_id), ("expires", _instant(e.expires_at)), ("decision", e.decision),
        ("scope", e.scope), ("lease until", _instant(e.lease_until)), ("heartbeat", e.heartbeat),
        ("reason", e.reason)) if value is not None]
    if optional:
        lines.append(" \u00b7 ".join(optional))
    if e.ts:
        lines.append(f"ts {e.ts}")
    if e.attrs:
        attrs = json.dumps(e.attrs, sort_keys=True, ensure_ascii=False, default=str)
        lines.append("attrs " + (attrs if len(attrs) <= 160 else attrs[:159] + "\u2026"))
    for f in sorted(findings, key=lambda f: -f.grade.rank):
        lines.append(f"{f.grade.value} ({f.id}): {spec(f.grade).meaning}")
    for f in receipt_of:
        lines.append(f"rejection receipt of {f.grade.value} ({f.id}) at {at(f)}")
    if findings or receipt_of:
        css = "g-" + max((f.grade for f in findings + receipt_of), key=lambda g: g.rank).value
    else:
        css = "stale" if stale else "ok"
    return Mark(e.seq, x - MARK / 2, y - MARK / 2, symbol, css, "\n".join(lines))


