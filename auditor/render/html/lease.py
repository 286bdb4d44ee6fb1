"""The HTML report's lease health section (SPEC section 7), computed from one ``AuditResult``.

A table of the groups, riskiest first, then one article per group: its chart (``lease_chart``),
its takeovers (the expired lease, the heartbeat age at the takeover) and its lease diagnostics
(numbers and what to change, verbatim from the data). Everything here is what the detector and
``health`` measured; nothing is re-derived. At most ``MAX_GROUPS`` articles and ``MAX_ROWS``
takeovers or diagnostics per article; what is left out is counted on the page.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...detect.lease.facts import GroupHealth, LeaseHealth, Takeover
from ...core.model import Diagnostic, DiagnosticKind
from ...rules.lease import MIN_GAPS
from ..words import LEASE_COLUMNS, at_diagnostic, lease_head, lease_row, lease_rule, plural, secs
from .format import _key_anchor, _short_owner
from .lease_chart import LeaseChart, chart

MAX_GROUPS = 12
MAX_ROWS = 20  # takeovers per article
MAX_NOTES = 6  # lease diagnostics per article; the Diagnostics table has them all

#: The lease diagnostics, in the order an article lists them: the rule, then what a worker or the
#: coordinator did (an effect after expiry, an early takeover), then late extensions.
_LEASE_KINDS = (DiagnosticKind.LEASE_TIMING_RISK, DiagnosticKind.EFFECT_AFTER_LEASE_EXPIRY,
                DiagnosticKind.TAKEOVER_BEFORE_EXPIRY, DiagnosticKind.LATE_EXTENSION)


@dataclass(frozen=True, slots=True)
class GroupRow:
    cells: tuple[str, ...]  # words.LEASE_COLUMNS, the group's label last
    at_risk: bool
    anchor: str | None  # its article, when drawn


@dataclass(frozen=True, slots=True)
class TakeoverRow:
    workflow_key: str
    seq: str  # "1042", or "position 5" where the key has no seq (SPEC rev 3)
    owners: str  # "42 (W1) -> 43 (W2)"
    lease_until: str  # the displaced owner's last lease_until, or ""
    lease: str  # "expired 15 s before" / "40 s left" / "unknown"
    expired: bool | None
    heartbeat_age: str  # the displaced owner's last heartbeat=ok, that long before
    reclaim: str  # "yes": the displaced owner had shown evidence (it was working)


@dataclass(frozen=True, slots=True)
class LeaseDiagnosticRow:
    kind: str
    workflow_key: str
    seq: str  # "seq 5", "position 5" where the key has no seq, or ""
    detail: str


@dataclass(frozen=True, slots=True)
class GroupView:
    anchor: str
    label: str
    rule: str  # words.lease_rule: AT RISK, safe, too few gaps, no lease_until
    rule_css: str  # "risk", "safe" or "unjudged"
    at_risk: bool
    chart: LeaseChart | None  # None when there is too little to draw (no_chart says why)
    takeovers: list[TakeoverRow]
    takeovers_more: int
    diagnostics: list[LeaseDiagnosticRow]
    diagnostics_more: int
    no_chart: str = ""


@dataclass(frozen=True, slots=True)
class LeaseHealthView:
    """Everything ``_lease_health.html.j2`` draws. ``head`` is the one-line verdict; ``rows`` the
    table (every group); ``groups`` the articles; ``more`` the groups without an article."""

    head: str
    misses: int
    by: str
    columns: tuple[str, ...]
    rows: list[GroupRow]
    groups: list[GroupView]
    more: int


def lease_view(health: LeaseHealth, diagnostics: list[Diagnostic]) -> LeaseHealthView | None:
    """The section's view; None when no workflow key carries lease evidence."""
    if not health.groups:
        return None
    drawn = health.groups[:MAX_GROUPS]
    anchors = {g.group: _key_anchor("lh", repr(g.group)) for g in drawn}
    by_group: dict[tuple, list[Diagnostic]] = {}
    for d in diagnostics:
        if d.kind in _LEASE_KINDS and d.group is not None:
            by_group.setdefault(tuple(d.group.items()), []).append(d)
    takeovers: dict[tuple, list[tuple[str, Takeover]]] = {}
    for k in health.keys:
        for t in k.takeovers:
            takeovers.setdefault(k.group, []).append((k.workflow_key, t))
    head = lease_head(health, len(health.groups))
    return LeaseHealthView(
        head=head[0].upper() + head[1:], misses=health.heartbeat_misses,
        by=", ".join(health.by) or "no dimension (one group: all keys)", columns=LEASE_COLUMNS,
        rows=[GroupRow(lease_row(g), g.at_risk, anchors.get(g.group)) for g in health.groups],
        groups=[_group(g, anchors[g.group], health.heartbeat_misses, takeovers.get(g.group, []),
                       by_group.get(g.group, [])) for g in drawn],
        more=len(health.groups) - len(drawn))


def _group(g: GroupHealth, anchor: str, r: int, takeovers: list[tuple[str, Takeover]],
           diagnostics: list[Diagnostic]) -> GroupView:
    # Expired leases and takeovers before expiry first: those are the ones to read.
    ranked = sorted(takeovers, key=lambda kt: (kt[1].remaining_s is None, -abs(kt[1].remaining_s or 0),
                                               kt[0], kt[1].seq if kt[1].seq is not None else -1,
                                               kt[1].position or 0))
    rows = [_takeover(k, t) for k, t in ranked[:MAX_ROWS]]
    ordered = sorted(diagnostics, key=lambda d: _LEASE_KINDS.index(d.kind))  # stable: key, seq within
    diags = [LeaseDiagnosticRow(d.kind.value, d.workflow_key, "" if d.seq is None and d.position is None
                                else at_diagnostic(d), d.detail)
             for d in ordered[:MAX_NOTES]]
    rule = lease_rule(g)
    css = "risk" if g.at_risk else "safe" if rule == "safe" else "unjudged"
    # Two heartbeat lines make one gap: a chart of one dot says nothing the table does not (issue 45).
    drawn = len(g.gaps) >= MIN_GAPS or bool(g.takeover_ages)
    no_chart = "" if drawn else (
        f"No chart: {plural(len(g.gaps), 'heartbeat gap')} and no takeover; the timing rule needs "
        f"{MIN_GAPS} gaps or more (heartbeat=ok or lost lines of one owner) to say anything.")
    return GroupView(anchor, g.label, rule, css, g.at_risk, chart(g, r) if drawn else None, rows,
                     max(0, len(takeovers) - MAX_ROWS), diags, max(0, len(diagnostics) - MAX_NOTES), no_chart)


def _takeover(key: str, t: Takeover) -> TakeoverRow:
    if t.remaining_s is None:
        lease = "unknown (no lease_until or ts)"
    elif t.remaining_s <= 0:
        lease = f"expired {secs(-t.remaining_s)} before"
    else:
        lease = f"{secs(t.remaining_s)} left: taken before expiry"
    age = ("no heartbeat=ok seen" if t.heartbeat_age_s is None
           else f"{secs(t.heartbeat_age_s)} before the takeover")
    where = str(t.seq) if t.seq is not None else f"position {t.position}" if t.position is not None else ""
    return TakeoverRow(key, where, f"{_short_owner(t.displaced_worker, t.displaced_epoch)} \u2192 "
                                   f"{_short_owner(t.worker, t.epoch)}",
                       t.displaced_lease_until or "", lease, t.expired, age, "yes" if t.reclaim else "no")
