"""The human summary printed after an audit: verdict, accounting, counts by grade, and the
incidents by severity with their witness sentences.

Everything taken from the input (workflow keys, workers, effect keys, reasons) passes through
``clean()``, so an ANSI escape or a control character in a log cannot drive the terminal; rich
markup is never interpreted in data (``Text`` objects, not markup strings).
"""

from __future__ import annotations

from typing import IO

from rich.console import Console
from rich.text import Text

from . import visible
from ..model import Grade, Incident
from ..result import AuditResult

GRADE_STYLE = {
    Grade.STALE_ACTIVITY: "yellow", Grade.REJECTED_ATTEMPT: "cyan", Grade.STALE_ATTEMPT: "magenta",
    Grade.STALE_COMMIT: "red", Grade.DOUBLE_COMMIT: "bold red",
}
MAX_INCIDENTS = 20
MAX_QUARANTINE = 5


def clean(value: object) -> str:
    """Show control characters (ANSI escapes included) as visible ``\\xNN`` escapes."""
    return visible(value)


def summary_lines(result: AuditResult) -> list[Text]:
    inp = result.input
    s = result.summary()
    out: list[Text] = []
    verdict = Text("split-brain audit: ")
    verdict.append(result.verdict.upper(), "bold red" if result.verdict == "fail" else "bold green")
    verdict.append(f"  ({len(result.incidents)} incident{'s' * (len(result.incidents) != 1)}, "
                   f"{len(result.failing)} finding{'s' * (len(result.failing) != 1)} at or above "
                   f"{result.fail_on.value})")
    out.append(verdict)
    out.append(Text(
        f"input: {inp.lines_read} lines read = {inp.events} events + {inp.duplicates} duplicates + "
        f"{inp.quarantined} quarantined; {len(inp.files)} file{'s' * (len(inp.files) != 1)}; "
        f"ordering {result.ordering}"))
    out.append(Text(
        f"workflows: {s['workflows']}, acquisitions {s['acquisitions']}, handovers {s['handovers']} "
        f"({s['clean_handovers']} clean)"))
    counts = Text("findings: ")
    graded = [(g, s["findings"].get(g.value, 0)) for g in reversed(Grade)]
    if not any(n for _, n in graded):
        counts.append("none")
    for i, (g, n) in enumerate((g, n) for g, n in graded if n):
        if i:
            counts.append(", ")
        counts.append(f"{g.value} {n}", GRADE_STYLE[g])
    out.append(counts)
    if result.diagnostics:
        kinds: dict[str, int] = {}
        for d in result.diagnostics:
            kinds[d.kind.value] = kinds.get(d.kind.value, 0) + 1
        out.append(Text("diagnostics: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))))

    ranked = sorted(result.incidents, key=lambda i: (-i.severity.rank, i.workflow_key, i.window_first_seq))
    if ranked:
        out.append(Text(""))
        out.append(Text("incidents, most severe first:", "bold"))
    for inc in ranked[:MAX_INCIDENTS]:
        out.extend(_incident(inc))
    if len(ranked) > MAX_INCIDENTS:
        out.append(Text(f"... and {len(ranked) - MAX_INCIDENTS} more incidents (see --json or --html)"))

    if inp.skipped:
        first = inp.skipped[0]
        out.append(Text(f"skipped: {len(inp.skipped)} path{'s' * (len(inp.skipped) != 1)} that "
                        f"{'are' if len(inp.skipped) != 1 else 'is'} not a file to read (first: "
                        f"{clean(first.path)}: {clean(first.reason)})"))
    if inp.quarantine:
        out.append(Text(""))
        out.append(Text(f"quarantined lines (first {min(MAX_QUARANTINE, len(inp.quarantine))} "
                        f"of {inp.quarantined}):", "bold"))
        for q in inp.quarantine[:MAX_QUARANTINE]:
            out.append(Text(f"  {clean(q.file)}:{q.line}: {clean(q.reason)}"))
    return out


def _incident(inc: Incident) -> list[Text]:
    head = Text("  ")
    head.append(f"[{inc.severity.value}]", GRADE_STYLE[inc.severity])
    head.append(f" {clean(inc.workflow_key)}  displaced epoch {inc.displaced.epoch} "
                f"({clean(inc.displaced.worker)}) -> current epoch {inc.current.epoch} "
                f"({clean(inc.current.worker)})")
    if inc.transition_seq is not None:
        head.append(f", transition at seq {inc.transition_seq}")
    lines = [head, Text(f"    {clean(inc.witness)}")]
    window = f"seq {inc.window_first_seq}-{inc.window_last_seq}"
    if inc.window_seconds is not None and inc.window_seconds >= 0:
        window += f", {inc.window_seconds:g}s after the transition"
    elif inc.window_seconds is not None:  # buffered evidence: seq says after, the worker's clock before
        window += f", ts {-inc.window_seconds:g}s earlier than the transition's ts"
    effects = "; ".join(f"{clean(e.effect_key)} {e.sink_outcome.value}, "
                        f"{'verified' if e.verified else 'unverified'}" for e in inc.effects)
    lines.append(Text(f"    window {window}; effects: {effects or 'none'}; confidence "
                      f"{inc.confidence.value}"))
    lines.append(Text(f"    do: {inc.response}", "dim"))
    return lines


def print_summary(result: AuditResult, file: IO[str] | None = None) -> None:
    console = Console(file=file, highlight=False, soft_wrap=True)
    for line in summary_lines(result):
        console.print(line)
