"""Comparing an audit with what was planted: the ``--expect`` file and its verdict.

The file is ``{"findings": [[grade, workflow_key, seq], ...]}`` (``seq`` may be ``null`` for a
finding of a log without seq); the comparison is between multisets (SPEC section 4): two findings
with one triple (two ``null`` seqs of one key and grade) need two rows. Lost evidence takes part in
the verdict, so an expectation is never confirmed over lines the audit could not read:

- findings differ from the expectation: ``fail`` (exit 1), whatever was lost;
- findings match but lost evidence goes beyond its allowance (``allow_quarantined`` for lost
  lines, ``allow_unplaced`` for unplaced events): ``incomplete`` (exit 3);
- findings match and nothing beyond the allowance was lost: ``pass`` (exit 0).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import AuditorError
from ..core.model import Grade, Verdict
from .result import blocks

if TYPE_CHECKING:
    from .result import AuditResult

Triple = tuple[str, str, "int | None"]
_SHAPE = '{"findings": [["stale_activity", "workflow/key", 6], ...]}'


class ExpectError(AuditorError):
    """The --expect file cannot be read or is not the expected findings format."""


def load_expected(path: str | os.PathLike) -> tuple[Triple, ...]:
    """The ``(grade, workflow_key, seq)`` rows of an expect file, a multiset in the file's order;
    raises ``ExpectError``."""
    grades = {g.value for g in Grade}
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        rows = doc["findings"] if isinstance(doc, dict) else None
        if not isinstance(rows, list):
            raise ValueError('the top level must be an object with a "findings" list')
        wanted = []
        for row in rows:
            if not (isinstance(row, list) and len(row) == 3 and isinstance(row[0], str)
                    and isinstance(row[1], str)
                    and (row[2] is None or (isinstance(row[2], int) and not isinstance(row[2], bool)))):
                raise ValueError(f"each finding is [grade, workflow_key, seq], not {json.dumps(row)}")
            if row[0] not in grades:
                raise ValueError(f"{row[0]!r} is not a grade")
            wanted.append((row[0], row[1], row[2]))
    except OSError as e:
        raise ExpectError(f"{path}: cannot read the expected findings ({e.strerror or e})") from e
    except (ValueError, KeyError, TypeError) as e:
        raise ExpectError(f"{path}: cannot read the expected findings ({e}); expected {_SHAPE}") from e
    return tuple(wanted)


@dataclass(frozen=True, slots=True)
class Comparison:
    """An audit compared with its expectation; ``missing`` and ``unexpected`` sorted by key, seq."""

    source: str
    expected: int
    missing: tuple[Triple, ...]
    unexpected: tuple[Triple, ...]
    lost: int  # everything lost: quarantined lines, event_id conflicts, unreadable values, unplaced events
    allow_quarantined: int
    unplaced: int = 0  # of ``lost``, the unplaced events that could change a finding
    allow_unplaced: int = 0

    @property
    def matches(self) -> bool:
        return not self.missing and not self.unexpected

    @property
    def verdict(self) -> Verdict:
        if not self.matches:
            return Verdict.FAIL
        lost = blocks(self.lost - self.unplaced, self.unplaced, self.allow_quarantined, self.allow_unplaced)
        return Verdict.INCOMPLETE if lost else Verdict.PASS

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code


def compare_expected(result: "AuditResult", expected: str | os.PathLike | Iterable[Triple],
                     source: str | None = None) -> Comparison:
    """Compare ``result``'s findings with ``expected``: a path to an expect file, or triples
    already loaded with ``load_expected`` (``source`` then names where they came from)."""
    if isinstance(expected, (str, os.PathLike)):
        source, wanted = source or str(expected), Counter(load_expected(expected))
    else:
        source, wanted = source or "the expected findings", Counter(tuple(t) for t in expected)
    found = Counter((f.grade.value, f.workflow_key, f.seq) for f in result.findings)
    order = lambda t: (t[1], -1 if t[2] is None else t[2], t[0])  # noqa: E731
    return Comparison(source=source, expected=sum(wanted.values()),
                      missing=tuple(sorted((wanted - found).elements(), key=order)),
                      unexpected=tuple(sorted((found - wanted).elements(), key=order)),
                      lost=result.lost, allow_quarantined=result.allow_quarantined,
                      unplaced=result.unplaced_lost, allow_unplaced=result.allow_unplaced)
