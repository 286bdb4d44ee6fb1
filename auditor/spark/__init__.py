"""The Spark door: the same audit, scaled out by workflow key on Apache Spark.

Split-brain detection is independent per workflow key, so the pipeline runs in Spark stages
around the package's own code (``auditor.spark.tasks`` holds every call into it):

1. **read + normalize**, one task per input file: the product's readers (physical line numbers,
   gzip/zstd, careful CSV, OTLP, the input limits) and its one SQL normalizer, with the
   vocabulary (``--map``), in a scratch DuckDB store. A DataFrame is normalized partition by
   partition, its rows numbered in its order.
2. **collapse duplicates, then detect + explain**: of the events sharing one ``event_id`` and one
   content, the first observation (lowest file, then line) is kept, as on one machine; an
   ``event_id`` left naming several events is an ``event_id_conflict`` over the whole input. The
   events are repartitioned by workflow key and each partition is detected and explained in a
   scratch DuckDB store (``mapInArrow``), the input files' names loaded beside the events so the
   findings carry their file and line.
3. **timelines**: after the driver has merged the partitions and narrowed the result to the scope,
   the events of the few workflow keys the HTML report draws are loaded again, by key, and their
   timelines drawn by the package's own ``excerpts``.

The driver merges the per-partition findings, incidents, diagnostics and workflow summaries
(each partition's lists are already in the document's order, and no key spans two partitions, so
the merge is a stable sort by workflow key) with the input accounting and the conflicts into the
``AuditResult`` the single-node audit builds, and so into the same JSON document, ``"engine":
"spark"``; the allowance (``allow_quarantined``), the scope and the verdict are applied as
``analyze`` applies them.

    >>> from auditor.spark import audit
    >>> result = audit(["s3a://bucket/ownership/2026-07-26/"], master="spark://head:7077")

The events stay in Spark: the result's session holds no store, so ``events_frame()``,
``quarantine_frame()`` and ``timeline()`` raise ``ResultClosed`` saying so (the report's
timelines come with the result). pyspark is an optional extra (``pip install
'split-brain-auditor[spark]'``); importing ``auditor`` never imports it.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import sys
import time
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import errors
from ..pipeline import Explained, check_events, ordering_of, with_conflicts
from ..core.collector import no_gc
from ..core.errors import AuditorError, InputError, at_the_edge
from ..explain.incidents import MAX_TIMELINE_EVENTS, drawn_keys
from ..core.limits import Limits
from ..core.model import Diagnostic, Finding, Grade, SkippedPath, UnplacedLine
from ..explain.result import AuditResult, AuditSession, InputSummary, QuarantinedLine
from ..explain.result import narrow
from ..explain.scope import Scope
from ..store import id_conflict, malformed_field
from ..normalize.vocabulary import Vocabulary, vocabulary_of
from . import tasks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..detect.batch.timeline import KeyTimeline

__all__ = ["audit", "run", "session", "SparkStats", "SparkUnavailable"]

INSTALL = "pip install 'split-brain-auditor[spark]'"
DATAFRAME = "<dataframe>"  # the file name a DataFrame's quarantined rows are reported under
#: Why a Spark result's events cannot be read back (its session holds no store).
EVENTS_IN_SPARK = ("a Spark audit leaves its events in Spark: events_frame(), quarantine_frame() and "
                   "timeline() read a DuckDB store; audit with auditor.audit (--engine duckdb) to read "
                   "them back (the report's timelines are in result.timelines)")


class SparkUnavailable(AuditorError):
    """pyspark or Java is missing, or Spark could not start."""


@dataclass
class SparkStats:
    """Where a Spark audit spent its time (seconds, wall clock on the driver)."""

    stage1_s: float = 0.0    # read + normalize every file (one task per file), accounting collected
    stage2_s: float = 0.0    # duplicates collapsed, repartition by workflow key, detect + explain, collect
    merge_s: float = 0.0     # unpickle and merge on the driver, narrow to the scope
    timelines_s: float = 0.0  # the timelines a report draws, from the events of their keys
    files: list[tuple[str, float]] = field(default_factory=list)  # (file, normalize seconds)
    # (partition, events, workflow keys, load seconds, detect + explain seconds)
    partitions: list[tuple[int, int, int, float, float]] = field(default_factory=list)


def session(master: str | None = None, partitions: int | None = None,
            conf: dict[str, str] | None = None) -> "SparkSession":
    """The active Spark session, or a new one on ``master`` (default ``local[*]``, unless run by
    ``spark-submit``, whose master wins) with ``conf`` (e.g. ``spark.driver.memory``). Raises
    ``SparkUnavailable`` with how to fix it."""
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:
        raise SparkUnavailable(f"--engine spark needs pyspark, which is not installed ({e}); "
                               f"install it with {INSTALL}") from e
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas",
                            category=FutureWarning)
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started the JVM already
    if not submitted and not _java():
        raise SparkUnavailable("--engine spark needs Java 17 or newer (Spark 4 runs on it) and none "
                               "was found; install a JDK (apt-get install -y openjdk-17-jre-headless) "
                               "or set JAVA_HOME")
    # Workers must import this auditor, with duckdb and pyarrow: this interpreter, this package.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    here = str(Path(__file__).resolve().parent.parent.parent)
    os.environ["PYTHONPATH"] = os.pathsep.join([here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                         if p and p != here])
    builder = (SparkSession.builder.appName("split-brain-auditor")
               .config("spark.ui.showConsoleProgress", "false"))
    if master is not None or not submitted:
        builder = builder.master(master or "local[*]")
    if partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(partitions))
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as e:  # pyspark's launcher errors (Java too old, gateway exited) vary by version
        raise SparkUnavailable(f"cannot start Spark ({_first_line(e)}); Spark 4 needs Java 17 or "
                               f"newer and pyspark 4 ({INSTALL})") from e
    spark.sparkContext.setLogLevel("ERROR")
    return spark


@at_the_edge
def audit(df_or_paths: "DataFrame | Iterable[str | os.PathLike] | str | os.PathLike", *,
          fmt: str = "auto", fail_on: Grade | str = Grade.STALE_ATTEMPT, keep_payloads: bool = False,
          spark: "SparkSession | None" = None, master: str | None = None,
          partitions: int | None = None, allow_quarantined: int = 0, scope: Scope | None = None,
          vocabulary: Vocabulary | str | os.PathLike | None = None,
          limits: Limits | None = None, by: Iterable[str] | None = None,
          heartbeat_misses: int = 1) -> AuditResult:
    """Audit on Spark; the result (and its JSON document) equals ``auditor.audit``'s with the
    same options but for ``engine``, and for its session, which holds no store (the events stay
    in Spark: ``events_frame()`` and ``timeline()`` raise ``ResultClosed``; ``close()`` is a no-op).

    ``df_or_paths``: a DataFrame of events (one column per field; or a single string column
    ``value`` holding one JSON object per row), or paths: local files and directories, ``-``, or
    any URL the Spark installation reads (``s3a://``, ``hdfs://``, ``file://``). ``partitions``:
    how many workflow-key partitions to audit (default ``spark.sql.shuffle.partitions``).
    ``allow_quarantined``, ``scope``, ``vocabulary``, ``limits``, ``by`` and ``heartbeat_misses``
    mean what they mean for ``auditor.audit``; lease health is measured on the driver over the
    events of the keys that carry lease evidence. Blocking; raises the ``AuditorError``s ``auditor.audit`` raises, and
    ``SparkUnavailable``.
    """
    return run(df_or_paths, fmt=fmt, fail_on=fail_on, keep_payloads=keep_payloads, spark=spark,
               master=master, partitions=partitions, allow_quarantined=allow_quarantined, scope=scope,
               vocabulary=vocabulary, limits=limits, by=by, heartbeat_misses=heartbeat_misses)[0]


def run(df_or_paths: Any, *, fmt: str = "auto", fail_on: Grade | str = Grade.STALE_ATTEMPT,
        keep_payloads: bool = False, spark: "SparkSession | None" = None, master: str | None = None,
        partitions: int | None = None, allow_quarantined: int = 0, scope: Scope | None = None,
        vocabulary: Vocabulary | str | os.PathLike | None = None,
        limits: Limits | None = None, by: Iterable[str] | None = None,
        heartbeat_misses: int = 1) -> tuple[AuditResult, SparkStats]:
    """``audit`` with the timings of its stages and partitions (what ``bench/spark_scale.py`` prints)."""
    vocabulary = vocabulary_of(vocabulary)  # a vocabulary that cannot be used stops the run before Spark starts
    from ..detect.lease.batch import check_options

    check_options(by, heartbeat_misses)  # so does a bad lease option
    limits = limits or Limits.from_env()
    spark = spark or session(master)  # first: it says how to install pyspark when it is missing
    from pyspark import StorageLevel
    from pyspark.sql import DataFrame

    fail_on = Grade(fail_on)
    stats = SparkStats()
    skipped: list[SkippedPath] = []
    t = time.perf_counter()
    if isinstance(df_or_paths, DataFrame):
        stage1 = _dataframe_stage1(df_or_paths, keep_payloads, vocabulary)
        names = {1: DATAFRAME}
    else:
        paths = [df_or_paths] if isinstance(df_or_paths, (str, os.PathLike)) else list(df_or_paths)
        sources = _sources(spark, [str(p) for p in paths], limits, skipped)
        if not sources:
            check_events(InputSummary(skipped=skipped))
        stage1 = _files_stage1(spark, sources, fmt, keep_payloads, vocabulary, limits)
        names = {sid: name for sid, name, _path, _url in sources}
    s1 = stage1.persist(StorageLevel.MEMORY_AND_DISK)
    kept = None
    try:
        meta = s1.filter(s1.tag != "e").select(
            "tag", "source_id", "name", "line", "reason", "lines_read", "normalized", "quarantined",
            "ignored", "obs", "seconds", "message", "ts_us").collect()
        failed = sorted((r for r in meta if r.tag == "x"), key=lambda r: r.source_id)
        if failed:  # the single-node audit stops at the first file it cannot read
            raise _error(failed[0].reason, failed[0].message)
        files = sorted((r for r in meta if r.tag == "s"), key=lambda r: r.source_id)
        stats.files = [(r.name, r.seconds) for r in files]
        quarantine = [QuarantinedLine(names[r.source_id], r.line, r.reason) for r in sorted(
            (r for r in meta if r.tag == "q"), key=lambda r: (r.source_id, r.line))][:tasks.QUARANTINE_FIRST]
        stats.stage1_s = time.perf_counter() - t

        t = time.perf_counter()
        kept = _numbered(_first_observations(s1)).persist(StorageLevel.MEMORY_AND_DISK)
        conflicts = _conflicts(kept, names)
        n = partitions or int(spark.conf.get("spark.sql.shuffle.partitions"))
        by_key = kept.drop("_ids").repartition(n, "workflow_key")

        def stage2(newest_us):
            return by_key.mapInArrow(_detect(names, newest_us), tasks.STAGE2).collect()

        # Freshness is measured against the newest event of the log. The newest of every event
        # normalized is that of the events kept too, unless a copy collapsed as a duplicate (one
        # event_id, one content) parsed to another time: then the partitions, which see only the
        # events kept, say so and detection runs again.
        assumed = max((r.ts_us for r in files if r.ts_us is not None), default=None)
        rows = stage2(assumed)
        newest = max((r.newest_us for r in rows if r.newest_us is not None), default=None)
        if newest != assumed:
            rows = stage2(newest)
        stats.stage2_s = time.perf_counter() - t

        events = sum(r.events for r in rows if r.kind == "time")
        t = time.perf_counter()
        found, read = _merge(rows, stats)
        del rows
        unplaced: dict[str, int] = {}
        for part in read["unplaced"]:
            for kind, n in part.items():
                unplaced[kind] = unplaced.get(kind, 0) + n
        first = sorted((r for part in read["unplaced_first"] for r in part), key=lambda r: r[4])
        summary = InputSummary(
            files=list(dict.fromkeys(names.values())), lines_read=sum(r.lines_read for r in files),
            events=events, duplicates=sum(r.normalized for r in files) - events,
            quarantined=sum(r.quarantined for r in files), ignored=sum(r.ignored or 0 for r in files),
            ignore=_ignored(meta, names), unplaced=sum(unplaced.values()),
            quarantine=quarantine, unplaced_first=[UnplacedLine(*r[:4]) for r in first[:tasks.QUARANTINE_FIRST]],
            skipped=skipped)
        check_events(summary)
        conflicts += _malformed(read["malformed"])
        health = _lease_health(kept, names, by, heartbeat_misses)
        result = AuditResult(ordering=ordering_of(found.workflows), input=summary,
                             workflows=found.workflows, findings=found.findings,
                             incidents=found.incidents,
                             diagnostics=with_conflicts(found.diagnostics, conflicts + list(health.diagnostics)),
                             fail_on=fail_on, allow_quarantined=allow_quarantined, engine="spark",
                             session=AuditSession(None, EVENTS_IN_SPARK), lease_health=health,
                             unplaced=unplaced)
        result = narrow(result, scope)
        stats.merge_s = time.perf_counter() - t

        t = time.perf_counter()
        result.timelines = _timelines(kept, drawn_keys(result), result.findings, names, n)
        stats.timelines_s = time.perf_counter() - t
    finally:
        s1.unpersist()
        if kept is not None:
            kept.unpersist()
    return result, stats


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


def _ignored(meta: list, names: dict[int, str]) -> list:
    """The [ignore] entries of the whole input from the files' rows (tag i), merged as
    ``Store.input_summary`` merges them on one machine."""
    from ..store.ignored import summarize

    rows = sorted((r for r in meta if r.tag == "i"), key=lambda r: r.obs)
    return summarize((r.name, r.reason, r.ignored, names[r.source_id], r.line, json.loads(r.message)) for r in rows)


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


def _numbered(kept: "DataFrame") -> "DataFrame":
    """``kept`` with each event's ``position`` (SPEC rev 3): 1-based in global observation order
    (``obs``: file, then line), numbered once duplicates collapsed over every file, as one
    machine numbers them: the events of the files before, then the event's rank in its file.
    (A global sort numbered by partition is not stable: adaptive execution may split it
    differently between the count and the numbering.)"""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    counts = kept.groupBy("source_id").agg(F.count("*").alias("n")).collect()
    rank = F.row_number().over(Window.partitionBy("source_id").orderBy("obs"))
    return kept.withColumn("position", (F.element_at(_before(counts), F.col("source_id")) + rank).cast("long"))


def _before(counts: list) -> Any:
    """A map column from each group to the rows of the groups before it, given ``counts`` rows
    ``(group, n)``: what numbering rows in order across groups adds to a row's rank in its own."""
    from pyspark.sql import functions as F

    offsets, total = [], 0
    for group, n in sorted(tuple(r) for r in counts):
        offsets += [F.lit(group), F.lit(total)]
        total += n
    return F.create_map(*(offsets or [F.lit(0), F.lit(0)]))


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


def _conflicts(kept: "DataFrame", names: dict[int, str]) -> list[Diagnostic]:
    """One ``event_id_conflict`` per ``event_id`` naming several events anywhere in the input,
    as ``Store.id_conflicts`` reports them (in observation order)."""
    rows = kept.filter("_ids > 1").select("event_id", "obs", "source_id", "line", "workflow_key",
                                          "seq", "kind").collect()
    by_id: dict[str, list[tuple]] = {}
    for r in sorted(rows, key=lambda r: r.obs):
        by_id.setdefault(r.event_id, []).append((names[r.source_id], r.line, r.workflow_key, r.seq, r.kind))
    return [id_conflict(eid, uses) for eid, uses in by_id.items()]


def _lease_health(kept: "DataFrame", names: dict[int, str], by: Any, heartbeat_misses: int):
    """Lease health (SPEC section 7) over the events of the keys with lease evidence, on the driver."""
    from pyspark.sql import functions as F

    keys = kept.filter(F.col("lease_until_us").isNotNull() | F.col("heartbeat").isNotNull()).select(
        "workflow_key").distinct()
    table = kept.join(keys, "workflow_key", "left_semi").drop("_ids").select(*tasks.EVENT_NAMES).toArrow()
    return tasks.lease_health_of(table.to_batches(), names, by, heartbeat_misses)


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


def _detect(names: dict[int, str], newest_us: int | None):
    def detect(batches):
        from pyspark import TaskContext

        return tasks.detect_partition(batches, TaskContext.get().partitionId(), names, newest_us)
    return detect


def _error(name: str | None, message: str) -> AuditorError:
    """The error a task met reading a file, as the class the single-node audit raises."""
    cls = getattr(errors, name or "", None)
    if not (isinstance(cls, type) and issubclass(cls, AuditorError)):
        cls = InputError
    return cls(message)


def _sources(spark: "SparkSession", paths: list[str], limits: Limits,
             skipped: list[SkippedPath]) -> list[tuple[int, str, str, bool]]:
    """``(source_id, name, path, is_url)`` per input file, in the order the single-node audit
    ingests them: arguments in turn, the files below a directory sorted. What a local directory
    holds that is not a file goes to ``skipped``, as on one machine."""
    from ..ingest import discover
    from ..ingest.sources import is_log_file

    out: list[tuple[str, str, bool]] = []
    for p in paths:
        if "://" not in p:
            out.extend((s.name, str(s.path), False) for s in discover([p], limits, skipped))
            continue
        try:
            found = sorted(r.path for r in spark.read.format("binaryFile")
                           .option("recursiveFileLookup", "true").load(p).select("path").collect())
        except Exception as e:  # AnalysisException: PATH_NOT_FOUND, no filesystem for the scheme
            raise InputError(f"{p}: cannot list it through Spark ({_first_line(e)}); check the URL "
                             "and that the Spark installation has the filesystem") from e
        if len(found) > 1 or (found and Path(found[0]).name != Path(p.rstrip("/")).name):
            found = [f for f in found if is_log_file(Path(f))]  # below a directory: logs only
        out.extend((f, f, True) for f in found)
    return [(sid, name, path, url) for sid, (name, path, url) in enumerate(out, start=1)]


def _files_stage1(spark: "SparkSession", sources, fmt: str, keep_payloads: bool, vocabulary: Vocabulary,
                  limits: Limits) -> "DataFrame":
    """One task per local file (read where it lies); files on a Hadoop filesystem come through
    Spark's binaryFile reader and are spooled to the task's disk for the product's readers."""
    schema = "source_id int, name string, path string, content binary"
    local = [(sid, name, path, None) for sid, name, path, url in sources if not url]
    remote = {path: (sid, name) for sid, name, path, url in sources if url}
    frames = []
    if local:
        rdd = spark.sparkContext.parallelize(local, len(local))
        frames.append(spark.createDataFrame(rdd, schema))
    if remote:
        from pyspark.sql import functions as F

        ids = spark.createDataFrame([(p, sid, name) for p, (sid, name) in remote.items()],
                                    "path string, source_id int, name string")
        content = spark.read.format("binaryFile").load(list(remote)).select("path", "content")
        frames.append(content.join(F.broadcast(ids), "path").select("source_id", "name", "path", "content"))
    frame = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    return frame.mapInArrow(lambda batches: tasks.normalize_files(batches, fmt, keep_payloads, vocabulary, limits),
                            tasks.STAGE1)


def _dataframe_stage1(df: "DataFrame", keep_payloads: bool, vocabulary: Vocabulary) -> "DataFrame":
    """Each row as one raw JSON object, numbered from 1 in the DataFrame's order, normalized per
    partition. A single string column ``value`` (``spark.read.text``) is taken as the lines."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BinaryType, StringType

    fields = df.schema.fields
    if len(fields) == 1 and fields[0].name == "value" and isinstance(fields[0].dataType, (StringType, BinaryType)):
        raw = F.col("value").cast("binary")
    else:
        raw = F.to_json(F.struct(*[F.col(f"`{f.name}`") for f in fields])).cast("binary")
    numbered = df.select(raw.alias("raw"), F.monotonically_increasing_id().alias("mid"))
    # monotonically_increasing_id is (partition << 33) + row within it: numbering in order needs
    # the rows of the partitions before.
    counts = numbered.groupBy(F.shiftright("mid", 33).alias("p")).agg(F.count("*").alias("n")).collect()
    line = (F.element_at(_before(counts), F.shiftright("mid", 33)) + F.col("mid").bitwiseAND((1 << 33) - 1) + 1)
    return (numbered.select(line.cast("long").alias("line"), "raw")
            .mapInArrow(lambda batches: tasks.normalize_rows(batches, DATAFRAME, keep_payloads, vocabulary),
                        tasks.STAGE1))


def _java() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(home and Path(home, "bin", "java").exists()) or shutil.which("java") is not None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
