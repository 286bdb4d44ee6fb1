"""The Spark engine on a real cluster: the settings a session gets (``--spark-conf``, shuffle
partitions sized from the input, the auditor's own environment variables for the executors), the
Python environment the executors run (``--spark-archive``, or this interpreter), the check that
they can import the auditor before any input is read, and Spark's failures (Py4J traces of a
task that died on an executor) as one line that says what to do (``explain``).
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from ..core.errors import AuditorError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Where ``--spark-archive`` is unpacked in each executor's working directory (``spark.archives``'s
#: ``#name``), and so the executors' Python: ``./auditor-env/bin/python``.
ARCHIVE_DIR = "auditor-env"
ARCHIVE_PYTHON = f"./{ARCHIVE_DIR}/bin/python"
#: A piece of an uncompressed JSON-lines file read by one task (``--spark-conf
#: spark.auditor.splitBytes=N`` changes it): small enough for a 1 GB executor, large enough that
#: a task's start-up cost is small beside its reading.
SPLIT_BYTES = 64 << 20
SPLIT_CONF = "spark.auditor.splitBytes"
#: The shuffle partitions of an input: about one per ``BYTES_PER_PARTITION`` of input, at least
#: the cluster's cores and at most Spark's default of 200.
BYTES_PER_PARTITION = 32 << 20
#: Past this much input the events an audit keeps between its passes are cached on the
#: executors' disks only (``DISK_ONLY``), below it in memory first (``MEMORY_AND_DISK``).
IN_MEMORY_BYTES = 1 << 30
#: The driver's environment variables the executors get too (``spark.executorEnv.*``): the
#: auditor's own settings (AUDITOR_MEMORY_LIMIT, the AUDITOR_MAX_* input limits, ...).
ENV_PREFIX = "AUDITOR_"


#: ``quiet_jvm``: the JVM's start-up notices go to a log file, not the terminal.
_QUIET = [False]


def quiet_jvm() -> None:
    """``--quiet``: the JVM started from here writes its output (Spark's start-up warnings, the
    JDK's incubator notice, its log) to a log file, and the engine logs nothing but errors."""
    _QUIET[0] = True
    logging.getLogger("auditor.spark").setLevel(logging.ERROR)


@contextmanager
def jvm_output() -> Iterator[None]:
    """Around the JVM's start: under ``quiet_jvm``, its standard error (inherited at start, kept
    for its life) is a log file; this process's own is given back at once."""
    if not _QUIET[0]:
        yield
        return
    import tempfile

    fd, _path = tempfile.mkstemp(prefix="auditor-spark-jvm-", suffix=".log")
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(fd, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


class SparkFailed(AuditorError):
    """A Spark job failed on the cluster; the message names the cause and what to do."""


def conf_of(pairs: list[str] | None) -> dict[str, str]:
    """``--spark-conf KEY=VALUE`` options as a dict (a later KEY wins); a malformed one is an
    ``AuditorError`` saying what was expected."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip() or not key.strip().startswith("spark."):
            raise AuditorError(f"--spark-conf {pair!r}: expected KEY=VALUE with a Spark setting as KEY, "
                               "e.g. --spark-conf spark.executor.memory=1g")
        out[key.strip()] = value.strip()
    return out


def settings(conf: dict[str, str] | None, archive: str | None, master: str | None) -> dict[str, str]:
    """The settings a new session gets: ``conf``, the auditor's ``AUDITOR_*`` variables for the
    executors (unless ``conf`` sets them), and with ``archive`` the packed environment shipped
    to every executor (``spark.archives``) and run there."""
    out = dict(conf or {})
    for var, value in sorted(os.environ.items()):
        if var.startswith(ENV_PREFIX):
            out.setdefault(f"spark.executorEnv.{var}", value)
    if archive is not None:
        if not os.path.exists(archive) and "://" not in archive:
            raise AuditorError(f"--spark-archive {archive}: no such file; pack the environment first "
                               "(venv-pack -o auditor-env.tar.gz, see docs/SCALE.md)")
        shipped = f"{archive}#{ARCHIVE_DIR}"
        have = out.get("spark.archives")
        out["spark.archives"] = f"{have},{shipped}" if have else shipped
        out["spark.executorEnv.PYSPARK_PYTHON"] = ARCHIVE_PYTHON
    return out


def executors_python(spark: "SparkSession", archive: str | None) -> None:
    """The Python the executors run: the shipped environment's, else ``PYSPARK_PYTHON``, else
    this interpreter (which has the auditor, duckdb and pyarrow) - for a session the caller
    made too, whose default (``python3`` on the workers' PATH) seldom has them."""
    sc = spark.sparkContext
    if archive is not None:
        sc.pythonExec = ARCHIVE_PYTHON
    elif os.environ.get("PYSPARK_PYTHON"):
        sc.pythonExec = os.environ["PYSPARK_PYTHON"]
    else:
        sc.pythonExec = sys.executable


def partitions_for(spark: "SparkSession", input_bytes: int, given: int | None) -> int:
    """Shuffle partitions: ``given``, or ``spark.sql.shuffle.partitions`` when set explicitly,
    else one per ``BYTES_PER_PARTITION`` of input, at least the cluster's cores, at most 200."""
    if given:
        return given
    set_ = spark.conf.get("spark.sql.shuffle.partitions", None)
    if set_ is not None and spark.sparkContext.getConf().contains("spark.sql.shuffle.partitions"):
        return int(set_)
    cores = max(1, spark.sparkContext.defaultParallelism)
    return max(cores, min(200, -(-input_bytes // BYTES_PER_PARTITION)))


def split_bytes(spark: "SparkSession", given: int | None) -> int:
    if given:
        return given
    text = spark.conf.get(SPLIT_CONF, None)
    if not text:
        return SPLIT_BYTES
    from ..core.limits import _size

    try:
        return _size(text)
    except ValueError:
        raise AuditorError(f"{SPLIT_CONF}={text!r}: expected a positive size (64m, 1g)") from None


#: The (application, executors' Python) pairs checked already: one check per session and Python,
#: not one per audit (one Spark job of the six or seven a small audit runs).
_CHECKED: set[tuple[str, str]] = set()


def check_executors(spark: "SparkSession") -> None:
    """Run one tiny task that imports the auditor where the input will be read: a worker that
    cannot (no such Python, no auditor, no duckdb) is said in one line before anything is read.
    Once per session and executors' Python; a worker added later that cannot is still said in
    one line, by ``explain``, when its first task fails."""
    sc = spark.sparkContext
    done = (sc.applicationId, sc.pythonExec)
    if done in _CHECKED:
        return
    try:
        sc.parallelize([0], 1).map(_imports).collect()
    except Exception as e:  # py4j's Py4JJavaError, pyspark's PythonException: the text says which
        raise explain(e, checking=True) from e
    _CHECKED.add(done)


def _imports(_: int) -> str:
    import auditor.spark.tasks  # noqa: F401  (what every task imports)
    import duckdb
    import pyarrow

    return f"{duckdb.__version__} {pyarrow.__version__}"


#: Causes seen in Spark's traces, first match wins: (pattern, what it means and what to do).
_CAUSES: list[tuple[re.Pattern, str]] = [
    (re.compile(r'Cannot run program "([^"]+)"'),
     "an executor cannot run the Python {0!r} (that path does not exist on the worker); ship an "
     "environment with --spark-archive env.tar.gz (venv-pack), or set PYSPARK_PYTHON to a Python "
     "with the auditor installed on every worker"),
    (re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([^']+)'"),
     "an executor's Python cannot import {0!r}; install split-brain-auditor (with duckdb and "
     "pyarrow) in the workers' Python, or ship an environment with --spark-archive env.tar.gz"),
    (re.compile(r"(?:FileNotFoundError|No such file or directory)[^\n]*?'?(/[^\s',)]+)"),
     "an executor cannot read {0} (no such file on that worker): every worker must see the input "
     "at the same path (a shared filesystem), or give it by URL (hdfs://, s3a://)"),
    (re.compile(r"OutOfMemoryException: Out of Memory Error: [^(\n]*\(([^)]*used)\)"),
     "DuckDB in an executor ran out of the memory it was given ({0}); raise AUDITOR_MEMORY_LIMIT (or "
     "leave it unset: a share of the worker's memory), or give the audit more partitions (--spark-conf "
     "spark.sql.shuffle.partitions=N)"),
    (re.compile(r"OutOfMemoryError|Java heap space|GC overhead limit exceeded"),
     "an executor ran out of memory; raise it (--spark-conf spark.executor.memory=4g), or split "
     "the input into smaller files (a compressed or non-JSON-lines file is read whole by one task)"),
    (re.compile(r"(?:Python worker exited unexpectedly|Python worker .*?crashed|exit code 137|"
                r"Container killed|killed by the OS)"),
     "an executor's Python was killed (most often out of memory); raise its share "
     "(--spark-conf spark.executor.pyspark.memory=2g or spark.executor.memoryOverhead), or lower "
     "--spark-conf spark.auditor.splitBytes=32m"),
    (re.compile(r"Task \d+ in stage [\d.]+ failed (\d+) times"),
     "a task failed {0} times on the executors; the trace says why"),
]


def explain(e: BaseException, checking: bool = False) -> AuditorError:
    """A Spark failure as one ``SparkFailed`` line: its cause, and what to do."""
    if isinstance(e, AuditorError):
        return e
    text = str(e)
    trace = _keep_trace(e)
    for pattern, what in _CAUSES:
        m = pattern.search(text)
        if m:
            head = "Spark start-up check: " if checking else "Spark: "
            return SparkFailed(f"{head}{what.format(*m.groups())} (Spark's trace: {trace})")
    first = text.strip().splitlines()[0] if text.strip() else type(e).__name__
    return SparkFailed(f"Spark failed: {first[:300]} (Spark's trace: {trace})")


def _keep_trace(e: BaseException) -> str:
    """Write ``e``'s full trace (the executors' Python and Java traces in it) to a log file of its
    own; its path, for the one-line message. ``--debug`` prints it as well."""
    import tempfile
    import traceback

    fd, path = tempfile.mkstemp(prefix="auditor-spark-", suffix=".log")
    with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
        f.write("".join(traceback.format_exception(e)))
    return path
