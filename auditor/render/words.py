"""The words every renderer shares: counts with their nouns, durations, the stale window, the
evidence's freshness and what a confidence level means. One place, so the terminal, the Markdown
summary and the HTML context say the same thing the same way ("1 file", "6,865 incidents").
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING

import orjson

from ..core.model import Confidence, Diagnostic, DiagnosticKind, EffectOutcome, Incident, Outcome
from ..core.summary import unplaced_reason

if TYPE_CHECKING:
    from ..core.summary import IgnoredEntry, InputSummary
    from ..detect.lease.facts import GroupHealth, LeaseHealth
    from ..explain.result import AuditResult

CONFIDENCE = {
    Confidence.HIGH: "order from seq, and no commit reported only by the worker",
    Confidence.MEDIUM: "order from seq, but a commit was reported only by the worker itself "
                       "(or its span hit the OTel attribute limits), so confirm it at the sink",
    Confidence.LOW: "seq was missing, so the order is the order the events were observed in",
}

_IRREGULAR = {"was": "were", "is": "are"}


def num(n: int) -> str:
    """An integer with thousands separators: ``6,865``."""
    return f"{n:,}"


def plural(n: int, noun: str, many: str | None = None) -> str:
    """``1 file``, ``2 files``, ``6,865 incidents``; ``many`` for a noun not made with ``s``."""
    if n == 1:
        return f"1 {noun}"
    return f"{num(n)} {many or _IRREGULAR.get(noun) or noun + 's'}"


def duration(seconds: float) -> str:
    """``45 s``, ``8 min``, ``2 h 5 min``: rounded for people, sign kept."""
    sign, s = ("-" if seconds < 0 else ""), abs(seconds)
    if s < 60:
        return f"{sign}{s:.3g} s"
    minutes, rest = divmod(round(s), 60)
    if s < 3600:
        return f"{sign}{minutes} min" + (f" {rest} s" if rest else "")
    hours, rest = divmod(minutes, 60)
    return f"{sign}{hours} h" + (f" {rest} min" if rest else "")


def seqs(first: int | None, last: int | None, first_position: int | None = None,
         last_position: int | None = None) -> str:
    """A span of a key's order: ``seq 6-8``, or where the key has no seq, ``position 6-8`` (SPEC
    rev 3: a seq is never invented)."""
    if first is None or last is None:
        word, first, last = "position", first_position, last_position
    else:
        word = "seq"
    if first == last:
        return f"{word} {first}"
    return f"{word} {first}-{last}"


def window(inc: Incident) -> str:
    """An incident's stale window in the words of ``seqs``."""
    return seqs(inc.window_first_seq, inc.window_last_seq, inc.window_first_position, inc.window_last_position)


def transition(inc: Incident) -> str | None:
    """Where an incident's takeover sits: ``seq 5``, ``position 5`` where the key has no seq, or None."""
    if inc.transition_seq is not None:
        return f"seq {inc.transition_seq}"
    if inc.transition_position is not None:
        return f"position {inc.transition_position}"
    return None


def not_displaced(inc: Incident) -> bool:
    """The incident's owner is the current one (an unauthorized commit that is not stale): no
    takeover stands between them, so "displaced epoch 2 -> current epoch 2" would say nothing."""
    return inc.displaced.epoch == inc.current.epoch and inc.displaced.worker == inc.current.worker


def owners(inc: Incident) -> str:
    """``displaced epoch 17 (alpha) -> current epoch 18 (beta)``, or ``epoch 2 (w2), the current
    owner`` when the owner acting was not displaced (raw text: the renderer escapes it)."""
    if not_displaced(inc):
        return f"epoch {inc.displaced.epoch} ({inc.displaced.worker}), the current owner"
    return (f"displaced epoch {inc.displaced.epoch} ({inc.displaced.worker}) -> current epoch "
            f"{inc.current.epoch} ({inc.current.worker})")


def stale_window(inc: Incident) -> str:
    """How long the displaced owner acted after the takeover, then where: ``stale for 60 s after
    the takeover, seq 1022-1029``; without timestamps only the seqs."""
    where = window(inc)
    if not_displaced(inc):  # no takeover: the owner acting is the current one
        return f"at {where}"
    if inc.window_seconds is None:
        return f"stale at {where}"
    if inc.window_seconds >= 0:
        return f"stale for {duration(inc.window_seconds)} after the takeover, {where}"
    # Buffered evidence: seq puts it after the takeover, the worker's clock before.
    return (f"stale at {where} (its ts is {duration(-inc.window_seconds)} earlier than the "
            "takeover's: the clocks disagree with seq, and seq decides)")


def freshness(inc: Incident) -> str | None:
    """The last stale event's age, measured against the log (never against now)."""
    if inc.freshness_seconds is None:
        return None
    if inc.freshness_seconds == 0:
        return "the last stale event is the newest event in the log"
    return f"last stale event {duration(inc.freshness_seconds)} before the newest event in the log"


def verification(inc: Incident) -> str:
    """``verified``/``unverified``, or why verification does not apply (nothing took effect)."""
    if inc.verification == "n/a":
        return "n/a (no effect key)"
    if inc.effects and all(e.sink_outcome is Outcome.REJECTED for e in inc.effects):
        return "n/a (the sink rejected it)"
    return inc.verification


def effects(inc: Incident) -> str:
    """``release-index/2026-07-26 committed, unverified; ...`` or ``none``."""
    return "; ".join(f"{e.effect_key} {_checked(e)}" for e in inc.effects) or "none"


def _checked(e: EffectOutcome) -> str:
    if e.verified:
        return f"{e.sink_outcome.value}, verified"
    # A rejected effect never happened: nothing to verify, and no warning to raise.
    return e.sink_outcome.value if e.sink_outcome is Outcome.REJECTED else f"{e.sink_outcome.value}, unverified"


def incident_facts(inc: Incident) -> list[str]:
    """The stale window, the effects, the confidence and the freshness, one phrase each."""
    facts = [stale_window(inc), f"effects: {effects(inc)}", f"confidence {inc.confidence.value}"]
    fresh = freshness(inc)
    return facts + [fresh] if fresh else facts


def actions(inc: Incident) -> tuple[str, ...]:
    """Every distinct response the incident's findings call for, most urgent first."""
    return inc.responses or (inc.response,)


def reporters(result: "AuditResult", incidents: Iterable[Incident]) -> dict[str, frozenset[str]]:
    """Who reported the findings of each of ``incidents`` (``""`` where a line names no reporter),
    by incident id: the evidence behind a confidence level, read from the findings themselves.
    A spooled result decodes only the lines of these incidents."""
    seen: dict[str, set[str]] = {inc.id: set() for inc in incidents}
    findings = result.findings
    if seen and hasattr(findings, "containing"):
        findings = findings.containing(b'"incident_id":' + orjson.dumps(i) for i in seen)
    for f in findings if seen else ():
        if f.incident_id in seen:
            seen[f.incident_id].add(f.reporter or "")
    return {i: frozenset(r) for i, r in seen.items()}


def reported_by(seen: Iterable[str]) -> str:
    """What a confidence level rests on, in words (issue 45): ``findings reported by sink, worker``,
    ``reporter not given``, or both (``findings reported by sink; reporter not given on some``)."""
    seen = set(seen)
    named = sorted(r for r in seen if r)
    if not named:
        return "reporter not given"
    text = f"findings reported by {', '.join(named)}"
    return text + "; reporter not given on some" if "" in seen else text


def confidence_words(level: Confidence, seen: Iterable[str]) -> str:
    """``order from seq, and no commit reported only by the worker (reporter not given)``."""
    return f"{CONFIDENCE[level]} ({reported_by(seen)})"


def confidence_levels(incidents: list[Incident], seen: dict[str, frozenset[str]]) -> list[tuple[Confidence, str]]:
    """Each confidence level among ``incidents`` with its words and the reporters behind it."""
    return [(c, confidence_words(c, set().union(*(seen[i.id] for i in incidents if i.confidence is c))))
            for c in Confidence if any(i.confidence is c for i in incidents)]


def accounting(inp: "InputSummary") -> str:
    """``16 lines read = 15 events + 0 duplicates + 1 quarantined`` (``+ N ignored`` when a
    vocabulary ignores lines), and how many events are unplaced, when any are (SPEC rev 3)."""
    text = (f"{num(inp.lines_read)} lines read = {num(inp.events)} events + {num(inp.duplicates)} duplicates + "
            f"{num(inp.quarantined)} quarantined")
    if inp.ignored:
        text += f" + {num(inp.ignored)} ignored"
    if inp.unplaced:
        text += f" ({num(inp.unplaced)} of the events unplaced: no seq in a key ordered by seq)"
    return text


def ignore_label(e: "IgnoredEntry") -> str:
    """An ``[ignore]`` entry as its vocabulary writes it: ``[ignore] kind_patterns '^GET /'``."""
    entry = f"'{e.entry}'" if e.table == "kind_patterns" else json.dumps(e.entry, ensure_ascii=False)
    return f"[ignore] {e.table} {entry}"


def ignored_entries(inp: "InputSummary", samples: int = 3, limit: int | None = None) -> list[str]:
    """One line per ``[ignore]`` entry that matched (SPEC rev 3: nothing hides behind one):
    ``1,500 ignored by [ignore] kind_patterns '^GET /' (first app.jsonl:2; "GET /healthz 200", ...)``,
    raw text; past ``limit`` entries, one line says how many more the JSON document lists."""
    out = []
    shown = inp.ignore if limit is None else inp.ignore[:limit]
    for e in shown:
        values = ", ".join(json.dumps(v[:60], ensure_ascii=False) for v in e.samples[:samples])
        more = ", ..." if len(e.samples) > samples else ""
        out.append(f"{num(e.lines)} ignored by {ignore_label(e)} (first {e.file}:{e.line}; {values}{more})")
    if len(shown) < len(inp.ignore):
        rest = inp.ignore[len(shown):]
        entries = plural(len(rest), "more [ignore] entry", "more [ignore] entries")
        out.append(f"and {num(sum(e.lines for e in rest))} ignored by {entries} (the JSON document lists them)")
    return out


def lost_head(result: "AuditResult", shown: int | None = None) -> str:
    """``7 quarantined lines, 0 event_id conflicts (more than --allow-quarantined 0)``, with the
    unreadable values that lose evidence when there are any (SPEC rev 3), then the unplaced events
    against their own allowance (``1 unplaced event (more than --allow-unplaced 0)``, rev 3.1):
    every allowance that was used is named. When ``lost_items`` lists fewer quarantined lines than
    there are (``shown``, its limit), it says so: ``; the first 5 of 6 quarantined lines`` (issue 45)."""
    within = "within" if result.lost_lines <= result.allow_quarantined else "more than"
    extra = ""
    if result.malformed_lost:
        extra += f", {plural(result.malformed_lost, 'unreadable value')}"
    head = (f"{plural(result.input.quarantined, 'quarantined line')}, "
            f"{plural(result.event_id_conflicts, 'event_id conflict')}{extra} "
            f"({within} --allow-quarantined {num(result.allow_quarantined)})")
    if result.unplaced_lost or result.allow_unplaced:
        within = "within" if result.unplaced_lost <= result.allow_unplaced else "more than"
        head += (f", {plural(result.unplaced_lost, 'unplaced event')} "
                 f"({within} --allow-unplaced {num(result.allow_unplaced)})")
    listed = min(len(result.input.quarantine), shown if shown is not None else result.input.quarantined)
    if listed < result.input.quarantined:
        head += f"; the first {num(listed)} of {num(result.input.quarantined)} quarantined lines"
    return head


def lost_items(result: "AuditResult", limit: int) -> list[str]:
    """The lost evidence as raw text, led by ``evidence_lost.first`` (SPEC rev 3.1: the first line
    of every cause that blocks the pass, then the first quarantined lines), then the first unplaced
    events that could change a finding, unreadable values and conflicts (each up to ``limit``)."""
    items = [f"{e['file']}:{e['line']}: {e['reason']}" for e in result.lost_first()[:limit]]
    if result.unplaced_lost:
        items += [f"{u.file}:{u.line}: {unplaced_reason(u)}" for u in result.input.unplaced_first
                  if result.lost_kind(u.kind)][:limit]
    if result.malformed_lost:
        items += [f"{d.file}:{d.line}: {d.detail}" for d in result.diagnostics
                  if d.kind == DiagnosticKind.MALFORMED_FIELD and d.numbers and d.numbers["lost"]][:limit]
    conflicts = [d for d in result.diagnostics if d.kind == DiagnosticKind.EVENT_ID_CONFLICT]
    items += [f"{d.file}:{d.line}: {d.detail}" if d.file is not None else f"{d.workflow_key} {at_diagnostic(d)}: {d.detail}"
              for d in conflicts[:limit]]
    return list(dict.fromkeys(items))


def at_diagnostic(d: "Diagnostic") -> str:
    """Where a diagnostic sits: ``seq 5``, or ``position 5`` when its event has no seq."""
    return f"seq {d.seq}" if d.seq is not None else f"position {d.position}"


# Lease health (SPEC section 7): one row per dimension group, the same cells in every renderer.

#: Column headers of a lease health row, in ``lease_row``'s order.
LEASE_COLUMNS = ("rule", "L min", "R*H+J", "H", "J", "keys", "expired", "reclaims", "failed extensions",
                 "heartbeat age at takeover", "group")


def secs(x: float | None) -> str:
    """Seconds as measured (``35 s``, ``0.25 s``), ``-`` when unknown: lease figures are compared
    with each other, so they keep one unit."""
    return "-" if x is None else f"{x:g} s"


def lease_rule(g: "GroupHealth") -> str:
    """What the timing rule says about one group: ``AT RISK``, ``safe``, or why it cannot say."""
    from ..detect.lease.batch import MIN_GAPS

    m = g.metrics
    if g.at_risk:
        return "AT RISK"
    if m.lease_min is None:
        return "no lease_until"
    if m.heartbeat_gaps < MIN_GAPS:
        return "too few gaps"
    return "safe"


def lease_row(g: "GroupHealth") -> tuple[str, ...]:
    """The cells of ``LEASE_COLUMNS`` for one group (raw text: the renderer escapes it)."""
    m = g.metrics
    return (lease_rule(g), secs(m.lease_min), secs(g.threshold), secs(m.heartbeat_interval_median),
            secs(m.heartbeat_jitter), num(g.keys), num(m.expired_leases), num(m.reclaims),
            num(m.extension_failures), secs(m.heartbeat_age_at_takeover_max), g.label)


def lease_head(health: "LeaseHealth", shown: int) -> str:
    """``lease health (L > R*H+J, R = 1; by tool, model): 1 of 2 groups at risk``."""
    by = ", ".join(health.by) or "no dimension"
    risky = len(health.at_risk)
    more = f", the {shown} riskiest shown" if shown < len(health.groups) else ""
    return (f"lease health (rule L > R*H+J, R = {health.heartbeat_misses}; grouped by {by}): "
            f"{num(risky)} of {plural(len(health.groups), 'group')} at risk{more}")
