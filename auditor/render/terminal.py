"""The human summary printed after an audit: verdict, accounting, counts by grade, and the
incidents by severity with their witness sentences.

Everything taken from the input (workflow keys, workers, effect keys, reasons) passes through
``clean()``, so an ANSI escape or a control character in a log cannot drive the terminal; rich
markup is never interpreted in data (``Text`` objects, not markup strings).
"""

from __future__ import annotations

from typing import IO, TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from . import visible
from ..core.model import DiagnosticKind, Incident, Verdict
from ..rules.grades import ordered, spec
from ..explain.incidents import severity, top
from ..explain.result import AuditResult
from .words import (accounting, actions, confidence_levels, ignored_entries, incident_facts, lease_head, lease_row,
                    lost_head, lost_items, num, owners, plural, reporters, transition)

if TYPE_CHECKING:
    from ..explain.expect import Comparison
    from ..explain.result import InputSummary

VERDICT_STYLE = {Verdict.PASS: "bold green", Verdict.FAIL: "bold red", Verdict.INCOMPLETE: "bold yellow"}
MAX_INCIDENTS = 20
MAX_QUARANTINE = 5
MAX_LEASE_GROUPS = 5  # the riskiest groups in the summary; the JSON and HTML reports have them all


def clean(value: object) -> str:
    """Show control characters (ANSI escapes included) as visible ``\\xNN`` escapes."""
    return visible(value)


def summary_lines(result: AuditResult, expect: str | None = None) -> list[Text]:
    """The summary; with ``expect`` (the --expect file) the verdict line says that the exit code
    reports the comparison printed after it, not this verdict (issue 45)."""
    inp = result.input
    s = result.summary()
    out: list[Text] = []
    verdict = Text("split-brain audit: ")
    verdict.append(result.verdict.value.upper(), VERDICT_STYLE[result.verdict])
    if result.verdict is Verdict.INCOMPLETE:
        verdict.append(f"  (no finding at or above {result.fail_on.value}, but "
                       f"{plural(result.lost, 'line')} lost: a pass cannot be claimed)")
    else:
        verdict.append(f"  ({plural(len(result.incidents), 'incident')}, "
                       f"{plural(result.failing_count, 'finding')} at or above {result.fail_on.value})")
    if expect is not None:
        verdict.append(f"; the exit code reports --expect {clean(expect)}, below")
    out.append(verdict)
    out.extend(lost_lines(result))
    out.append(Text(
        f"input: {accounting(inp)}; {plural(len(inp.files), 'file')}; ordering {result.ordering}"))
    out.extend(Text(f"  {clean(line)}") for line in ignored_entries(inp, limit=5))
    out.extend(Text(f"  {clean(line)}") for line in _attrs_hints(result))
    if inp.skipped:
        first = inp.skipped[0]
        out.append(Text(f"skipped: {plural(len(inp.skipped), 'path')} that "
                        f"{'are' if len(inp.skipped) != 1 else 'is'} not a file to read (first: "
                        f"{clean(first.path)}: {clean(first.reason)})"))
    if result.scope is not None:
        out.append(Text(f"scope: {clean(result.scope.describe())} (detection ran over every event; "
                        "only what is in scope is reported)"))
    out.append(Text(
        f"workflows: {num(s['workflows'])}, acquisitions {num(s['acquisitions'])}, "
        f"handovers {num(s['handovers'])} ({num(s['clean_handovers'])} clean)"))
    counts = Text("findings: ")
    graded = [(g, s["findings"].get(g.grade, 0)) for g in reversed(ordered())]
    if not any(n for _, n in graded):
        counts.append("none")
    for i, (g, n) in enumerate((g, n) for g, n in graded if n):
        if i:
            counts.append(", ")
        counts.append(f"{g.grade} {num(n)}", g.terminal)
    out.append(counts)
    if result.diagnostics:
        kinds: dict[str, int] = {}
        for d in result.diagnostics:
            kinds[d.kind.value] = kinds.get(d.kind.value, 0) + 1
        out.append(Text("diagnostics: " + ", ".join(f"{k} {num(n)}" for k, n in sorted(kinds.items()))))
    out.extend(lease_lines(result))

    ranked = top(result.incidents, MAX_INCIDENTS, severity)
    if ranked:
        out.append(Text(""))
        out.append(Text("incidents, most severe first:", "bold"))
    for inc in ranked:
        out.extend(_incident(inc))
    if len(result.incidents) > MAX_INCIDENTS:
        out.append(Text(f"... and {plural(len(result.incidents) - MAX_INCIDENTS, 'more incident')} "
                        "(see --json, --markdown or --html)"))
    levels = confidence_levels(ranked, reporters(result, ranked))
    if levels:
        out.append(Text(clean("confidence: " + "; ".join(f"{c.value}: {w}" for c, w in levels) + "."), "dim"))
    return out


#: The terminal's headers for ``words.LEASE_COLUMNS``: short, so the figures fit 80 columns
#: before the group's label.
LEASE_HEADERS = ("rule", "L min", "R*H+J", "H", "J", "keys", "expired", "reclaims", "failed", "hb age", "group")


def lease_lines(result: AuditResult) -> list[Text]:
    """Lease health: the riskiest groups as an aligned table (figures first, the group's label
    last, so 80 columns show every figure), then what to change for each group at risk; nothing
    when no key carries lease evidence."""
    health = result.lease_health
    if not health.groups:
        return []
    shown = health.groups[:MAX_LEASE_GROUPS]
    rows = [LEASE_HEADERS] + [tuple(clean(c) for c in lease_row(g)) for g in shown]
    widths = [max(len(r[i]) for r in rows) for i in range(len(LEASE_HEADERS) - 1)]
    out = [Text(""), Text(clean(lease_head(health, len(shown))) + ":", "bold")]
    for n, row in enumerate(rows):
        line = Text("  ")
        for i, cell in enumerate(row[:-1]):
            text = cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i])
            line.append(text + "  ", "bold red" if i == 0 and n and shown[n - 1].at_risk else None)
        line.append(row[-1])
        if n == 0:
            line.stylize("bold")
        out.append(line)
    out.append(Text("  failed: extensions refused (heartbeat=lost); hb age: how old the displaced owner's "
                    "last heartbeat was at a takeover (max)", "dim"))
    for d in result.diagnostics:
        if d.kind is DiagnosticKind.LEASE_TIMING_RISK:
            out.append(Text(f"  {clean(d.detail)}", "dim"))
    return out


def lost_lines(result: AuditResult) -> list[Text]:
    """What was lost and why, shown before everything else; nothing when nothing was lost."""
    if not result.lost:
        return []
    items = lost_items(result, MAX_QUARANTINE)
    out = [Text(f"lost: {lost_head(result, MAX_QUARANTINE)}" + (":" if items else ""), "bold")]
    return out + [Text(f"  {clean(item)}") for item in items]


def _incident(inc: Incident) -> list[Text]:
    head = Text("  ")
    head.append(f"[{inc.severity.value}]", spec(inc.severity).terminal)
    head.append(f" {clean(inc.workflow_key)}  {clean(owners(inc))}")
    if (where := transition(inc)) is not None:
        head.append(f", takeover at {where}")
    lines = [head, Text(f"    {clean(inc.witness)}"), Text("    " + clean("; ".join(incident_facts(inc))))]
    for n, action in enumerate(actions(inc), 1):
        lines.append(Text(f"    {'do:' if n == 1 else '   '} {n}. {action}", "dim"))
    return lines


def comparison_lines(result: AuditResult, cmp: "Comparison") -> list[Text]:
    """The --expect verdict, after what was lost: FAIL when the findings differ, INCOMPLETE when
    they match but lines were lost, PASS only when they match and nothing was lost."""
    out = lost_lines(result)
    audit = "" if cmp.verdict is result.verdict else f", not the audit's {result.verdict.value.upper()} above"
    out.append(Text(f"--expect {clean(cmp.source)} decides the exit code ({cmp.exit_code}){audit}:"))
    if cmp.verdict is Verdict.FAIL:
        out.append(Text(f"FAIL: findings differ from {clean(cmp.source)}", VERDICT_STYLE[cmp.verdict]))
        out += [Text(f"  missing:    {_triple(t)}") for t in cmp.missing]
        out += [Text(f"  unexpected: {_triple(t)}") for t in cmp.unexpected]
        return out
    found = f"all {plural(cmp.expected, 'expected finding')} found, nothing else"
    if cmp.verdict is Verdict.INCOMPLETE:
        out.append(Text(f"INCOMPLETE: {found}, but {plural(cmp.lost, 'line')} lost: "
                        "a pass cannot be claimed", VERDICT_STYLE[cmp.verdict]))
    else:
        out.append(Text(f"PASS: {found}", VERDICT_STYLE[cmp.verdict]))
    return out


def _triple(t: tuple) -> str:
    grade, key, seq = t
    return f"{clean(grade)} {clean(key)} seq {'null' if seq is None else seq}"


def print_comparison(result: AuditResult, cmp: "Comparison", file: IO[str] | None = None) -> None:
    _print(comparison_lines(result, cmp), file)


def print_ingested(db: object, counts: list, total: "InputSummary", file: IO[str] | None = None) -> None:
    """One line per ingested file (lines read = events + duplicates + quarantined), then the store."""
    lines = []
    for c in counts:
        if c.skipped:
            lines.append(Text(f"{clean(c.name)}: already ingested, nothing added"))
        else:
            ignored = f" + {num(c.ignored)} ignored" if c.ignored else ""
            lines.append(Text(f"{clean(c.name)}: {num(c.lines_read)} lines read = {num(c.events)} events + "
                              f"{num(c.duplicates)} duplicates + {num(c.quarantined)} quarantined{ignored}"))
    for skip in total.skipped:
        lines.append(Text(f"{clean(skip.path)}: skipped, {clean(skip.reason)}"))
    lines.append(Text(f"{clean(db)}: {plural(total.events, 'event')} from {plural(len(total.files), 'file')}"))
    _print(lines, file)


def _attrs_hints(result: AuditResult) -> list[str]:
    """What a vocabulary left in attrs that looks like order or ownership (``explain.attrs_hints``),
    when the result's store can still be read; nothing otherwise (a closed or remote store)."""
    from ..explain.attrs_hints import attrs_hints

    session = getattr(result, "session", None)
    if session is None or not session.open:  # a closed result, or a Spark audit's events left in Spark
        return []
    try:
        return attrs_hints(result)
    except Exception:  # noqa: BLE001 - a hint is never worth failing the report over
        return []


def print_summary(result: AuditResult, file: IO[str] | None = None, expect: str | None = None) -> None:
    _print(summary_lines(result, expect), file)


class _Console(Console):
    """rich's console, except that a reader going away (``| head``) is not an exit of its own.

    rich answers a ``BrokenPipeError`` with ``SystemExit(1)``, which replaced the audit's exit code
    (issue 45: ``audit ... | head -1`` exited 1 on a pass). The error is raised again instead, for
    the CLI's ``quiet_pipe`` to end the output quietly while the verdict keeps its code.
    """

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError("the reader of the output went away")


def _print(lines: list[Text], file: IO[str] | None) -> None:
    console = _Console(file=file, highlight=False, soft_wrap=True)
    for line in lines:
        console.print(line)
