"""The grades, declared once: each one's place in the order, what it means, what to do about it,
how a witness sentence ends when nothing more specific is known, and how it is drawn.

``core.model.Grade`` names the grades (their values, in order); this registry says everything
else about them, and every renderer reads it (the HTML report's colours and selectors, the
terminal's styles, the Markdown and JUnit words). tests/rules/test_grades.py fails when a grade is
missing from it, and shows that a grade added here reaches every renderer without other edits.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ..core.model import Grade


@dataclass(frozen=True, slots=True)
class GradeSpec:
    """One grade: its value (``Grade``'s), what it means, the response, the witness's default
    ending, the report's colour (a CSS colour) and the terminal's style (a rich style)."""

    grade: str
    meaning: str
    response: str
    witness: str
    colour: str
    terminal: str


_TO_A_HUMAN = "Hand the run to a human with the delta between the original and the current intent; never retry it; "

#: Least to most severe (SPEC sections 3 and 8).
_DECLARED = (
    GradeSpec("stale_activity", "a displaced process is still running",
              "Stop or quarantine the old worker; verify it emits nothing more.",
              "a displaced process is still running", "#4d7c0f", "yellow"),
    GradeSpec("rejected_attempt", "the fence held: near miss",
              "Keep the rejection receipt; find why the lease was lost; check the current owner still progresses.",
              "the sink rejected it: the fence held", "#2563eb", "cyan"),
    GradeSpec("compensated", "the effect happened twice; one application was reversed",
              "Verify the compensation: check at the destination that exactly one application of the effect "
              "remains.", "a compensation record reversed one application (verify it)", "#0d9488", "blue"),
    GradeSpec("stale_attempt", "it may or may not have taken effect",
              "Query the destination by effect key; treat as a possible stale commit.",
              "no rejection is recorded: it may have taken effect", "#b45309", "magenta"),
    GradeSpec("unauthorized_attempt", "an effect was attempted without a valid mandate",
              _TO_A_HUMAN + "query the destination by effect key.",
              "no rejection is recorded: it may have taken effect without a valid mandate", "#db2777",
              "bright_magenta"),
    GradeSpec("stale_commit", "the fence failed or did not exist: correctness incident",
              "Freeze further effects for this key; check the result; decide whether compensation is safe.",
              "a displaced owner changed the outside world", "#dc2626", "red"),
    GradeSpec("unauthorized_commit", "an effect took place without a valid mandate",
              _TO_A_HUMAN + "decide whether the effect must be reversed.",
              "it took effect without a valid mandate", "#7f1d1d", "bold bright_red"),
    GradeSpec("double_commit", "the effect happened twice",
              "Treat the outcome as uncertain until an outcome_verified predicate or a human confirms it; "
              "never auto-resolve by retrying the current owner.", "the effect happened twice", "#7c3aed",
              "bold red"),
)

#: Every grade's spec, by value, least severe first (a dict: ``Grade`` members hash as their values).
GRADES: dict[str, GradeSpec] = {s.grade: s for s in _DECLARED}
assert list(GRADES) == [g.value for g in Grade], "core.model.Grade and rules.grades must declare the same grades"

#: What each grade asks the operator to do, and what it means: read by explain and every renderer.
RESPONSES: dict[Grade, str] = {g: GRADES[g].response for g in Grade}
MEANINGS: dict[Grade, str] = {g: GRADES[g].meaning for g in Grade}


def spec(grade: str) -> GradeSpec:
    """The spec of ``grade`` (a ``Grade``, or a grade's value)."""
    return GRADES[grade]


def ordered() -> list[GradeSpec]:
    """Every spec, least severe first."""
    return list(GRADES.values())


@contextmanager
def extended(extra: GradeSpec, after: str) -> Iterator[None]:
    """``GRADES`` with ``extra`` declared right after grade ``after``, for as long as the block
    runs: how a test shows that every renderer draws a grade from this registry alone."""
    saved = dict(GRADES)
    items = list(saved.items())
    at = [k for k, _ in items].index(after) + 1
    GRADES.clear()
    GRADES.update(items[:at] + [(extra.grade, extra)] + items[at:])
    try:
        yield
    finally:
        GRADES.clear()
        GRADES.update(saved)
