"""Stage 6, render: the lease-health chart of one dimension group, laid out in Python.

One strip per group, in seconds: every heartbeat gap as a dot (equal gaps stacked), the median
heartbeat interval ``H``, the timing threshold ``R*H+J`` and the shortest lease ``L``, and under the
axis a triangle for the heartbeat age at each takeover. An operator reads it in seconds: when the
lease line stands left of the threshold (or among the dots), an ordinary delay revokes a worker
that is still running; triangles just right of the lease line are owners reclaimed while their
heartbeat was merely late. The template only draws these shapes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...detect.lease.batch import MIN_GAPS
from ...detect.lease.facts import GroupHealth
from .format import _px
from .timeline import Tick

WIDTH, HEIGHT = 640, 116
X0, X1 = 44, 616          # the plot's left and right edge
BASE = 70                 # the dots' baseline
AXIS, TAKEOVER, TICKS = 78, 81, 106  # the axis, the takeover triangles' apex, the tick labels
DOT_R, STACK = 3.5, 7.0   # dot radius, vertical step between equal gaps
MAX_STACK = 6             # dots per column before they are counted instead of drawn
MAX_DOTS = 400            # dots per chart; the rest are counted in the note


@dataclass(frozen=True, slots=True)
class Dot:
    x: float
    y: float
    title: str


@dataclass(frozen=True, slots=True)
class Line:
    x: float
    label: str
    css: str          # "h", "threshold", "lease-risk" or "lease-safe"
    title: str
    label_y: float
    label_x: float    # the label beside the line, on its left near the right edge
    anchor: str       # the label's text-anchor: "start" or "end"


@dataclass(frozen=True, slots=True)
class LeaseChart:
    """One group's chart; ``summary`` is the sentence under it, ``note`` what was not drawn."""

    label: str
    at_risk: bool
    width: int
    height: int
    dots: tuple[Dot, ...]
    lines: tuple[Line, ...]
    ticks: tuple[Tick, ...]
    summary: str
    note: str | None
    takeovers: tuple[Dot, ...] = ()  # apex of each takeover's triangle, at its heartbeat age


def chart(g: GroupHealth, r: int) -> LeaseChart:
    m = g.metrics
    values = [v for v in (m.lease_min, g.threshold, m.heartbeat_interval_max) if v is not None]
    top = max(values + list(g.gaps[-1:]) + list(g.takeover_ages[-1:]) + [1.0])
    scale_max = _nice(top * 1.12)
    scale = (X1 - X0) / scale_max

    def x(v: float) -> float:
        return float(_px(X0 + max(0.0, v) * scale))

    dots, counted, skipped = [], {}, 0
    gaps = g.gaps
    step = max(1, math.ceil(len(gaps) / MAX_DOTS))
    for i, gap in enumerate(gaps):
        if i % step:
            skipped += 1
            continue
        col = round(x(gap) / (DOT_R * 2))
        n = counted.get(col, 0)
        counted[col] = n + 1
        if n >= MAX_STACK:
            skipped += 1
            continue
        dots.append(Dot(x(gap), BASE - n * STACK, f"heartbeat gap {gap:g} s"))
    lines = []

    def line(at: float, text: str, css: str, title: str, label_y: float) -> Line:
        near_end = x(at) > X1 - 110
        return Line(x(at), text, css, title, label_y, x(at) + (-3 if near_end else 3),
                    "end" if near_end else "start")

    if m.heartbeat_interval_median is not None:
        lines.append(line(m.heartbeat_interval_median, f"H {m.heartbeat_interval_median:g} s", "h",
                          "median heartbeat interval H", 14))
    if g.threshold is not None:
        lines.append(line(g.threshold, f"R\u00b7H+J {g.threshold:g} s", "threshold",
                          f"R*H+J = {r} x {m.heartbeat_interval_median:g} s + {m.heartbeat_jitter:g} s",
                          26))
    if m.lease_min is not None:
        lines.append(line(m.lease_min, f"L {m.lease_min:g} s", "lease-risk" if g.at_risk else "lease-safe",
                          "shortest lease granted (L)", 38))
    ticks = tuple(Tick(x(v), f"{v:g}") for v in _ticks(scale_max))
    if g.at_risk:
        summary = (f"At risk: the shortest lease ({m.lease_min:g} s) is not above R\u00b7H+J = {g.threshold:g} s "
                   f"over {m.heartbeat_gaps} heartbeat gaps; an ordinary delay revokes a worker that is still running.")
    elif g.threshold is not None and m.lease_min is not None:
        if m.heartbeat_gaps >= MIN_GAPS:
            summary = (f"Safe by the rule: the shortest lease ({m.lease_min:g} s) is above R\u00b7H+J = "
                       f"{g.threshold:g} s over {m.heartbeat_gaps} heartbeat gaps.")
        else:
            summary = (f"Too few heartbeat gaps to judge ({m.heartbeat_gaps}; the rule needs {MIN_GAPS}): "
                       f"the shortest lease ({m.lease_min:g} s) against R\u00b7H+J = {g.threshold:g} s so far.")
    else:
        summary = "Not enough evidence for the rule: it needs heartbeat gaps and lease lengths (lease_until)."
    if not g.at_risk and m.expired_leases:
        # Heartbeats that never came (lost on the way, or a worker that stopped) are not gaps, so a
        # lease can pass the rule and still expire: the takeovers say what the gaps cannot.
        age = m.heartbeat_age_at_takeover_max
        summary += (f" Yet {m.expired_leases} lease{'' if m.expired_leases == 1 else 's'} expired and "
                    f"{'was' if m.expired_leases == 1 else 'were'} taken over"
                    + ("" if age is None else f", the owner's last heartbeat then up to {age:g} s old (the triangles)")
                    + ": heartbeats that never came are not among the gaps.")
    ages = g.takeover_ages
    step = max(1, math.ceil(len(ages) / MAX_DOTS))
    takeovers = tuple(Dot(x(a), TAKEOVER, f"takeover: the owner's last heartbeat was {a:g} s old")
                      for a in ages[::step])
    skipped += len(ages) - len(takeovers)
    note = f"{skipped} of {len(gaps) + len(ages)} marks not drawn (stacked or sampled)" if skipped else None
    return LeaseChart(g.label, g.at_risk, WIDTH, HEIGHT, tuple(dots), tuple(lines), ticks, summary, note,
                      takeovers)


def _nice(v: float) -> float:
    """The next round number at or above ``v`` (1, 2 or 5 times a power of ten)."""
    p = 10 ** math.floor(math.log10(v))
    for f in (1, 2, 5, 10):
        if f * p >= v:
            return float(f * p)
    return float(10 * p)


def _ticks(top: float) -> list[float]:
    step = _nice(top / 5)
    return [i * step for i in range(int(top / step) + 1)]
