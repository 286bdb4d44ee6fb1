"""The HTML report's view of the input accounting (``lines read = events + duplicates +
quarantined + ignored``): the first quarantined lines, and each ``[ignore]`` entry that matched
(SPEC rev 3), as the template reads them (``context.ReportContext.input``)."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.summary import QuarantinedLine
from ...explain.result import AuditResult
from ..words import ignore_label
from .format import _num


@dataclass(frozen=True, slots=True)
class Ignored:
    """One [ignore] entry that matched lines (SPEC rev 3): which, how many, the first, some values."""

    entry: str  # as the vocabulary writes it: [ignore] kind_patterns '^GET /'
    lines: str
    file: str
    line: int
    samples: list[str]


@dataclass(frozen=True, slots=True)
class InputView:
    files: list[str]
    lines_read: str  # numbers are preformatted with thousands separators
    events: str
    duplicates: str
    quarantined: str
    ignored: str  # "" when no line was ignored ([ignore] in a vocabulary)
    unplaced: str  # "" when no event is unplaced (no seq in a key ordered by seq, SPEC rev 3)
    ordering: str  # "authoritative", "observed" or "mixed"
    quarantine: list[QuarantinedLine]  # the first quarantined lines, in file order
    quarantine_more: int  # quarantined lines not listed
    # SPEC rev 3.1: evidence_lost.first when it names more than quarantined lines (the first line of
    # each cause that blocks the pass, then the quarantined ones); [] otherwise
    lost_first: list[QuarantinedLine]
    ignore: list[Ignored]  # per [ignore] entry that matched, in the order first seen


def input_view(result: AuditResult) -> InputView:
    """The input accounting of ``result`` as the report shows it (numbers preformatted)."""
    inp = result.input
    return InputView(
        files=list(inp.files), lines_read=_num(inp.lines_read), events=_num(inp.events),
        duplicates=_num(inp.duplicates), quarantined=_num(inp.quarantined),
        ignored=_num(inp.ignored) if inp.ignored else "", unplaced=_num(inp.unplaced) if inp.unplaced else "",
        ordering=result.ordering,
        quarantine=list(inp.quarantine),
        quarantine_more=max(0, inp.quarantined - len(inp.quarantine)),
        lost_first=_lost_first(result),
        ignore=[Ignored(ignore_label(e), _num(e.lines), e.file, e.line, list(e.samples)) for e in inp.ignore])


def _lost_first(result: AuditResult) -> list[QuarantinedLine]:
    first = [QuarantinedLine(**e) for e in result.lost_first()]
    return [] if first == list(result.input.quarantine) else first
