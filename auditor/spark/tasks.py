"""What runs inside the Spark tasks: the package's own stages over one piece of the input.

Every call into the rest of the package made by the Spark engine is in this module, so a change of
an internal function is adapted here and nowhere else:

- stage 1, ``normalize_files`` / ``normalize_rows``: the product's readers (``ingest.read_source``:
  formats, compression, physical line numbers, careful CSV, OTLP) and its one SQL normalizer
  (``Store.ingest``) in a scratch ``Store`` per file (or per DataFrame partition). Out come the
  normalized events, the quarantined lines and the file's accounting as rows of ``STAGE1``.
- stage 2, ``detect_partition``: the events of a set of workflow keys (all events of each key)
  loaded into a scratch ``Store`` with the input files' names (the findings' provenance), the
  observation order rebuilt (``store.sql``'s ``observed_order``), then ``detect_and_explain``, the
  part of ``analyze`` that looks at events, with the newest event time of the whole log. Out come
  the findings, incidents, diagnostics and workflow summaries, pickled, and the partition's timings.
- stage 3, ``timeline_partition``: the same load for the few keys a report draws, then
  ``detect.timeline.excerpts`` over them, as ``analyze`` calls it. Out come the timelines, pickled.

Nothing here imports pyspark: these functions see pyarrow record batches only.
"""

from __future__ import annotations

import pickle
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.columns import optional, optional_fields
from ..core.fields import FieldSpec

if TYPE_CHECKING:
    from ..detect.lease.facts import LeaseHealth
    import pyarrow as pa

    from ..core.limits import Limits
    from ..core.model import Finding
    from ..store import Store
    from ..normalize.vocabulary import Vocabulary

#: STAGE1's own columns (below): a field of that name travels as ``<name>_field``.
_STAGE1_OWN = ("tag", "name", "reason", "lines_read", "normalized", "quarantined", "ignored", "seconds", "message",
               "last_obs")
_SPARK_TYPES = {"BIGINT": "long", "VARCHAR": "string", "INTEGER": "int"}


def _carried(s: FieldSpec) -> tuple[str, str, str, str]:
    """How optional field ``s`` travels between the stages: ``(column, Spark type, the store's
    value out, the value back in)``; an instant as microseconds since the epoch."""
    if s.sql.startswith("TIMESTAMPTZ"):
        return f"{s.name}_us", "long", f"epoch_us({s.name}) AS {s.name}_us", f"make_timestamp({s.name}_us)::TIMESTAMPTZ"
    column = f"{s.name}_field" if s.name in _STAGE1_OWN else s.name
    return column, _SPARK_TYPES[s.sql.split()[0]], s.name if column == s.name else f"{s.name} AS {column}", column


_OPTIONAL = [_carried(s) for s in optional_fields()]
#: The events columns carried between the stages (the store's ``events`` table minus ``ord``,
#: rebuilt in stage 2, with ``ts_utc`` as microseconds since the epoch), the optional fields
#: generated from the registry (core/fields.py) and carried as ``_carried`` says; then SPEC rev 3's
#: global position (numbered again once duplicates collapsed over every file) and the fields whose
#: value was dropped, comma-separated.
EVENT_COLUMNS = ", ".join([
    "event_id string, seq long, obs long, workflow_key string, kind string, epoch long, "
    "worker string, effect_key string, sink string, sink_result string, reporter string, "
    "step_id string, ts string, ts_us long, attrs string, source_id int, line long",
    *(f"{column} {kind}" for column, kind, _, _ in _OPTIONAL), "position long, dropped string"])
EVENT_NAMES = tuple(c.split()[0] for c in EVENT_COLUMNS.split(", "))
#: Stage 1's output: one row per event (tag e), one of the first quarantined lines of a file (q),
#: the file's accounting, newest event time in ts_us and its events' first and last observation
#: positions in obs and last_obs (s), or a file that could not be read
#: at all (x, with the message the single-node audit would raise, and its class in reason), and
#: one per [ignore] entry that matched lines of the file (i: the entry's table in name, the entry
#: in reason, its lines in ignored, the first in line and obs, its values as JSON in message).
STAGE1 = ("tag string, name string, reason string, lines_read long, normalized long, "
          "quarantined long, ignored long, seconds double, message string, last_obs long, " + EVENT_COLUMNS)
#: What makes two events with one ``event_id`` the same event (an exact duplicate, collapsed):
#: every column but the row's identity and ``ts_us`` (parsed from ``ts``), as ``store.sql``'s
#: ``drop_duplicates`` compares them. One id naming two contents is an ``event_id_conflict``.
CONTENT_COLUMNS = tuple(c for c in EVENT_NAMES if c not in ("event_id", "obs", "ts_us", "source_id", "line",
                                                            "position"))
#: Stage 2's output: per partition, one row per pickled list and one row (kind "time") of
#: timings, event count and newest event time. Stage 3's is one row of pickled timelines.
STAGE2 = ("part int, kind string, payload binary, events long, keys long, load_s double, "
          "detect_s double, newest_us long")
PARTS = ("findings", "incidents", "diagnostics", "workflows")
#: ... and what stage 2 reads of the input besides (SPEC rev 3): unplaced events by kind, the first
#: of them, and the malformed_field rows (each with its first row's obs, to merge them); the
#: events whose ``event_id`` names several events (``CONFLICT_COLUMNS``: the driver groups them
#: into ``event_id_conflict`` diagnostics); and every event of the keys with lease evidence (an
#: Arrow table: lease health aggregates across keys, on the driver). Gathered in the pass that
#: detects, not by passes of their own over every event.
INPUT_PARTS = ("unplaced", "unplaced_first", "malformed", "conflicts", "lease")
CONFLICT_COLUMNS = ("event_id", "obs", "source_id", "line", "workflow_key", "seq", "kind")
STAGE3 = "part int, payload binary"

_EVENTS_OUT = f"""
SELECT 'e' AS tag, event_id, seq, obs, workflow_key, kind, epoch, worker, effect_key, sink,
       sink_result, reporter, step_id, ts, epoch_us(ts_utc) AS ts_us, attrs, source_id, line,
       {", ".join(out for _, _, out, _ in _OPTIONAL)}, position,
       array_to_string(dropped, ',') AS dropped
FROM identified_events()"""
#: The document lists the first quarantined lines (``Store.input_summary``'s ``first``): no
#: file can contribute more than that many to it.
QUARANTINE_FIRST = 20
_QUARANTINE_OUT = "SELECT 'q' AS tag, source_id, line, reason FROM quarantine ORDER BY line LIMIT ?"
#: Every [ignore] entry's count of a file (a handful of rows: one per entry that matched).
_IGNORED_OUT = ("SELECT 'i' AS tag, source_id, entry_table AS name, entry AS reason, lines AS ignored, "
                "first_line AS line, first_obs AS obs, to_json(samples)::VARCHAR AS message FROM ignore_entries")
_EVENTS_IN = f"""
INSERT INTO events (event_id, ord, seq, obs, workflow_key, kind, epoch, worker, effect_key, sink,
                    sink_result, reporter, step_id, ts, ts_utc, attrs, source_id, line,
                    {optional()}, position, dropped)
-- In observation order, as one machine appends them: where the detector leaves a tie to row
-- order (two commits of one step at one seq), both engines then pick the same row.
SELECT event_id, seq, seq, obs, workflow_key, kind, epoch, worker, effect_key, sink, sink_result,
       reporter, step_id, ts, make_timestamp(ts_us)::TIMESTAMPTZ, attrs, source_id, line,
       {", ".join(back for _, _, _, back in _OPTIONAL)}, position,
       CASE WHEN dropped IS NOT NULL THEN string_split(dropped, ',') END
FROM part_events ORDER BY obs"""
#: The input files' names, which findings and timelines carry as their provenance.
_SOURCES_IN = """
INSERT INTO sources (source_id, name, format, lines_read, events, duplicates, quarantined)
SELECT source_id, name, 'spark', 0, 0, 0, 0 FROM part_sources"""


def _schema(ddl: str) -> "pa.Schema":
    import pyarrow as pa

    types = {"string": pa.string(), "long": pa.int64(), "int": pa.int32(), "double": pa.float64(),
             "binary": pa.binary()}
    return pa.schema([(name, types[kind]) for name, kind in (f.split() for f in ddl.split(", "))])


def _conform(table: "pa.Table | pa.RecordBatch", schema: "pa.Schema") -> Iterator["pa.RecordBatch"]:
    """``table`` as batches of ``schema``: missing columns null, the others cast."""
    import pyarrow as pa

    cols = [table.column(f.name).cast(f.type) if f.name in table.schema.names
            else pa.nulls(table.num_rows, f.type) for f in schema]
    yield from pa.Table.from_arrays(cols, schema=schema).to_batches()


def _scratch_store(source_id: int, keep_payloads: bool, vocabulary: "Vocabulary | None" = None,
                   small: bool = False) -> "Store":
    """A scratch store whose next ingest gets ``source_id``: the observation positions (``obs``)
    the normalizer assigns then order files as the single-node audit, which ingests them in turn.
    ``small``: in memory (``Store``'s)."""
    from ..store import Store

    store = Store(None, keep_payloads=keep_payloads, vocabulary=vocabulary, small=small)
    if source_id > 1:
        store.con.execute("INSERT INTO sources (source_id, name, format, lines_read, events, duplicates, "
                          "quarantined) VALUES (?, '', 'none', 0, 0, 0, 0)", [source_id - 1])
    return store


def _table(batches: Iterable["pa.RecordBatch"]) -> "pa.Table | None":
    """The rows of ``batches`` as one table, None without rows."""
    import pyarrow as pa

    batches = [b for b in batches if b.num_rows]
    return pa.Table.from_batches(batches) if batches else None


@contextmanager
def _partition_store(part_events: "pa.Table | None", names: dict[int, str]) -> Iterator["Store | None"]:
    """A scratch store holding the events of ``part_events`` (every event of each of their
    workflow keys) and the input files' names, as the single-node store holds them; None without
    events."""
    import pyarrow as pa

    from ..store import SMALL_INPUT, SQL, Store

    if part_events is None:
        yield None
        return
    part_sources = pa.table({"source_id": pa.array(list(names), pa.int32()),  # read by _SOURCES_IN
                             "name": pa.array(list(names.values()), pa.string())})
    with Store(None, small=part_events.nbytes <= SMALL_INPUT) as store:
        store.con.execute(_SOURCES_IN)  # part_events and part_sources: replacement scans
        store.con.execute(_EVENTS_IN)
        del part_events, part_sources
        store.con.execute(SQL["observed_order"])
        yield store


def _conflicting(part_events: "pa.Table") -> list[tuple]:
    """``CONFLICT_COLUMNS`` of the events whose ``event_id`` names several events (``_ids``, counted
    over the whole input before the events were partitioned by key)."""
    import pyarrow.compute as pc

    rows = part_events.filter(pc.greater(part_events.column("_ids"), 1)).select(list(CONFLICT_COLUMNS))
    return [tuple(r.values()) for r in rows.to_pylist()]


def _lease_events(part_events: "pa.Table") -> "pa.Table":
    """Every event of the partition's keys with lease evidence (a lease deadline or a heartbeat)."""
    import pyarrow.compute as pc

    evidence = pc.or_(pc.is_valid(part_events.column("lease_until_us")), pc.is_valid(part_events.column("heartbeat")))
    keys = pc.unique(part_events.column("workflow_key").filter(evidence))
    return part_events.filter(pc.is_in(part_events.column("workflow_key"), value_set=keys)).drop_columns(["_ids"])


def _normalized(store, source_id: int, name: str, counts, seconds: float) -> Iterator["pa.RecordBatch"]:
    """What one ingest left in ``store``: events, quarantined lines, and the file's accounting."""
    import pyarrow as pa

    schema = _schema(STAGE1)
    for batch in store.con.sql(_EVENTS_OUT).to_arrow_reader(65_536):
        yield from _conform(batch, schema)
    yield from _conform(store.con.sql(_QUARANTINE_OUT, params=[QUARANTINE_FIRST]).to_arrow_table(), schema)
    yield from _conform(store.con.sql(_IGNORED_OUT).to_arrow_table(), schema)
    (newest, first, last) = store.con.execute("SELECT epoch_us(max(ts_utc)), min(obs), max(obs) FROM events").fetchone()
    yield from _conform(pa.table({
        "tag": ["s"], "source_id": pa.array([source_id], pa.int32()), "name": [name],
        "obs": pa.array([first], pa.int64()), "last_obs": pa.array([last], pa.int64()),
        "lines_read": [counts.lines_read], "normalized": [counts.events + counts.duplicates],
        "quarantined": [counts.quarantined], "ignored": [counts.ignored], "seconds": [seconds],
        "ts_us": pa.array([newest], pa.int64())}), schema)


def normalize_files(batches: Iterable["pa.RecordBatch"], fmt: str, keep_payloads: bool,
                    vocabulary: "Vocabulary", limits: "Limits") -> Iterator["pa.RecordBatch"]:
    """Stage 1 over files: rows ``(source_id, name, path, content)``; ``content`` (the bytes of a
    file Spark read from a Hadoop filesystem) is spooled to a local file, else ``path`` is read."""
    import pyarrow as pa

    from ..core.errors import AuditorError
    from ..ingest import Source
    from ..ingest.jsonl import jsonl_chunks
    from ..store.feed import read_source

    for batch in batches:
        for row in batch.to_pylist():
            t0 = time.perf_counter()
            sid, name = row["source_id"], row["name"]
            with tempfile.TemporaryDirectory(prefix="auditor-spark-") as tmp, \
                    _scratch_store(sid, keep_payloads, vocabulary, _small_piece(row)) as store:
                path = Path(row["path"])
                if row.get("content") is not None:  # keep the name: the format is told by its suffix
                    path = Path(tmp, Path(name).name or "input")
                    path.write_bytes(row["content"])
                try:
                    source = Source(name, path, path.stat().st_size, limits)
                    if row.get("start") is None:
                        counts = read_source(store, source, fmt)
                    else:  # one piece of a split JSON-lines file, numbered as the whole file
                        span = (row["start"], row["end"], row["first_line"])
                        counts = store.ingest(name, "jsonl", jsonl_chunks(source, span=span))
                except (AuditorError, OSError) as e:
                    # The driver raises it again, as the same class (LimitExceeded is an InputError).
                    error = type(e).__name__ if isinstance(e, AuditorError) else "InputError"
                    message = str(e) if isinstance(e, AuditorError) else _unreadable(name, e)
                    yield from _conform(pa.table({"tag": ["x"], "source_id": pa.array([sid], pa.int32()),
                                                  "name": [name], "reason": [error], "message": [message]}),
                                        _schema(STAGE1))
                    continue
                yield from _normalized(store, sid, name, counts, time.perf_counter() - t0)


def _small_piece(row: dict) -> bool:
    """Whether one file (or piece of a file) of stage 1 is small enough to normalize in memory:
    the one-machine audit's rule (``pipeline.small_input``) for a file, a piece's span for a piece."""
    from ..pipeline import PACKED_RATIO, small_input
    from ..store import SMALL_INPUT

    if row.get("start") is not None:
        return row["end"] - row["start"] <= SMALL_INPUT
    if row.get("content") is not None:
        return len(row["content"]) * PACKED_RATIO <= SMALL_INPUT  # bytes from a Hadoop filesystem, maybe compressed
    try:
        from ..ingest import Source

        path = Path(row["path"])
        return small_input([Source(row["name"], path, path.stat().st_size)])
    except OSError:
        return False


def _unreadable(name: str, e: OSError) -> str:
    """Why a file the driver found could not be read by the executor that was to read it."""
    import errno
    import socket

    where = f"on the executor at {socket.gethostname()}"
    if e.errno == errno.ENOENT:
        return (f"{name}: no such file {where} (the driver sees it, this worker does not); every worker "
                "must see the input at the same path (a shared filesystem), or give it by URL (hdfs://, s3a://)")
    return f"{name}: cannot read it {where}: {e.strerror or e}"


def normalize_rows(batches: Iterable["pa.RecordBatch"], name: str, keep_payloads: bool,
                   vocabulary: "Vocabulary") -> Iterator["pa.RecordBatch"]:
    """Stage 1 over a DataFrame partition: rows ``(line, raw)``, ``raw`` one JSON object, ``line``
    the row's number in the DataFrame's order, all of one source (id 1)."""
    import pyarrow as pa

    t0 = time.perf_counter()

    def chunks():
        for b in batches:
            yield pa.table({"line": b.column("line"), "pos": b.column("line"), "raw": b.column("raw"),
                            "bad": pa.nulls(b.num_rows, pa.string())})

    with _scratch_store(1, keep_payloads, vocabulary) as store:
        counts = store.ingest(name, "dataframe", chunks())
        if counts.lines_read:
            yield from _normalized(store, 1, name, counts, time.perf_counter() - t0)


def detect_partition(batches: Iterable["pa.RecordBatch"], part: int, names: dict[int, str],
                     newest_us: int | None) -> Iterator["pa.RecordBatch"]:
    """Stage 2: detect and explain over every event of the workflow keys of one partition, as
    ``analyze`` does on one machine, freshness measured against the newest event of the log."""
    import pyarrow as pa

    from ..pipeline import detect_and_explain
    from ..store import SQL

    t0 = time.perf_counter()
    load_s = detect_s = 0.0
    rows = {"part": [], "kind": [], "payload": []}
    events = keys = 0
    newest_here = None
    part_events = _table(batches)
    with _partition_store(part_events, names) as store:
        if store is not None:
            ((events, newest_here),) = store.con.execute(
                "SELECT count(*), epoch_us(max(ts_utc)) FROM events").fetchall()
            newest = None
            if newest_us is not None:
                (newest,) = store.con.execute("SELECT make_timestamp(?::BIGINT)::TIMESTAMPTZ",
                                              [newest_us]).fetchone()
            load_s = time.perf_counter() - t0
            found = detect_and_explain(store, newest)
            detect_s = time.perf_counter() - t0 - load_s
            keys = len(found.workflows)
            read = {"unplaced": store.unplaced_kinds(),
                    "unplaced_first": store.con.execute(SQL["unplaced_first"], [QUARANTINE_FIRST]).fetchall(),
                    "malformed": store.con.execute(SQL["malformed"]).fetchall(),
                    "conflicts": _conflicting(part_events), "lease": _lease_events(part_events)}
            del part_events
            for kind in PARTS + INPUT_PARTS:
                rows["part"].append(part)
                rows["kind"].append(kind)
                value = read[kind] if kind in read else getattr(found, kind)
                rows["payload"].append(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    rows["part"].append(part)
    rows["kind"].append("time")
    rows["payload"].append(None)
    n = len(rows["kind"])
    yield from _conform(pa.table({
        "part": pa.array(rows["part"], pa.int32()), "kind": rows["kind"],
        "payload": pa.array(rows["payload"], pa.binary()),
        "events": [events if k == "time" else None for k in rows["kind"]],
        "keys": [keys if k == "time" else None for k in rows["kind"]],
        "load_s": [load_s] * n, "detect_s": [detect_s] * n,
        "newest_us": pa.array([newest_here if k == "time" else None for k in rows["kind"]], pa.int64())}),
        _schema(STAGE2))


def timeline_partition(batches: Iterable["pa.RecordBatch"], part: int, names: dict[int, str],
                       keys: list[str], findings: "list[Finding]", limit: int) -> Iterator["pa.RecordBatch"]:
    """Stage 3: the timelines of those of ``keys`` whose events are in this partition (all of each
    key's events), drawn from ``findings`` as ``analyze`` draws them on one machine."""
    import pyarrow as pa

    from ..detect.batch.timeline import excerpts

    with _partition_store(_table(batches), names) as store:
        if store is None:
            return
        timelines = excerpts(store, keys, findings, limit)
    yield from _conform(pa.table({"part": pa.array([part], pa.int32()),
                                  "payload": pa.array([pickle.dumps(timelines, pickle.HIGHEST_PROTOCOL)],
                                                      pa.binary())}), _schema(STAGE3))


def lease_health_of(tables: list["pa.Table"], names: dict[int, str], by: Any,
                    heartbeat_misses: int) -> "LeaseHealth":
    """SPEC section 7 on the driver: ``detect.lease.batch.lease_health`` over every event of the keys that
    carry lease evidence (``tables``, the partitions' ``_lease_events``), in a scratch store as
    one machine would hold them. Lease health aggregates across keys (medians per group), so it is
    measured where all of it meets."""
    import pyarrow as pa

    from ..detect.lease.batch import lease_health
    from ..store import Store

    tables = [t for t in tables if t.num_rows]
    with _partition_store(pa.concat_tables(tables) if tables else None, names) as store:
        if store is not None:
            return lease_health(store.con, by, heartbeat_misses)
    with Store(None) as empty:  # no lease evidence: the single-node answer for such a log
        return lease_health(empty.con, by, heartbeat_misses)
