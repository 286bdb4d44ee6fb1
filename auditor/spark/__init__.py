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
   findings carry their file and line. The same pass returns each partition's events of a
   conflicting ``event_id`` and every event of its keys with lease evidence: the driver groups the
   conflicts and measures lease health (which aggregates across keys) over those events.
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
import shutil
import sys
import time
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..pipeline import check_events, result_of
from ..core.errors import AuditorError, at_the_edge
from ..explain.incidents import drawn_keys
from ..core.limits import Limits
from ..core.model import Grade
from ..core.summary import IgnoredEntry, SkippedPath, first_unplaced
from ..explain.result import AuditResult, AuditSession, InputSummary, QuarantinedLine
from ..explain.scope import Scope
from ..normalize.vocabulary import Vocabulary, vocabulary_of
from ..store.ignored import summarize
from . import cluster, tasks
from .cluster import SparkFailed
from .events import (BUCKET_BITS, SparkStats, _conflicts, _first_observations, _malformed, _merge, _numbered,
                     _timelines)
from .inputs import DATAFRAME, _dataframe_stage1, _error, _files_stage1, _first_line, _sources

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


__all__ = ["audit", "run", "session", "SparkFailed", "SparkStats", "SparkUnavailable"]

INSTALL = "pip install 'split-brain-auditor[spark]'"
#: Why a Spark result's events cannot be read back (its session holds no store).
EVENTS_IN_SPARK = ("a Spark audit leaves its events in Spark: events_frame(), quarantine_frame() and "
                   "timeline() read a DuckDB store; audit with auditor.audit (--engine duckdb) to read "
                   "them back (the report's timelines are in result.timelines)")


class SparkUnavailable(AuditorError):
    """pyspark or Java is missing, or Spark could not start."""


def session(master: str | None = None, partitions: int | None = None,
            conf: dict[str, str] | None = None, archive: str | None = None) -> "SparkSession":
    """The active Spark session, or a new one on ``master`` (default ``local[*]``, unless run by
    ``spark-submit``, whose master wins) with ``conf`` (e.g. ``spark.executor.memory``), the
    driver's ``AUDITOR_*`` variables for the executors, and ``archive`` (a packed environment,
    ``cluster.settings``). Raises ``SparkUnavailable`` with how to fix it."""
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
    for key, value in cluster.settings(conf, archive, master).items():
        builder = builder.config(key, value)
    try:
        with cluster.jvm_output():
            spark = builder.getOrCreate()
    except Exception as e:  # pyspark's launcher errors (Java too old, gateway exited) vary by version
        raise SparkUnavailable(f"cannot start Spark ({_first_line(e)}); Spark 4 needs Java 17 or "
                               f"newer and pyspark 4 ({INSTALL})") from e
    spark.sparkContext.setLogLevel("ERROR")
    cluster.executors_python(spark, archive)
    return spark


@at_the_edge
def audit(df_or_paths: "DataFrame | Iterable[str | os.PathLike] | str | os.PathLike", *,
          fmt: str = "auto", fail_on: Grade | str = Grade.STALE_ATTEMPT, keep_payloads: bool = False,
          spark: "SparkSession | None" = None, master: str | None = None,
          partitions: int | None = None, spark_conf: dict[str, str] | None = None,
          archive: str | os.PathLike | None = None, split_bytes: int | None = None,
          allow_quarantined: int = 0, allow_unplaced: int = 0, scope: Scope | None = None,
          vocabulary: Vocabulary | str | os.PathLike | None = None,
          limits: Limits | None = None, by: Iterable[str] | None = None,
          heartbeat_misses: int = 1) -> AuditResult:
    """Audit on Spark; the result (and its JSON document) equals ``auditor.audit``'s with the
    same options but for ``engine``, and for its session, which holds no store (the events stay
    in Spark: ``events_frame()`` and ``timeline()`` raise ``ResultClosed``; ``close()`` is a no-op).

    ``df_or_paths``: a DataFrame of events (one column per field; or a single string column
    ``value`` holding one JSON object per row), or paths: local files and directories, ``-``, or
    any URL the Spark installation reads (``s3a://``, ``hdfs://``, ``file://``). ``partitions``:
    how many workflow-key partitions to audit (default: ``spark.sql.shuffle.partitions`` when set,
    else one per 32 MB of input, at least the cluster's cores). ``spark_conf``: settings of the
    session started here (``spark.executor.memory``, ...); ``archive``: a packed Python
    environment shipped to the executors (``spark.archives``) and run there; ``split_bytes``: the
    piece of an uncompressed JSON-lines file one task reads (default 64 MiB, or
    ``spark.auditor.splitBytes``). The executors run ``archive``'s Python, else ``PYSPARK_PYTHON``,
    else this interpreter - in a session passed as ``spark`` too - and are checked to import the
    auditor before anything is read; a failure on them is a ``SparkFailed`` naming its cause.
    ``allow_quarantined``, ``allow_unplaced``, ``scope``, ``vocabulary``, ``limits``, ``by`` and ``heartbeat_misses``
    mean what they mean for ``auditor.audit``; lease health is measured on the driver over the
    events of the keys that carry lease evidence. Blocking; raises the ``AuditorError``s ``auditor.audit`` raises,
    ``SparkUnavailable``, and ``SparkFailed`` (a failure on the executors, in one line).
    """
    return run(df_or_paths, fmt=fmt, fail_on=fail_on, keep_payloads=keep_payloads, spark=spark,
               master=master, partitions=partitions, spark_conf=spark_conf, archive=archive,
               split_bytes=split_bytes, allow_quarantined=allow_quarantined,
               allow_unplaced=allow_unplaced, scope=scope,
               vocabulary=vocabulary, limits=limits, by=by, heartbeat_misses=heartbeat_misses)[0]


def run(df_or_paths: Any, *, fmt: str = "auto", fail_on: Grade | str = Grade.STALE_ATTEMPT,
        keep_payloads: bool = False, spark: "SparkSession | None" = None, master: str | None = None,
        partitions: int | None = None, spark_conf: dict[str, str] | None = None,
        archive: str | os.PathLike | None = None, split_bytes: int | None = None,
        allow_quarantined: int = 0, allow_unplaced: int = 0, scope: Scope | None = None,
        vocabulary: Vocabulary | str | os.PathLike | None = None,
        limits: Limits | None = None, by: Iterable[str] | None = None,
        heartbeat_misses: int = 1) -> tuple[AuditResult, SparkStats]:
    """``audit`` with the timings of its stages and partitions (what ``bench/spark_scale.py`` prints)."""
    vocabulary = vocabulary_of(vocabulary)  # a vocabulary that cannot be used stops the run before Spark starts
    from ..detect.lease.batch import check_options

    check_options(by, heartbeat_misses)  # so does a bad lease option
    limits = limits or Limits.from_env()
    archive = None if archive is None else str(archive)
    if spark is None:  # first: it says how to install pyspark when it is missing
        spark = session(master, conf=spark_conf, archive=archive)
    cluster.executors_python(spark, archive)  # a caller's session (or the active one) too
    cluster.check_executors(spark)
    try:
        return _run(spark, df_or_paths, fmt, fail_on, keep_payloads, partitions, split_bytes,
                    allow_quarantined, allow_unplaced, scope, vocabulary, limits, by, heartbeat_misses)
    except AuditorError:
        raise
    except Exception as e:  # a task that failed on an executor comes as a Py4J trace: one line
        raise cluster.explain(e) from e


def _run(spark: "SparkSession", df_or_paths: Any, fmt: str, fail_on: Grade | str, keep_payloads: bool,
         partitions: int | None, split: int | None, allow_quarantined: int, allow_unplaced: int,
         scope: Scope | None,
         vocabulary: Vocabulary, limits: Limits, by: Iterable[str] | None,
         heartbeat_misses: int) -> tuple[AuditResult, SparkStats]:
    from pyspark import StorageLevel

    stats = SparkStats()
    skipped: list[SkippedPath] = []
    t = time.perf_counter()
    stage1, names, size = _stage1(spark, df_or_paths, fmt, keep_payloads, vocabulary, limits, skipped,
                                  cluster.split_bytes(spark, split))
    # On disk only past an executor's memory or so: a block spilled from memory and read back in
    # whole ran a 1 GB executor out of Java heap on a 9.8 GB file.
    level = StorageLevel.DISK_ONLY if size > cluster.IN_MEMORY_BYTES else StorageLevel.MEMORY_AND_DISK
    s1 = stage1.persist(level)
    firsts = kept = None
    try:
        files, quarantine, ignore = _accounting(s1, names, stats)
        stats.stage1_s = time.perf_counter() - t

        t = time.perf_counter()
        firsts = _first_observations(s1)
        bucket = _one_bucket(files)
        if bucket is None:  # the buckets are counted, then numbered, from one collapse of duplicates
            firsts = firsts.persist(level)
        kept = _numbered(firsts, bucket).persist(level)
        n = cluster.partitions_for(spark, size, partitions)
        stats.shuffle_partitions = n
        rows = _stage2(kept, names, files, n)
        stats.stage2_s = time.perf_counter() - t

        t = time.perf_counter()
        events = sum(r.events for r in rows if r.kind == "time")
        found, read = _merge(rows, stats)
        del rows
        summary, unplaced = _summary(files, names, quarantine, ignore, skipped, events, read)
        check_events(summary)
        conflicts = _conflicts(read["conflicts"], names) + _malformed(read["malformed"])
        health = tasks.lease_health_of(read.pop("lease"), names, by, heartbeat_misses)
        result = result_of(found, summary, conflicts, health, unplaced, fail_on=fail_on,
                           allow_quarantined=allow_quarantined, scope=scope,
                           session=AuditSession(None, EVENTS_IN_SPARK), engine="spark",
                           allow_unplaced=allow_unplaced)
        stats.merge_s = time.perf_counter() - t

        t = time.perf_counter()
        result.timelines = _timelines(kept, drawn_keys(result), result.findings, names, n)
        stats.timelines_s = time.perf_counter() - t
    finally:
        for frame in (s1, firsts, kept):
            if frame is not None:
                frame.unpersist()
    return result, stats


def _one_bucket(files: list) -> int | None:
    """The one bucket of observation positions (``events.BUCKET_BITS``) every event of the input
    is in, from each file's (or piece's) first and last ``obs``; None when they span several."""
    buckets = {obs >> BUCKET_BITS for r in files for obs in (r.obs, r.last_obs) if obs is not None}
    return buckets.pop() if len(buckets) == 1 else None


def _stage1(spark: "SparkSession", df_or_paths: Any, fmt: str, keep_payloads: bool, vocabulary: Vocabulary,
            limits: Limits, skipped: list[SkippedPath],
            split: int) -> tuple["DataFrame", dict[int, str], int]:
    """Stage 1 (read + normalize) of a DataFrame or of paths, the input files' names by source id,
    and the bytes of the local input files (what sizes the shuffle)."""
    from pyspark.sql import DataFrame

    if isinstance(df_or_paths, DataFrame):
        return _dataframe_stage1(df_or_paths, keep_payloads, vocabulary), {1: DATAFRAME}, 0
    paths = [df_or_paths] if isinstance(df_or_paths, (str, os.PathLike)) else list(df_or_paths)
    sources = _sources(spark, [str(p) for p in paths], limits, skipped)
    if not sources:
        check_events(InputSummary(skipped=skipped))
    size = sum(Path(path).stat().st_size for _sid, _name, path, url in sources if not url)
    return (_files_stage1(spark, sources, fmt, keep_payloads, vocabulary, limits, split),
            {sid: name for sid, name, _path, _url in sources}, size)


def _accounting(s1: "DataFrame", names: dict[int, str],
                stats: SparkStats) -> tuple[list, list[QuarantinedLine], list[IgnoredEntry]]:
    """Each file's accounting rows (``STAGE1`` tag s, in source order), the first quarantined
    lines and the [ignore] entries of the whole input (tag i rows, merged as ``Store.input_summary``
    merges them on one machine); raises the single-node audit's error for the first file that
    could not be read."""
    meta = s1.filter(s1.tag != "e").select(
        "tag", "source_id", "name", "line", "reason", "lines_read", "normalized", "quarantined",
        "ignored", "obs", "last_obs", "seconds", "message", "ts_us").collect()
    failed = sorted((r for r in meta if r.tag == "x"), key=lambda r: r.source_id)
    if failed:  # the single-node audit stops at the first file it cannot read
        raise _error(failed[0].reason, failed[0].message)
    files = sorted((r for r in meta if r.tag == "s"), key=lambda r: r.source_id)
    seconds: dict[str, float] = {}  # a file split in pieces: its pieces' seconds summed
    for r in files:
        seconds[r.name] = seconds.get(r.name, 0.0) + r.seconds
    stats.files = list(seconds.items())
    stats.pieces = len(files)
    quarantine = [QuarantinedLine(names[r.source_id], r.line, r.reason) for r in sorted(
        (r for r in meta if r.tag == "q"), key=lambda r: (r.source_id, r.line))][:tasks.QUARANTINE_FIRST]
    ignore = summarize((r.name, r.reason, r.ignored, names[r.source_id], r.line, json.loads(r.message))
                       for r in sorted((r for r in meta if r.tag == "i"), key=lambda r: r.obs))
    return files, quarantine, ignore


def _detect(names: dict[int, str], newest_us: int | None):
    def detect(batches):
        from pyspark import TaskContext

        return tasks.detect_partition(batches, TaskContext.get().partitionId(), names, newest_us)
    return detect


def _stage2(kept: "DataFrame", names: dict[int, str], files: list, n: int) -> list:
    """Stage 2 (detect + explain per workflow-key partition) over the events kept.

    Freshness is measured against the newest event of the log. The newest of every event
    normalized is that of the events kept too, unless a copy collapsed as a duplicate (one
    event_id, one content) parsed to another time: then the partitions, which see only the events
    kept, say so and detection runs again."""
    by_key = kept.repartition(n, "workflow_key")  # with _ids: a partition finds its conflicting events

    def stage2(newest_us):
        return by_key.mapInArrow(_detect(names, newest_us), tasks.STAGE2).collect()

    assumed = max((r.ts_us for r in files if r.ts_us is not None), default=None)
    rows = stage2(assumed)
    newest = max((r.newest_us for r in rows if r.newest_us is not None), default=None)
    return rows if newest == assumed else stage2(newest)


def _summary(files: list, names: dict[int, str], quarantine: list[QuarantinedLine], ignore: list[IgnoredEntry],
             skipped: list[SkippedPath], events: int, read: dict[str, list]) -> tuple[InputSummary, dict[str, int]]:
    """The input accounting of the whole run, and the unplaced events by kind, from the files'
    rows and what the partitions read (``tasks.INPUT_PARTS``)."""
    unplaced: dict[str, int] = {}
    for part in read["unplaced"]:
        for kind, count in part.items():
            unplaced[kind] = unplaced.get(kind, 0) + count
    first = first_unplaced([r for part in read["unplaced_first"] for r in part], tasks.QUARANTINE_FIRST)
    summary = InputSummary(
        files=list(dict.fromkeys(names.values())), lines_read=sum(r.lines_read for r in files),
        events=events, duplicates=sum(r.normalized for r in files) - events,
        quarantined=sum(r.quarantined for r in files), ignored=sum(r.ignored or 0 for r in files),
        ignore=ignore, unplaced=sum(unplaced.values()),
        quarantine=quarantine, unplaced_first=first,
        skipped=skipped)
    return summary, unplaced


def _java() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(home and Path(home, "bin", "java").exists()) or shutil.which("java") is not None


