"""The Spark door: the same audit, scaled out by workflow key on Apache Spark.

Split-brain detection is independent per workflow key, so the pipeline runs in two Spark stages
around the package's own code (``auditor.spark.tasks`` holds every call into it):

1. **read + normalize**, one task per input file: the product's readers (physical line numbers,
   gzip/zstd, careful CSV, OTLP) and its one SQL normalizer in a scratch DuckDB store. A
   DataFrame is normalized partition by partition, its rows numbered in its order.
2. **collapse duplicates, then detect + explain**: the first observation of each ``event_id``
   is kept (lowest file, then line, as on one machine); the events are repartitioned by workflow
   key and each partition is audited by ``analyze`` in a scratch DuckDB store (``mapInArrow``).

The driver then merges the per-partition findings, incidents, diagnostics and workflow summaries
(each partition's lists are already in the document's order, and no key spans two partitions, so
the merge is a stable sort by workflow key) with the input accounting into the ``AuditResult`` the
single-node audit builds, and so into the same JSON document, ``"engine": "spark"``.

    >>> from auditor.spark import audit
    >>> result = audit(["s3a://bucket/ownership/2026-07-26/"], master="spark://head:7077")

pyspark is an optional extra (``pip install 'split-brain-auditor[spark]'``); importing ``auditor``
never imports it.
"""

from __future__ import annotations

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

from .. import _no_gc, check_events, ordering_of
from ..errors import AuditorError, InputError
from ..model import Grade
from ..result import AuditResult, InputSummary, QuarantinedLine
from . import tasks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["audit", "run", "session", "SparkStats", "SparkUnavailable"]

INSTALL = "pip install 'split-brain-auditor[spark]'"
DATAFRAME = "<dataframe>"  # the file name a DataFrame's quarantined rows are reported under


class SparkUnavailable(AuditorError):
    """pyspark or Java is missing, or Spark could not start."""


@dataclass
class SparkStats:
    """Where a Spark audit spent its time (seconds, wall clock on the driver)."""

    stage1_s: float = 0.0    # read + normalize every file (one task per file), accounting collected
    stage2_s: float = 0.0    # duplicates collapsed, repartition by workflow key, detect + explain, collect
    merge_s: float = 0.0     # unpickle and merge on the driver
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


def audit(df_or_paths: "DataFrame | Iterable[str | os.PathLike] | str | os.PathLike", *,
          fmt: str = "auto", fail_on: Grade | str = Grade.STALE_ATTEMPT, keep_payloads: bool = False,
          spark: "SparkSession | None" = None, master: str | None = None,
          partitions: int | None = None) -> AuditResult:
    """Audit on Spark; the result (and its JSON document) equals ``auditor.audit``'s but for
    ``engine`` and for ``store``, which is None (the events stay in Spark).

    ``df_or_paths``: a DataFrame of events (one column per field; or a single string column
    ``value`` holding one JSON object per row), or paths: local files and directories, ``-``, or
    any URL the Spark installation reads (``s3a://``, ``hdfs://``, ``file://``). ``partitions``:
    how many workflow-key partitions to audit (default ``spark.sql.shuffle.partitions``).
    Blocking; raises ``AuditError``/``InputError`` like ``auditor.audit``, ``SparkUnavailable``.
    """
    return run(df_or_paths, fmt=fmt, fail_on=fail_on, keep_payloads=keep_payloads, spark=spark,
               master=master, partitions=partitions)[0]


def run(df_or_paths: Any, *, fmt: str = "auto", fail_on: Grade | str = Grade.STALE_ATTEMPT,
        keep_payloads: bool = False, spark: "SparkSession | None" = None, master: str | None = None,
        partitions: int | None = None) -> tuple[AuditResult, SparkStats]:
    """``audit`` with the timings of its stages and partitions (what ``bench/spark_scale.py`` prints)."""
    spark = spark or session(master)  # first: it says how to install pyspark when it is missing
    from pyspark import StorageLevel
    from pyspark.sql import DataFrame, Window
    from pyspark.sql import functions as F

    fail_on = Grade(fail_on)
    stats = SparkStats()
    t = time.perf_counter()
    if isinstance(df_or_paths, DataFrame):
        stage1 = _dataframe_stage1(df_or_paths, keep_payloads)
        names = [DATAFRAME]
    else:
        paths = [df_or_paths] if isinstance(df_or_paths, (str, os.PathLike)) else list(df_or_paths)
        sources = _sources(spark, [str(p) for p in paths])
        if not sources:
            check_events(InputSummary())
        stage1 = _files_stage1(spark, sources, fmt, keep_payloads)
        names = [name for _sid, name, _path, _url in sources]
    s1 = stage1.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        meta = s1.filter(F.col("tag") != "e").select(
            "tag", "source_id", "name", "line", "reason", "lines_read", "normalized", "quarantined",
            "seconds", "message", "ts_us").collect()
        failed = sorted((r for r in meta if r.tag == "x"), key=lambda r: r.source_id)
        if failed:  # the single-node audit stops at the first file it cannot read
            raise InputError(failed[0].message)
        files = sorted((r for r in meta if r.tag == "s"), key=lambda r: r.source_id)
        by_id = {r.source_id: r.name for r in files}
        stats.files = [(r.name, r.seconds) for r in files]
        quarantine = [QuarantinedLine(by_id[r.source_id], r.line, r.reason) for r in sorted(
            (r for r in meta if r.tag == "q"), key=lambda r: (r.source_id, r.line))][:tasks.QUARANTINE_FIRST]
        stats.stage1_s = time.perf_counter() - t

        # The first observation of each event_id (lowest obs: file, then line) is the event; the
        # rest are duplicates. Then all events of a workflow key meet in one partition.
        t = time.perf_counter()
        first = Window.partitionBy("event_id").orderBy("obs")
        kept = (s1.filter(F.col("tag") == "e").select(*(c.split()[0] for c in tasks.EVENT_COLUMNS.split(", ")))
                .withColumn("_nth", F.row_number().over(first)).filter("_nth = 1").drop("_nth"))
        n = partitions or int(spark.conf.get("spark.sql.shuffle.partitions"))

        def stage2(newest_us):
            return kept.repartition(n, "workflow_key").mapInArrow(
                _detect(newest_us, fail_on.value), tasks.STAGE2).collect()

        # Freshness is measured against the newest event of the log. The newest of every line read
        # is that of the events too, unless a duplicate event_id came with another time: then
        # the partitions, which see only events, say so and detection runs again.
        assumed = max((r.ts_us for r in files if r.ts_us is not None), default=None)
        rows = stage2(assumed)
        newest = max((r.newest_us for r in rows if r.newest_us is not None), default=None)
        if newest != assumed:
            rows = stage2(newest)
        stats.stage2_s = time.perf_counter() - t
    finally:
        s1.unpersist()
    events = sum(r.events for r in rows if r.kind == "time")
    summary = InputSummary(
        files=list(dict.fromkeys(names)), lines_read=sum(r.lines_read for r in files),
        events=events, duplicates=sum(r.normalized for r in files) - events,
        quarantined=sum(r.quarantined for r in files), quarantine=quarantine)
    check_events(summary)

    t = time.perf_counter()
    merged: dict[str, list] = {kind: [] for kind in tasks.PARTS}
    with _no_gc():
        for r in rows:
            if r.kind == "time":
                stats.partitions.append((r.part, r.events, r.keys, r.load_s, r.detect_s))
            else:
                merged[r.kind].extend(pickle.loads(r.payload))
        del rows
        for items in merged.values():  # stable: within a key, the partition's order is the document's
            items.sort(key=_workflow_key)
    stats.partitions.sort()
    result = AuditResult(ordering=ordering_of(merged["workflows"]), input=summary,
                         workflows=merged["workflows"], findings=merged["findings"],
                         incidents=merged["incidents"], diagnostics=merged["diagnostics"],
                         fail_on=fail_on, engine="spark")
    stats.merge_s = time.perf_counter() - t
    return result, stats


def _workflow_key(item: Any) -> str:
    return item.workflow_key


def _detect(newest_us: int | None, fail_on: str):
    def detect(batches):
        from pyspark import TaskContext

        return tasks.detect_partition(batches, TaskContext.get().partitionId(), newest_us, fail_on)
    return detect


def _sources(spark: "SparkSession", paths: list[str]) -> list[tuple[int, str, str, bool]]:
    """``(source_id, name, path, is_url)`` per input file, in the order the single-node audit
    ingests them: arguments in turn, the files below a directory sorted."""
    from ..ingest import discover
    from ..ingest.sources import _supported

    out: list[tuple[str, str, bool]] = []
    for p in paths:
        if "://" not in p:
            out.extend((s.name, str(s.path), False) for s in discover([p]))
            continue
        try:
            found = sorted(r.path for r in spark.read.format("binaryFile")
                           .option("recursiveFileLookup", "true").load(p).select("path").collect())
        except Exception as e:  # AnalysisException: PATH_NOT_FOUND, no filesystem for the scheme
            raise InputError(f"{p}: cannot list it through Spark ({_first_line(e)}); check the URL "
                             "and that the Spark installation has the filesystem") from e
        if len(found) > 1 or (found and Path(found[0]).name != Path(p.rstrip("/")).name):
            found = [f for f in found if _supported(Path(f))]  # below a directory: logs only
        out.extend((f, f, True) for f in found)
    return [(sid, name, path, url) for sid, (name, path, url) in enumerate(out, start=1)]


def _files_stage1(spark: "SparkSession", sources, fmt: str, keep_payloads: bool) -> "DataFrame":
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
    return frame.mapInArrow(lambda batches: tasks.normalize_files(batches, fmt, keep_payloads), tasks.STAGE1)


def _dataframe_stage1(df: "DataFrame", keep_payloads: bool) -> "DataFrame":
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
    counts = sorted((r.p, r.n) for r in numbered.groupBy(F.shiftright("mid", 33).alias("p"))
                    .agg(F.count("*").alias("n")).collect())
    offsets, total = [], 0
    for p, n in counts:
        offsets += [F.lit(p), F.lit(total)]
        total += n
    if not offsets:
        offsets = [F.lit(0), F.lit(0)]
    line = (F.element_at(F.create_map(*offsets), F.shiftright("mid", 33))
            + F.col("mid").bitwiseAND((1 << 33) - 1) + 1)
    return (numbered.select(line.cast("long").alias("line"), "raw")
            .mapInArrow(lambda batches: tasks.normalize_rows(batches, DATAFRAME, keep_payloads), tasks.STAGE1))


def _java() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(home and Path(home, "bin", "java").exists()) or shutil.which("java") is not None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
