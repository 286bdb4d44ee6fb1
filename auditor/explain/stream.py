"""Stage 5, explain, key by key: detection read in key order, each key's incidents and summary made
and written out at once, so an audit's memory does not grow with what it finds.

``explain(det)`` walks ``Detection.batches``: a batch of workflow keys at a time, the keys with
findings explained one by one (``incidents.key_incidents``, ``incidents.key_summary``), and the
findings, incidents and workflow summaries appended to spooled lists as the document's lines
(``Findings``, ``Incidents``, ``WorkflowTable``). Each list counts what the reports ask of all of
it on the way: the findings per grade, and the first incidents in the two orders reports rank
them in (``incidents.severity``, ``incidents.urgency``).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable
from operator import attrgetter
from typing import NamedTuple

from ..core.model import GRADE_RANK, Diagnostic, Finding, Grade, Incident
from ..detect.batch import Detection
from . import items
from .incidents import key_incidents, key_summary, severity, urgency
from .spool import Spool
from .workflows import WorkflowTable

#: How many of the first incidents in each report order are kept beside the spool (Markdown's table shows 100).
KEPT = 100
_GRADE = attrgetter("grade")


class Findings(Spool):
    """The document's findings, spooled, with their count per grade."""

    __slots__ = ("_grades",)

    def __init__(self) -> None:
        super().__init__(items.finding)
        self._grades: dict[Grade, int] = {}

    def add(self, findings: list[Finding]) -> None:
        self.extend_items(findings)
        grades = self._grades
        for grade, n in Counter(map(_GRADE, findings)).items():  # counted in C: 3 % of explain in Python
            grades[grade] = grades.get(grade, 0) + n

    def append(self, finding: Finding) -> None:
        """Add one finding, as a list would (counted with the others)."""
        self.add([finding])
        self.hold(finding)

    def grades(self) -> dict[Grade, int]:
        """How many findings of each grade (grades without any left out)."""
        return dict(self._grades)


class Incidents(Spool):
    """The document's incidents, spooled, with the first ``KEPT`` of them in each order reports
    rank them in."""

    __slots__ = ("_first",)

    def __init__(self) -> None:
        super().__init__(items.incident)
        self._first: dict[Callable, list[Incident]] = {severity: [], urgency: []}

    def add(self, incidents: list[Incident]) -> None:
        self.extend_items(incidents)
        ranks = None
        for order, kept in self._first.items():
            fresh = incidents
            if len(kept) == KEPT and incidents:
                # Both orders rank by severity first: an incident less severe than the last one kept
                # comes after KEPT others, so only those at least as severe are ranked (a big audit's
                # incidents are mostly of its commonest grade, and ranking each one cost 5 % of explain).
                if ranks is None:
                    ranks = [GRADE_RANK[i.severity] for i in incidents]
                least = GRADE_RANK[kept[-1].severity]
                fresh = [i for i, r in zip(incidents, ranks) if r >= least]
            # earlier ones first among equals: nsmallest is sorted()[:n] of kept + these, in this order
            self._first[order] = heapq.nsmallest(KEPT, kept + fresh, key=order)

    def append(self, incident: Incident) -> None:
        """Add one incident, as a list would (ranked with the others)."""
        self.add([incident])
        self.hold(incident)

    def first(self, order: Callable, n: int) -> list[Incident] | None:
        """``sorted(self, key=order)[:n]``, or None when it was not kept."""
        kept = self._first.get(order)
        if kept is None or (n > KEPT and len(self) > KEPT):
            return None
        return kept[:n]


class Explained(NamedTuple):
    """What detection and explanation make of the events of a store, before the input accounting,
    the ``event_id`` conflicts and the scope are added."""

    workflows: WorkflowTable  # or a list of summaries (a distributed audit's merge)
    findings: list[Finding]   # a spooled list (``Findings``), or a plain one
    incidents: list[Incident]
    diagnostics: list[Diagnostic]


def explain(det: Detection) -> Explained:
    """Every key of ``det`` explained, in key order, into spooled lists."""
    findings, incidents, workflows = Findings(), Incidents(), WorkflowTable()
    for batch, keyed in det.batches():
        marked, found, grouped = {}, [], []
        for kf in keyed:
            fs, incs = key_incidents(kf)
            if fs:
                found += fs
                grouped += incs
                marked[kf.row] = key_summary(kf, fs)
        findings.add(found)
        incidents.add(grouped)
        workflows.add_batch(batch, marked)
    return Explained(workflows, findings, incidents, det.diagnostics)
