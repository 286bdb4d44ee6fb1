"""Stage 1 of the Spark door: the input files found (as one machine finds them) and read where
they lie, or a DataFrame numbered row by row, each through the package's own readers and
normalizer in the tasks (``tasks.normalize_files``, ``tasks.normalize_rows``)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import errors
from ..core.errors import AuditorError, InputError
from ..core.limits import Limits
from ..core.summary import SkippedPath
from ..normalize.vocabulary import Vocabulary
from . import tasks

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LOG = logging.getLogger("auditor.spark")
#: The file name a DataFrame's quarantined rows are reported under.
DATAFRAME = "<dataframe>"


def offsets(counts: list) -> list[tuple[Any, int]]:
    """``(group, rows of the groups before it)`` in group order, given ``counts`` rows ``(group,
    n)``: what numbering rows in order across groups adds to a row's rank in its own."""
    out, total = [], 0
    for group, n in sorted(tuple(r) for r in counts):
        out.append((group, total))
        total += n
    return out


def _before(counts: list) -> Any:
    """``offsets`` as a map column from each group (a few groups: a DataFrame's partitions)."""
    from pyspark.sql import functions as F

    pairs = [F.lit(x) for pair in offsets(counts) for x in pair]
    return F.create_map(*(pairs or [F.lit(0), F.lit(0)]))


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
            # absolute: an executor does not run in the driver's working directory
            out.extend((s.name, str(Path(s.path).absolute()), False) for s in discover([p], limits, skipped))
            continue
        try:
            found = sorted(r.path for r in spark.read.format("binaryFile")
                           .option("recursiveFileLookup", "true").load(p).select("path").collect())
        except Exception as e:  # AnalysisException: PATH_NOT_FOUND, no filesystem for the scheme
            raise InputError(f"{p}: cannot list it through Spark ({_first_line(e)}); check the URL "
                             "and that the Spark installation has the filesystem") from e
        if len(found) > 1 or (found and Path(found[0]).name != Path(p.rstrip("/")).name):
            found = [f for f in found if is_log_file(Path(f))]  # below a directory: logs only
        # a file: URL is read where it lies, as a local file (and so split when it is large)
        out.extend((f, _local(f), False) if f.startswith("file:") else (f, f, True) for f in found)
    return [(sid, name, path, url) for sid, (name, path, url) in enumerate(out, start=1)]


def _files_stage1(spark: "SparkSession", sources, fmt: str, keep_payloads: bool, vocabulary: Vocabulary,
                  limits: Limits, split_bytes: int) -> "DataFrame":
    """One task per piece of a local file (read where it lies): an uncompressed JSON-lines file
    larger than ``split_bytes`` in line-aligned pieces (``_spans``), any other file whole. Files
    on a Hadoop filesystem come whole through Spark's binaryFile reader and are spooled to the
    task's disk for the product's readers."""
    schema = "source_id int, name string, path string, content binary, start long, end long, first_line long"
    local = _pieces(spark, [(sid, name, path) for sid, name, path, url in sources if not url], fmt, limits,
                    split_bytes)
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
        frames.append(content.join(F.broadcast(ids), "path").select(
            "source_id", "name", "path", "content", *(F.lit(None).cast("long").alias(c)
                                                      for c in ("start", "end", "first_line"))))
    frame = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    return frame.mapInArrow(lambda batches: tasks.normalize_files(batches, fmt, keep_payloads, vocabulary, limits),
                            tasks.STAGE1)


def _pieces(spark: "SparkSession", files: list[tuple[int, str, str]], fmt: str, limits: Limits,
            split_bytes: int) -> list[tuple]:
    """Stage 1's rows for local files: ``(source_id, name, path, None, start, end, first_line)``,
    several per file split, ``start`` None for a file read whole (logged when it is large)."""
    from ..ingest import Source, detect_format
    from ..ingest.compression import compression_of

    whole, split = [], {}
    for sid, name, path in files:
        size = Path(path).stat().st_size
        if size <= split_bytes:
            whole.append((sid, name, path, None, None, None, None))
            continue
        kind = fmt if fmt != "auto" else detect_format(Source(name, Path(path), size, limits))
        if kind == "jsonl" and compression_of(Path(path)) is None:
            split[sid] = (name, path, size)
            continue
        why = "compressed" if compression_of(Path(path)) else f"{kind}, not JSON lines"
        LOG.warning("%s: not split (%s): one task reads it whole, in bounded memory but alone; "
                    "decompress it or write JSON lines to spread it over the cluster", name, why)
        whole.append((sid, name, path, None, None, None, None))
    if not split:
        return whole
    ranges = [(sid, path, at, min(at + split_bytes, size)) for sid, (name, path, size) in split.items()
              for at in range(0, size, split_bytes)]
    census = spark.sparkContext.parallelize(ranges, len(ranges)).map(newline_census).collect()
    for sid, (name, path, size) in split.items():
        mine = sorted((c[1:] for c in census if c[0] == sid))
        whole.extend((sid, name, path, None, *span) for span in _spans(mine, size))
    return sorted(whole, key=lambda r: (r[0], r[4] or 0))


def _spans(census: list[tuple[int, int, int, bool]], size: int) -> list[tuple[int, int, int]]:
    """The line-aligned pieces ``(start, end, first_line)`` of a file of ``size`` bytes from the
    census of its byte ranges in order (``newline_census``: start, newlines, first newline,
    ends with one): each range's piece begins at the first line that starts in it (a line longer
    than a range leaves that range without a piece), numbered by the newlines before it."""
    starts = {0: 1}
    before = 0  # newlines before the range
    for i, (start, count, first, _last) in enumerate(census):
        if i and census[i - 1][3]:
            starts.setdefault(start, before + 1)
        elif first >= 0 and first + 1 < size:
            starts.setdefault(first + 1, before + 2)
        before += count
    at = sorted(starts)
    return [(a, b, starts[a]) for a, b in zip(at, at[1:] + [size])]


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


def _local(url: str) -> str:
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(url).path)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def newline_census(piece: tuple[int, str, int, int]) -> tuple[int, int, int, int, bool]:
    """Where the lines of one byte range ``(source_id, path, start, stop)`` of a file begin:
    ``(source_id, start, newlines in it, offset of its first newline or -1, whether its last
    byte is a newline)``, read in blocks (bounded memory) for ``inputs._spans``."""
    sid, path, start, stop = piece
    count, first, last = 0, -1, False
    with open(path, "rb") as f:
        at = f.seek(start)
        while at < stop:
            block = f.read(min(CENSUS_BLOCK, stop - at))
            if not block:
                break
            n = block.count(b"\n")
            if n and first < 0:
                first = at + block.index(b"\n")
            count += n
            at += len(block)
            last = block.endswith(b"\n")
    return sid, start, count, first, last


#: How much of a file ``newline_census`` holds at once.
CENSUS_BLOCK = 8 << 20
