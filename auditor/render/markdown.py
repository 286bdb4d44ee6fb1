"""The Markdown summary: for ``$GITHUB_STEP_SUMMARY``, a merge request comment or a ticket.

Verdict, what was lost (first), counts, a table of incidents and each incident's witness and
actions. Plain CommonMark plus GFM tables, which GitHub and GitLab both render; no links, no HTML.
Every value from the log is shown as code or escaped text, so a key cannot inject markup, a link
or a table column. Deterministic, like every renderer.
"""

from __future__ import annotations

import re

from ..core.model import DiagnosticKind, Incident, Verdict
from ..rules.grades import ordered
from ..explain.incidents import severity, top
from ..explain.result import AuditResult
from . import visible
from .words import (LEASE_COLUMNS, accounting, actions, confidence_levels, confidence_words, effects, freshness,
                    ignored_entries, lease_head, lease_row, lost_head, lost_items, num, plural, reporters, stale_window,
                    transition, verification, window)

MAX_TABLE = 100  # incidents in the table (a step summary is limited to 1 MiB)
MAX_DETAILED = 20  # incidents with their witness and actions
MAX_LOST = 10
MAX_LEASE_GROUPS = 20  # the riskiest lease groups in the table
_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")


def text(value: object) -> str:
    """Escaped inline text: no markup, no table cell break, one line."""
    return _SPECIAL.sub(r"\\\1", visible(value))


def code(value: object) -> str:
    """A code span that holds any value (backticks inside get a longer fence; pipes escaped)."""
    body = visible(value).replace("|", "\\|")
    fence = "`" * (max((len(m) for m in re.findall(r"`+", body)), default=0) + 1)
    pad = " " if body.startswith("`") or body.endswith("`") else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def render_markdown(result: AuditResult) -> str:
    inp = result.input
    s = result.summary()
    out = [f"# Split-brain audit: {result.verdict.value.upper()}", ""]
    if result.verdict is Verdict.INCOMPLETE:
        out.append(f"**INCOMPLETE**: no finding at or above `{result.fail_on.value}`, but evidence was "
                   "lost: a pass cannot be claimed.")
    else:
        out.append(f"**{result.verdict.value.upper()}**: {plural(len(result.incidents), 'incident')}, "
                   f"{plural(result.failing_count, 'finding')} at or above `{result.fail_on.value}`.")
    out.append("")
    if result.lost:
        out += [f"**Evidence lost**: {lost_head(result, MAX_LOST)}.", ""]
        out += [f"- {text(item)}" for item in lost_items(result, MAX_LOST)]
        more = inp.quarantined - min(len(inp.quarantine), MAX_LOST)
        if more > 0:
            out.append(f"- and {plural(more, 'more quarantined line')} (see the JSON document)")
        out.append("")
    out.append(f"Input: {accounting(inp)}; {plural(len(inp.files), 'file')}; ordering {result.ordering}.")
    if inp.ignore:
        out += [""] + [f"- {text(line)}" for line in ignored_entries(inp, limit=20)] + [""]
    if result.scope is not None:
        out.append(f"Scope: {text(result.scope.describe())} (detection ran over every event).")
    out += [f"Workflows {num(s['workflows'])}, acquisitions {num(s['acquisitions'])}, "
            f"handovers {num(s['handovers'])} ({num(s['clean_handovers'])} clean), "
            f"{plural(len(result.diagnostics), 'diagnostic')}.", ""]
    out += ["| grade | findings |", "|---|---:|"]
    out += [f"| {g.grade} | {num(s['findings'].get(g.grade, 0))} |" for g in reversed(ordered())]
    out.append("")

    out += _lease_health(result)
    ranked, total = top(result.incidents, MAX_TABLE, severity), len(result.incidents)
    out += ["## Incidents, most severe first", ""]
    if not ranked:
        out += ["No incidents.", ""]
        return "\n".join(out)
    out += ["| # | severity | workflow key | displaced | current | takeover | stale | effects | "
            "verification | confidence |", "|---:|---|---|---|---|---:|---|---|---|---|"]
    for n, inc in enumerate(ranked[:MAX_TABLE], 1):
        out.append(_row(n, inc))
    if total > MAX_TABLE:
        out.append("")
        out.append(f"{plural(total - MAX_TABLE, 'more incident')} not listed (see the JSON or "
                   "HTML report).")
    out.append("")
    seen = reporters(result, ranked[:MAX_TABLE])
    for n, inc in enumerate(ranked[:MAX_DETAILED], 1):
        out += _details(n, inc, seen[inc.id])
    if total > MAX_DETAILED:
        out += [f"The other {plural(total - MAX_DETAILED, 'incident')} are in the table above "
                "and in the JSON or HTML report.", ""]
    levels = confidence_levels(ranked[:MAX_TABLE], seen)
    out += ["Confidence:", ""] + [f"- **{c.value}**: {text(words)}." for c, words in levels] + [""]
    return "\n".join(out)


def _lease_health(result: AuditResult) -> list[str]:
    """The riskiest lease groups as a table, then what to change for each one at risk."""
    health = result.lease_health
    if not health.groups:
        return []
    shown = health.groups[:MAX_LEASE_GROUPS]
    head = lease_head(health, len(shown))
    out = ["## Lease health", "", text(head[0].upper() + head[1:]) + ".", "",
           "| " + " | ".join(text(c) for c in LEASE_COLUMNS) + " |",
           "|---|" + "---:|" * (len(LEASE_COLUMNS) - 2) + "---|"]
    for g in shown:
        cells = list(lease_row(g))
        cells[0] = f"**{cells[0]}**" if g.at_risk else cells[0]
        cells[-1] = code(cells[-1])
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    risks = [d for d in result.diagnostics if d.kind is DiagnosticKind.LEASE_TIMING_RISK]
    out += [f"- {text(d.detail)}" for d in risks[:MAX_LEASE_GROUPS]]
    return out + [""] if risks else out


def _owner(worker: str | None, epoch: int | None) -> str:
    return f"epoch {epoch} ({text(worker or 'unknown')})"


def _row(n: int, inc: Incident) -> str:
    cells = [str(n), inc.severity.value, code(inc.workflow_key),
             _owner(inc.displaced.worker, inc.displaced.epoch),
             _owner(inc.current.worker, inc.current.epoch),
             transition(inc) or "",
             window(inc),
             ", ".join(f"{code(e.effect_key)} {e.sink_outcome.value}" for e in inc.effects) or "none",
             verification(inc), inc.confidence.value]
    return "| " + " | ".join(cells) + " |"


def _details(n: int, inc: Incident, seen: frozenset[str]) -> list[str]:
    facts = [f"{text(inc.witness)}", "",
             f"- window: {text(stale_window(inc))}",
             f"- effects: {text(effects(inc))}",
             f"- confidence: {inc.confidence.value}: {text(confidence_words(inc.confidence, seen))}"]
    fresh = freshness(inc)
    if fresh:
        facts.append(f"- freshness: {fresh}")
    facts.append(f"- incident id: `{inc.id}`")
    todo = [f"{i}. {a}" for i, a in enumerate(actions(inc), 1)]
    return [f"### {n}. {inc.severity.value}: {code(inc.workflow_key)}", "", *facts, "",
            "What to do, most urgent first:", "", *todo, ""]

