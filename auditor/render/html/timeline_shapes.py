"""What a timeline is made of, as data the template draws (``_timeline.html.j2``): lanes, marks,
rules, bands, joins, ticks and gaps, with the geometry's constants."""

from __future__ import annotations

from dataclasses import dataclass

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
    axis: str = "seq"  # what the places are: "seq", or "position" in a key ordered by observation


