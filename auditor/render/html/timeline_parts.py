"""The timeline's parts, each from the detector's facts: which events are drawn and where (a
sparse key's axis shortened), the mark of each event with its tooltip, the mandates' rules and
lifetimes, the stale windows, and the words of a place (``seq 5`` or ``position 5``)."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import timezone

from ...core.model import Event, Finding, Kind, SinkResult
from ...detect.batch.timeline import KeyTimeline
from ...explain.incidents import at
from ...rules import TWICE
from ...rules.grades import spec
from .format import _owner
from .timeline_shapes import (CHAR_W, GAP_SEQS, MARK, MAX_MARKS, PAD_X, PLOT_TARGET, RULE_BAND, STEP_MAX, STEP_MIN,
                              Band, Gap, Mark, Rule)


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


def _instant(t) -> str | None:
    """An instant field in the words of the JSON document: RFC 3339, UTC."""
    return None if t is None else t.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
assert set(_SYMBOL) == set(Kind)


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
