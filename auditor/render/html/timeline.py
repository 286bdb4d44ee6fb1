"""The HTML report's timelines: one workflow key's events along its authoritative sequence.

Draws the facts the detector emitted (``detect.timeline.KeyTimeline``: stale evidence, takeovers,
clean handovers, regressions, double-commit partners) and decides only geometry and selection:
lanes per epoch, marks placed by seq (a run of seqs with no event of the key is shortened and
marked), and at most ``MAX_MARKS`` events chosen around the evidence; whatever is left out is
said in the timeline's note, with its seqs. The shapes are in ``timeline_shapes``, the parts
(selection, marks, mandates) in ``timeline_parts``.
"""

from __future__ import annotations

import math
from collections import defaultdict

from ...core.model import Event, Finding, Kind
from ...detect.batch.timeline import KeyTimeline
from ...rules import TWICE
from .format import _key_anchor, _short
from .timeline_parts import (_MANDATE_KINDS, _at, _choose, _cut_note, _mandates, _mark, _spaced, _windows,
                             _word)
from .timeline_shapes import (AXIS_H, CHAR_W, LABEL_W, LANE_H, MARK, MAX_MARKS, PAD_X, RULE_BAND, TICK_MIN_GAP,
                              Band, Gap, Join, Lane, Rule, Tick, Timeline)

__all__ = ["draw", "Timeline", "MARK", "MAX_MARKS", "Tick"]


def draw(tl: KeyTimeline, findings: list[Finding], clean: bool) -> Timeline:
    """The timeline of one key from its facts and the findings of that key."""
    events = [t.event for t in tl.events]
    total = max(tl.total, len(events))
    at_seq: dict[int, list[Finding]] = defaultdict(list)
    for f in findings:
        at_seq[f.place].append(f)
    word = _word(events)
    index: dict[int, int] = {}
    for i, e in enumerate(events):
        index.setdefault(e.seq, i)

    chosen = _choose(events, findings, tl.partners, index)
    shown = [events[i] for i in chosen]
    lanes, lane_y, lanes_bottom = _lanes(events, shown, findings)

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

    rules = _handover_rules(tl, xs, plot_right, lanes_bottom)
    mandate_rules, bands = _mandates(tl, shown, xs, plot_right, lanes_bottom, len(rules))
    rules += mandate_rules
    bands += _stale_windows(findings, lane_y, xs, word)
    joins = _joins(tl, events, at_seq, xs, lane_y, word)
    ticks, gaps = _axis(events, shown, chosen, xpos, breaks, x0, plot_right, word)

    width = max([plot_right] + [r.label_x + len(r.label) * CHAR_W for r in rules if r.anchor == "start"]) + 8
    return Timeline(
        anchor=_key_anchor("tl", tl.workflow_key), workflow_key=tl.workflow_key, width=width,
        height=axis_y + AXIS_H, plot_left=LABEL_W, plot_right=plot_right, axis_y=axis_y, lanes=lanes,
        bands=bands, rules=rules, joins=joins, marks=marks, ticks=ticks, gaps=gaps, shown=len(shown),
        total=total, note=_cut_note(events, chosen, total), clean=clean, axis=word)


def _lanes(events: list[Event], shown: list[Event], findings: list[Finding]
           ) -> tuple[list[Lane], dict[int | None, float], float]:
    """One lane per epoch drawn (lowest on top), then one for events outside an owner epoch; each
    lane's centre line by epoch, and where the lanes end."""
    acquirer: dict[int, str] = {}
    for e in events:
        if e.kind is Kind.LEASE_ACQUIRED and e.epoch is not None:
            acquirer.setdefault(e.epoch, e.worker)
    displaced = {f.epoch for f in findings if f.grade not in TWICE}
    current = {f.current_epoch for f in findings if f.current_epoch is not None}
    lanes: list[Lane] = []
    lane_y: dict[int | None, float] = {}
    top = RULE_BAND
    for ep in sorted({e.epoch for e in shown if e.epoch is not None}):
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
    return lanes, lane_y, top


def _handover_rules(tl: KeyTimeline, xs: dict[int, float], plot_right: float, lanes_bottom: float) -> list[Rule]:
    """A rule at every acquisition after the first that is drawn: a takeover, a clean handover or
    an epoch regression, labels alternating between two rows."""
    rules = []
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
                          12 if len(rules) % 2 == 0 else 26, "start" if fits else "end", css, what))
    return rules


def _stale_windows(findings: list[Finding], lane_y: dict[int | None, float], xs: dict[int, float],
                   word: str) -> list[Band]:
    """A band over each displaced epoch's stale evidence, from its takeover, in its worst grade's colour."""
    bands = []
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
    return bands


def _joins(tl: KeyTimeline, events: list[Event], at_seq: dict[int, list[Finding]], xs: dict[int, float],
           lane_y: dict[int | None, float], word: str) -> list[Join]:
    """A line from each double commit to the earlier commits it repeats."""
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
    return joins


def _axis(events: list[Event], shown: list[Event], chosen: list[int], xpos: list[float], breaks: list[Gap],
          x0: float, plot_right: float, word: str) -> tuple[list[Tick], list[Gap]]:
    """The axis: ticks far enough apart to read, and a gap wherever events were left out."""
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
    return ticks, gaps
