"""Every workflow key's summary: the document's ``workflows`` list, spooled as it is made.

A big audit has millions of keys and most are clean (no finding: every handover clean). A clean
key's line is assembled from detect's per-key counts in Arrow, a batch of keys at a time, with no
Python object per key; a key with findings is summarized by explain (``WorkflowSummary``) and
encoded by orjson. The lines go to a ``Spool``: what the document writes, held on disk past a
few megabytes, and read back as summaries when asked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from ..core.arrow import strings
from ..core.model import Grade
from .spool import Spool

if TYPE_CHECKING:
    import pyarrow as pa


@dataclass(frozen=True, slots=True)
class WorkflowSummary:
    """One workflow key: its size, its owners, and how bad its worst finding is."""

    workflow_key: str
    events: int
    acquisitions: int
    handovers: int
    clean_handovers: int
    findings: int
    severity: Grade | None
    ordering: str  # "authoritative" (seq) or "observed" (file order: seq was missing)


#: The per-key counts detect hands over, as columns of its batches of keys.
COUNTS = ("workflow_key", "events", "acquisitions", "observed", "handovers")
_ORDERING = {False: "authoritative", True: "observed"}
#: A batch of keys this small is encoded summary by summary (see ``WorkflowTable.add_batch``).
SMALL_BATCH = 4096
_GRADES = {g.value: g for g in Grade}


def _summary(d: dict[str, Any]) -> WorkflowSummary:
    severity = d["severity"]
    return WorkflowSummary(d["workflow_key"], d["events"], d["acquisitions"], d["handovers"],
                           d["clean_handovers"], d["findings"], None if severity is None else _GRADES[severity],
                           d["ordering"])


def clean(key: str, events: int, acquisitions: int, observed: bool, handovers: int) -> WorkflowSummary:
    """The summary of a key without findings: every handover clean."""
    return WorkflowSummary(key, events, acquisitions, handovers, handovers, 0, None, _ORDERING[observed])


class WorkflowTable(Spool):
    """Every workflow key's ``WorkflowSummary``, in key order, kept as the document's lines.

    Reading, iterating and comparing give exactly the summaries a list would hold. Built with
    ``add`` (one summary) or ``add_batch`` (a batch of detect's per-key counts, with the
    summaries of its keys that have findings); the totals are counted on the way.
    """

    __slots__ = ("_acquisitions", "_handovers", "_named", "_observed")

    def __init__(self) -> None:
        super().__init__(_summary)
        self._acquisitions = self._handovers = self._named = self._observed = 0

    @classmethod
    def of(cls, summaries: Iterable[WorkflowSummary]) -> "WorkflowTable":
        """The table of ``summaries`` (already in key order)."""
        table = cls()
        for w in summaries:
            table.add(w)
        return table

    def add(self, w: WorkflowSummary) -> None:
        self.append_line(orjson.dumps(w))
        self._count(w)

    def _count(self, w: WorkflowSummary) -> None:
        self._acquisitions += w.acquisitions
        self._handovers += w.handovers
        self._named += w.handovers - w.clean_handovers
        self._observed += w.ordering == "observed"

    def add_batch(self, counts: "pa.RecordBatch", marked: dict[int, WorkflowSummary]) -> None:
        """Add a batch of keys: ``counts`` has the columns ``COUNTS``; ``marked`` holds, by row,
        the summaries of its keys with findings. Clean rows are assembled from the columns (a key
        JSON must escape goes through orjson); each marked row is its summary, encoded by orjson."""
        if counts.num_rows <= SMALL_BATCH:  # orjson per summary spares a small audit pyarrow.compute
            summaries = [marked.get(i) or clean(*row) for i, row in
                         enumerate(zip(*(counts.column(name).to_pylist() for name in COUNTS)))]
            self.extend_items(summaries)
            for w in summaries:
                self._count(w)
            return
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        key, handovers = counts.column("workflow_key"), counts.column("handovers")
        hand = handovers.cast(pa.string())
        values = {"workflow_key": pc.binary_join_element_wise('"', key, '"', ""),
                  "events": counts.column("events").cast(pa.string()),
                  "acquisitions": counts.column("acquisitions").cast(pa.string()),
                  "handovers": hand, "clean_handovers": hand, "findings": "0", "severity": "null",
                  "ordering": pc.if_else(counts.column("observed"), '"observed"', '"authoritative"')}
        parts = []
        for n, name in enumerate(WorkflowSummary.__slots__):
            parts += [("{" if n == 0 else ",") + orjson.dumps(name).decode() + ":", values[name]]
        joined = pc.binary_join_element_wise(*parts, "}\n", "")
        redo = {i: orjson.dumps(w).decode() + "\n" for i, w in marked.items()}
        for i in pc.indices_nonzero(pc.match_substring_regex(key, r'[\x00-\x1f"\\]')).to_pylist():
            if i not in redo:
                redo[i] = orjson.dumps(clean(*(counts.column(name)[i].as_py() for name in COUNTS))).decode() + "\n"
        if redo:  # each marked row's line in place of its clean one
            joined = pc.coalesce(strings([redo.get(i) for i in range(len(joined))]), joined)
        offsets = np.frombuffer(joined.buffers()[1], np.int32, count=len(joined) + 1, offset=joined.offset * 4)
        first = int(offsets[0])
        self.extend_block(memoryview(joined.buffers()[2])[first:int(offsets[-1])],
                          offsets[1:].astype("int64") - first - 1)
        self._acquisitions += pc.sum(counts.column("acquisitions")).as_py() or 0
        self._handovers += pc.sum(handovers).as_py() or 0
        self._observed += pc.sum(counts.column("observed").cast(pa.int64())).as_py() or 0
        self._named += sum(w.handovers - w.clean_handovers for w in marked.values())

    def totals(self) -> tuple[int, int, int]:
        """Acquisitions, handovers and clean handovers over every key."""
        return self._acquisitions, self._handovers, self._handovers - self._named

    def observed(self) -> int:
        """How many keys are ordered by observation (their log lacks seq)."""
        return self._observed

    def clean_keys(self, limit: int) -> list[str]:
        """The first ``limit`` keys (in key order) without findings whose handovers were all clean."""
        out: list[str] = []
        if limit <= 0:
            return out
        for w in self:
            if w.findings == 0 and w.clean_handovers > 0:
                out.append(w.workflow_key)
                if len(out) == limit:
                    break
        return out

    def json_lines(self, rows: int = 65_536) -> Iterator[list[str]]:
        """The document's workflow items, one line of compact JSON each, in chunks of ``rows``."""
        chunk: list[str] = []
        for block in self.blocks():
            chunk += block.decode().split("\n")
            while len(chunk) >= rows:
                yield chunk[:rows]
                chunk = chunk[rows:]
        if chunk:
            yield chunk

    def __repr__(self) -> str:
        return f"WorkflowTable({len(self):,} workflow keys)"
