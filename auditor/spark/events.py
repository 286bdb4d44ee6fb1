"""Stages 2 and 3 of the Spark door, on the driver's side: the events kept (duplicates collapsed,
numbered in observation order, conflicts found over the whole input), the partitions' results
merged into one ``Explained`` with what they read of the input, lease health on the events of
the keys with lease evidence, and the timelines a report draws."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core.collector import no_gc
from ..core.model import Diagnostic, Finding
from ..explain.incidents import MAX_TIMELINE_EVENTS
from ..pipeline import Explained
from ..store import id_conflict, malformed_field
from . import tasks
from .inputs import offsets

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ..detect.batch.timeline import KeyTimeline


def _merge(rows: list, stats: SparkStats) -> tuple[Explained, dict[str, list]]:
    """The partitions' findings, incidents, diagnostics and workflow summaries as one ``Explained``,
    each list in the document's order, and what each partition read of the input
    (``tasks.INPUT_PARTS``, one item per partition); the partitions' timings go to ``stats``."""
    merged: dict[str, list] = {kind: [] for kind in tasks.PARTS}
    read: dict[str, list] = {kind: [] for kind in tasks.INPUT_PARTS}
    with no_gc():
        for r in rows:
            if r.kind == "time":
                stats.partitions.append((r.part, r.events, r.keys, r.load_s, r.detect_s))
            elif r.kind in read:
                read[r.kind].append(pickle.loads(r.payload))
            else:
                merged[r.kind].extend(pickle.loads(r.payload))
        for items in merged.values():  # stable: within a key, the partition's order is the document's
            items.sort(key=_workflow_key)
    stats.partitions.sort()
    return Explained(**merged), read


def _malformed(parts: list[list[tuple]]) -> list[Diagnostic]:
    """The ``malformed_field`` diagnostics of the whole input from the partitions' rows (per file
    and field: lines and lost summed, the first row the one with the lowest obs), as
    ``Store.malformed_fields`` gives them on one machine."""
    by: dict[tuple[str, str], list] = {}
    for part in parts:
        for name, fld, lines, first_line, key, seq, position, lost, first_obs in part:
            have = by.get((name, fld))
            if have is None:
                by[(name, fld)] = [lines, first_line, key, seq, position, lost, first_obs]
                continue
            have[0] += lines
            have[5] += lost
            if first_obs < have[6]:
                have[1:5] = [first_line, key, seq, position]
                have[6] = first_obs
    return [malformed_field(name, fld, *v[:6]) for (name, fld), v in by.items()]


#: Events are numbered in buckets of 2^14 observation positions (``obs``: file, then line): the
#: window that ranks them holds one bucket at a time, never a whole file.
BUCKET_BITS = 14


def _numbered(kept: "DataFrame", bucket_of_all: int | None = None) -> "DataFrame":
    """``kept`` with each event's ``position`` (SPEC rev 3): 1-based in global observation order
    (``obs``: file, then line), numbered once duplicates collapsed over every file, as one
    machine numbers them: the events of the buckets of positions before (earlier files, earlier
    lines of the same file), then the event's rank in its bucket. A window over a whole file held
    the file in one task: a 1.6 GB file ran 512 MiB executors out of Java heap. (A global sort
    numbered by partition is not stable: adaptive execution may split it differently between the
    count and the numbering; buckets of ``obs`` are the same in every job.) ``bucket_of_all``: the
    one bucket every event is in (the files' first and last ``obs`` say so), which needs no count:
    a small input's audit runs one Spark job fewer."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    bucket = F.shiftright("obs", BUCKET_BITS)
    if bucket_of_all is None:
        counts = kept.groupBy(bucket.alias("_b")).agg(F.count("*").alias("n")).collect()
    else:
        counts = [(bucket_of_all, 0)]
    # as a broadcast table, not a map literal: a 40M-line file has 2,442 buckets
    before = kept.sparkSession.createDataFrame(offsets(counts) or [(0, 0)], "_b long, _before long")
    rank = F.row_number().over(Window.partitionBy("_b").orderBy("obs"))
    return (kept.withColumn("_b", bucket).join(F.broadcast(before), "_b")
            .withColumn("position", (F.col("_before") + rank).cast("long")).drop("_b", "_before"))


def _first_observations(s1: "DataFrame") -> "DataFrame":
    """The events of stage 1 with exact duplicates collapsed as the single-node store collapses
    them (of one ``event_id`` and one content, the lowest ``obs``: file, then line), and ``_ids``,
    how many events are left with the row's ``event_id`` (more than one: a conflict)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    same = Window.partitionBy("event_id", *tasks.CONTENT_COLUMNS).orderBy("obs")
    # Partitioned by event_id once: both windows below are then computed without another shuffle.
    return (s1.filter(s1.tag == "e").select(*tasks.EVENT_NAMES).repartition("event_id")
            .withColumn("_nth", F.row_number().over(same)).filter("_nth = 1").drop("_nth")
            .withColumn("_ids", F.count("*").over(Window.partitionBy("event_id"))))


def _conflicts(parts: list[list[tuple]], names: dict[int, str]) -> list[Diagnostic]:
    """One ``event_id_conflict`` per ``event_id`` naming several events anywhere in the input,
    as ``Store.id_conflicts`` reports them (in observation order), from the partitions' rows of
    those events (``tasks.CONFLICT_COLUMNS``)."""
    by_id: dict[str, list[tuple]] = {}
    for event_id, _obs, source_id, line, key, seq, kind in sorted((r for part in parts for r in part),
                                                                   key=lambda r: r[1]):
        by_id.setdefault(event_id, []).append((names[source_id], line, key, seq, kind))
    return [id_conflict(eid, uses) for eid, uses in by_id.items()]


def _timelines(kept: "DataFrame", keys: list[str], findings: list[Finding], names: dict[int, str],
               partitions: int) -> dict[str, KeyTimeline]:
    """The timelines of ``keys`` (those a report draws), each drawn where its events are."""
    if not keys:
        return {}
    from pyspark.sql import functions as F

    wanted = set(keys)
    theirs = [f for f in findings if f.workflow_key in wanted]

    def draw(batches):
        from pyspark import TaskContext

        return tasks.timeline_partition(batches, TaskContext.get().partitionId(), names, keys, theirs,
                                        MAX_TIMELINE_EVENTS)
    rows = (kept.filter(F.col("workflow_key").isin(keys)).drop("_ids")
            .repartition(min(partitions, len(keys)), "workflow_key").mapInArrow(draw, tasks.STAGE3).collect())
    drawn: dict[str, KeyTimeline] = {}
    for r in rows:
        drawn.update(pickle.loads(r.payload))
    return {k: drawn[k] for k in keys if k in drawn}  # in the order excerpts() gives them


def _workflow_key(item: Any) -> str:
    return item.workflow_key



@dataclass
class SparkStats:
    """Where a Spark audit spent its time (seconds, wall clock on the driver)."""

    stage1_s: float = 0.0    # read + normalize every file (one task per file), accounting collected
    stage2_s: float = 0.0    # duplicates collapsed, repartition by workflow key, detect + explain, collect
    merge_s: float = 0.0     # unpickle and merge on the driver, narrow to the scope
    timelines_s: float = 0.0  # the timelines a report draws, from the events of their keys
    files: list[tuple[str, float]] = field(default_factory=list)  # (file, normalize seconds)
    pieces: int = 0  # stage 1's tasks over files: one per file, several per file split
    shuffle_partitions: int = 0  # the workflow-key partitions of stage 2
    # (partition, events, workflow keys, load seconds, detect + explain seconds)
    partitions: list[tuple[int, int, int, float, float]] = field(default_factory=list)
