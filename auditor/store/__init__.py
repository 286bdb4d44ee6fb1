"""Stage 3, store: the DuckDB schema, the one normalizer, and idempotent, per-file transactional appends.

Every reader hands the store chunks of raw lines (``line``, ``raw`` bytes holding one JSON object);
``store.sql`` normalizes them in one SQL pass into events or quarantined lines with a reason (the
lines its fast path cannot take go through ``normalize.normalize_line``, with the store's
``vocabulary``). A file is ingested inside one transaction, so an interrupted ingest leaves the
store as it was, and an event already stored (same ``event_id``, same content) is not added again,
so ingesting the same evidence twice adds nothing. Rows are identified by ``obs``: one
``event_id`` with different content keeps both rows (``id_conflicts``).

Threading: a ``Store`` owns one DuckDB connection; use it from one thread at a time.
"""

from __future__ import annotations

import bisect
import json
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from ..core.errors import StoreError, StoreLocked
from ..core.model import (Diagnostic, DiagnosticKind, Event, InputSummary, Kind, QuarantinedLine, Reporter,
                          SinkResult, SkippedPath, UnplacedLine)
from ..rules import stable_id
from ..normalize.reference import SQL_SHAPE
from ..normalize.vocabulary import REASONS, Vocabulary, vocabulary_of
from ..core.fields import (BLANK, DECISIONS, EFFECT_KINDS, FIELDS, HEARTBEATS, INSTANT_SHAPE,
                           OPTIONAL_FIELDS, REPORTERS, SINK_RESULTS)
from ..core.sql import QUIET, statements
from .ignored import count_ignored, ignore_summary
from .prefilter import stage_params
from .setup import VOCABULARY_BOXES, attrs_batch, forget_attrs, normalize_udf, refuse_foreign, register

if TYPE_CHECKING:
    import polars as pl
    import pyarrow as pa

    from .typed import Prepared

SQL = statements("store/store.sql")
STAGE_BATCH_ROWS = 16_384
#: Raw lines staged into the events table in one statement. Each INSERT into the compressed table
#: finishes its row groups (122,880 rows) on its own: a 32 MB chunk (about 140,000 events) a
#: time, appending took as long as 60 % of the stage (bench/RESULTS.md); four row groups at a time
#: take half of that, for about 120 MB of raw lines held (250 bytes a line).
APPEND_ROWS = 4 * 122_880
#: DuckDB's share of memory; the audit's Python side (findings, incidents) comes on top.
MEMORY_LIMIT = os.environ.get("AUDITOR_MEMORY_LIMIT", "800MB")
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def size_bytes(size: str) -> float:
    """A DuckDB memory size (``800MB``, ``1.5 GiB``) in bytes; infinity for one it does not
    read (DuckDB decides what it means: nothing is lowered under it)."""
    import re

    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([a-zA-Z]*)\s*", size)
    unit = _UNITS.get(m.group(2).lower()) if m else None
    return float("inf") if unit is None else float(m.group(1)) * unit


@dataclass(frozen=True, slots=True)
class SourceCounts:
    """What one input file contributed: ``lines_read = events + duplicates + quarantined + ignored``."""

    name: str
    lines_read: int
    events: int
    duplicates: int
    quarantined: int
    skipped: bool = False  # the same bytes were already ingested into this store
    ignored: int = 0       # lines the vocabulary's [ignore] entries declare irrelevant (SPEC rev 3)


#: The stage query's lists, from the vocabulary, bound as parameters (never spliced into the SQL).
_STAGE_PARAMS = {
    "fast_shape": json.dumps({f: "JSON" if f in ("workflow_key", "effect_key", "authority_id") else "VARCHAR" for f in (*FIELDS, "attrs")}
                             | {"attrs": "JSON"}),
    "effect_kinds": sorted(EFFECT_KINDS), "heartbeats": list(HEARTBEATS), "decisions": list(DECISIONS),
    "sink_results": list(SINK_RESULTS), "reporters": list(REPORTERS), "slow_shape": SQL_SHAPE,
    "not_utf8": REASONS["not_utf8"], "not_json": REASONS["not_json"], "instant_shape": INSTANT_SHAPE,
    # What the normalizer's str.strip() removes: a text value whose first character is one of
    # these may be blank (empty is absent), so it takes the careful path. DuckDB's trim removes
    # spaces only, and would keep "\t" as a worker or a workflow key.
    "blank": BLANK,
}
_REPORTERS = {r: Reporter(r) for r in REPORTERS}


def _ready_at(pos: int, ready: list[tuple[int, int, list[dict[str, Any]], "Prepared"]], starts: list[int]
              ) -> tuple[int, int, dict[str, Any]]:
    """The ``(line, pos, record)`` staged at ``pos`` from the parts split ahead (``starts``: their
    pos offsets, increasing); for a ts DuckDB does not read."""
    pos0, first, records, _prepared = ready[bisect.bisect_left(starts, pos) - 1]
    return first + pos - pos0 - 1, pos, records[pos - pos0 - 1]


def _no_typed() -> "pa.Table":
    import pyarrow as pa

    from .typed import schema

    return pa.Table.from_batches([], schema())  # not schema.empty_table(): it imports pandas


def _at_least_one(chunks: Iterable["pa.Table"]) -> Iterator["pa.Table"]:
    """``chunks``, or one empty chunk of lines when there are none (typed records alone)."""
    import pyarrow as pa

    empty = True
    for chunk in chunks:
        empty = False
        yield chunk
    if empty:
        yield pa.table({"line": pa.array([], pa.int64()), "pos": pa.array([], pa.int64()),
                        "raw": pa.array([], pa.binary()), "bad": pa.array([], pa.string())})


def _drop_scratch(con: duckdb.DuckDBPyConnection, scratch: str) -> None:
    con.close()
    shutil.rmtree(scratch, ignore_errors=True)


class Store:
    """A DuckDB database holding normalized events, quarantined lines and per-source accounting.

    ``path=None`` is a scratch database, deleted with the store. A file path is created on first
    use and extended by later ingests; an existing file that is not a DuckDB store (a Parquet or
    JSON file given as ``--db`` by mistake) raises ``StoreError`` and is left untouched. Opening a
    file another process is writing raises ``StoreLocked`` after waiting up to ``lock_timeout``
    seconds. ``read_only`` opens without write access (another user's store, a CI artifact);
    within one process that already has the file open for writing, that connection's database
    is shared instead. Opening one file many times in a process is fine.
    """

    def __init__(self, path: str | Path | None = None, *, keep_payloads: bool = False,
                 lock_timeout: float = 0.0, read_only: bool = False,
                 vocabulary: "Vocabulary | str | os.PathLike | None" = None, careful: bool = False) -> None:
        self.path = None if path is None else Path(path)
        self.keep_payloads = keep_payloads
        # Every line through normalize_line, none on the SQL fast path: the reference the fast
        # path is pinned to (tests/test_fast_path.py), never faster.
        self.careful = careful
        # A box, not self, in the UDF's closure: the connection holds the UDF, and the store
        # must not be kept alive by its own connection.
        self._vocabulary = [vocabulary_of(vocabulary)]
        self.skipped: list[SkippedPath] = []  # directory entries this process did not read
        if self.path is not None:
            refuse_foreign(self.path)
        self.con = self._connect(lock_timeout, read_only)
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute(QUIET)
        # Bounded memory: DuckDB spills past this instead of growing with the log, and no query
        # here depends on the order rows were inserted in.
        self.con.execute("SET memory_limit = ?", [MEMORY_LIMIT])
        self.con.execute("SET preserve_insertion_order = false")
        register(self.con, "auditor_attrs", attrs_batch, null_handling="special")
        if not register(self.con, "auditor_normalize", normalize_udf(self._vocabulary)):
            # A second Store on a file this process has open shares its database, functions
            # included: it shares the box the registered function reads, and puts its own
            # vocabulary in it (the newest store's vocabulary is the one an ingest uses).
            shared = VOCABULARY_BOXES.get(str(self.path))
            if shared is not None:
                shared[0] = self._vocabulary[0]
                self._vocabulary = shared
        elif self.path is not None:
            VOCABULARY_BOXES[str(self.path)] = self._vocabulary
        if read_only:
            self._private_spill()
            self._read_older_schema()
        else:
            self.con.execute(SQL["schema"])  # adds what an older store lacks
            self._number_older_events()

    def _read_older_schema(self) -> None:
        """A store written before revision 3, opened read-only, cannot gain the columns revisions
        2 and 3 added: read it through a temporary view that adds them (nulls for the optional
        fields, as such a store holds none; positions numbered in observation order, and the
        order detection uses decided again by revision 3's rule)."""
        typed = {"lease_until": "TIMESTAMPTZ", "expires_at": "TIMESTAMPTZ"}
        self._read_older_accounting()
        have = {r[0] for r in self.con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND table_name = 'events'").fetchall()}
        missing = [f for f in OPTIONAL_FIELDS if f not in have]
        if not have or (not missing and "position" in have):
            return
        ((db,),) = self.con.execute("SELECT current_database()").fetchall()
        added = "".join(f", NULL::{typed.get(f, 'VARCHAR')} AS {f}" for f in missing)
        quoted = '"' + db.replace('"', '""') + '"'
        if "position" in have:
            self.con.execute(f"CREATE TEMP VIEW events AS SELECT *{added} FROM {quoted}.main.events")
            return
        self.con.execute(
            f"CREATE TEMP VIEW events AS SELECT * EXCLUDE (ord), CASE WHEN bool_or(seq IS NOT NULL) OVER "
            f"(PARTITION BY workflow_key) THEN seq ELSE position END AS ord FROM (SELECT *{added}, "
            f"row_number() OVER (ORDER BY obs) AS position, NULL::VARCHAR[] AS dropped FROM {quoted}.main.events)")

    def _read_older_accounting(self) -> None:
        """A store written before revision 3's [ignore], opened read-only: no line was ignored."""
        tables = {r[0]: r[1] for r in self.con.execute(
            "SELECT table_name, list(column_name) FROM duckdb_columns() WHERE database_name = current_database() "
            "AND schema_name = 'main' GROUP BY table_name").fetchall()}
        if "sources" not in tables:
            return
        ((db,),) = self.con.execute("SELECT current_database()").fetchall()
        quoted = '"' + db.replace('"', '""') + '"'
        if "ignored" not in tables["sources"]:
            self.con.execute(f"CREATE TEMP VIEW sources AS SELECT *, 0::BIGINT AS ignored FROM {quoted}.main.sources")
        if "ignore_entries" not in tables:
            self.con.execute("CREATE TEMP TABLE ignore_entries (source_id INTEGER, entry_table VARCHAR, entry VARCHAR, "
                             "lines BIGINT, first_line BIGINT, first_obs BIGINT, samples VARCHAR[])")

    def _number_older_events(self) -> None:
        """A store written before revision 3 gains positions, and the order revision 3 decides."""
        ((unnumbered,),) = self.con.execute("SELECT count(*) FROM events WHERE position IS NULL").fetchall()
        if unnumbered:
            with self.transaction():
                self.con.execute(SQL["positions"], [0])
                self.con.execute(SQL["observed_order"])

    @property
    def vocabulary(self) -> Vocabulary:
        """The names the normalizer accepts; set it before an ingest to read a team's own log."""
        return self._vocabulary[0]

    @vocabulary.setter
    def vocabulary(self, value: "Vocabulary | str | os.PathLike | None") -> None:
        self._vocabulary[0] = vocabulary_of(value)

    def _connect(self, lock_timeout: float, read_only: bool) -> duckdb.DuckDBPyConnection:
        if self.path is None:
            return self._scratch()
        deadline = time.monotonic() + lock_timeout
        while True:
            try:
                return duckdb.connect(str(self.path), read_only=read_only)
            except duckdb.ConnectionException as e:
                if not read_only or "different configuration" not in str(e):
                    raise StoreError(f"{self.path}: cannot open the DuckDB store ({str(e).strip()})") from e
                read_only = False  # this process has it open for writing: share that database
            except duckdb.IOException as e:
                if "lock" not in str(e).lower():
                    raise StoreError(f"{self.path}: cannot open the DuckDB store ({str(e).strip()}); "
                                     "point --db at a file written by 'auditor ingest', or at a new "
                                     "path") from e
                if time.monotonic() >= deadline:
                    raise StoreLocked(
                        f"{self.path}: another process is using this DuckDB store; wait for it "
                        "to finish (or pass --wait SECONDS) and run the command again") from e
                time.sleep(0.2)
            except duckdb.Error as e:
                raise StoreError(
                    f"{self.path}: not a usable DuckDB store ({e}); point --db at a new file") from e

    def _scratch(self) -> duckdb.DuckDBPyConnection:
        """The store of an audit without ``--db``: a DuckDB file in a private temporary directory,
        removed on close (or at exit). A file lets DuckDB keep the events compressed and page
        them out, where in-memory rows of ten million events take 3 GB."""
        scratch = tempfile.mkdtemp(prefix="auditor-")
        try:
            con = duckdb.connect(os.path.join(scratch, "audit.duckdb"))
            con.execute("SET temp_directory = ?", [os.path.join(scratch, "spill")])
            con.execute("PRAGMA disable_checkpoint_on_shutdown")
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        self._drop_scratch = weakref.finalize(self, _drop_scratch, con, scratch)
        return con

    def _private_spill(self) -> None:
        """A read-only store may sit in a folder we cannot write (``<db>.tmp`` is DuckDB's default
        spill place): spill to a private temporary directory, removed with the store."""
        spill = tempfile.mkdtemp(prefix="auditor-spill-")
        self.con.execute("SET temp_directory = ?", [spill])
        weakref.finalize(self, shutil.rmtree, spill, ignore_errors=True)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction; on failure, rolled back and the real cause raised.

        A failed COMMIT (a full disk, a file size limit) leaves DuckDB without an active
        transaction, so the ROLLBACK that follows fails too; its "no transaction is active" must
        not hide why the commit failed. DuckDB's errors leave as ``StoreError`` naming the store.
        """
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            yield
            con.execute("COMMIT")
        except BaseException as e:
            try:
                con.execute("ROLLBACK")
            except duckdb.Error:
                pass
            if isinstance(e, (duckdb.Error, OSError)) and not isinstance(e, duckdb.InterruptException):
                raise StoreError(f"{self._where()}: cannot write the DuckDB store ({_cause(e)}); nothing "
                                 "of this input was kept; free space or fix the cause, then run again") from e
            raise
        finally:
            forget_attrs()  # what the attrs function remembered is raw text: payloads before hashing

    def _where(self) -> str:
        return str(self.path) if self.path is not None else f"the scratch store in {tempfile.gettempdir()}"

    def shrink(self) -> None:
        """Hand back the pages DuckDB keeps cached, e.g. once detection is done and the Python
        side of a big audit grows: lowering the limit evicts them, raising it does not refill."""
        try:
            self.con.execute("SET memory_limit = '64MB'")
        except duckdb.Error:  # pinned pages it cannot evict: keep them
            pass
        self.con.execute("SET memory_limit = ?", [MEMORY_LIMIT])

    def lower_memory(self, limit: str) -> None:
        """DuckDB's memory limit down to ``limit`` for a while (``shrink`` restores the usual one),
        never up: an ``AUDITOR_MEMORY_LIMIT`` already lower stays."""
        if size_bytes(limit) < size_bytes(MEMORY_LIMIT):
            self.con.execute("SET memory_limit = ?", [limit])

    def close(self) -> None:
        self.con.close()
        if self.path is None:
            self._drop_scratch()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Appending.

    def already_ingested(self, digest: str | None) -> bool:
        if digest is None:
            return False
        row = self.con.execute("SELECT 1 FROM sources WHERE digest = ?", [digest]).fetchone()
        return row is not None

    def ingest(self, name: str, fmt: str, chunks: Iterable["pa.Table"],
               digest: str | None = None, typed: "pa.Table | None" = None) -> SourceCounts:
        """Normalize and append one source inside one transaction.

        ``chunks`` yields arrow tables with columns ``line`` (int64, 1-based, what a person is shown),
        ``pos`` (int64, unique and increasing within the source), ``raw`` (binary, one JSON object)
        and ``bad`` (a reason the reader already found, else null). Lines that are blank after trimming are not counted. If ``digest`` was
        ingested before, nothing is read and ``skipped`` is set. ``typed`` holds records already in
        the fast path's columns (``store_typed``; ``pos`` numbered with the lines), staged with the
        first chunk.
        """
        if self.already_ingested(digest):
            return SourceCounts(name, 0, 0, 0, 0, skipped=True)

        con = self.con
        with self.transaction():
            (source_id,) = con.execute(
                "SELECT coalesce(max(source_id), 0) + 1 FROM sources").fetchone()
            ((before,),) = con.execute("SELECT count(*) FROM events").fetchall()
            lines_read = 0
            # The SQL reads the local variables raw_chunk and typed_chunk of _stage (DuckDB's
            # replacement scans): a register()ed object would be kept alive until the
            # transaction ends, that is the whole file in memory.
            typed_chunk = typed if typed is not None else _no_typed()
            held: list["pa.Table"] = []  # raw chunks not yet staged (see APPEND_ROWS)
            for raw_chunk in _at_least_one(chunks):
                held.append(raw_chunk)
                del raw_chunk
                if sum(t.num_rows for t in held) >= APPEND_ROWS:
                    lines_read += self._stage(held, typed_chunk, source_id)
                    typed_chunk = _no_typed()
            if held:
                lines_read += self._stage(held, typed_chunk, source_id)
            ignored = count_ignored(con, source_id, self.vocabulary).get(source_id, 0)
            ((quarantined,),) = con.execute(SQL["quarantine_staged"], [source_id]).fetchall()
            con.execute(SQL["drop_rejected"], [source_id])
            normalized = lines_read - quarantined - ignored
            con.execute(SQL["drop_duplicates"], [source_id])
            (after,) = con.execute("SELECT count(*) FROM events").fetchone()
            added = after - before
            con.execute(
                "INSERT INTO sources (source_id, name, digest, format, lines_read, events, duplicates, quarantined, "
                "ignored) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [source_id, name, digest, fmt, lines_read, added, normalized - added, quarantined, ignored])
            con.execute(SQL["positions"], [source_id])
            con.execute(SQL["observed_order"])
        return SourceCounts(name, lines_read, added, normalized - added, quarantined, ignored=ignored)

    def _stage(self, held: list["pa.Table"], typed_chunk: "pa.Table", source_id: int) -> int:
        """Normalize the raw chunks ``held`` and the typed records ``typed_chunk`` into the events
        table in one statement (``stage``), and empty ``held``; the count of lines staged."""
        import pyarrow as pa

        schema = held[0].schema
        # DuckDB scans one arrow batch per thread: smaller batches let every core work. A
        # reader's own rows (a line too long, a cut stream) may hold their bytes in another
        # binary type; a cast imports pyarrow.compute, so only they pay for it.
        raw_chunk = pa.Table.from_batches(  # noqa: F841 - read by name in stage
            [b for t in held for b in (t if t.schema == schema else t.cast(schema)).to_batches(
                max_chunksize=STAGE_BATCH_ROWS)], schema)
        held.clear()
        ((staged,),) = self.con.execute(SQL["stage"], dict(
            _STAGE_PARAMS, **stage_params(self.vocabulary), source_id=source_id, keep_payloads=self.keep_payloads,
            careful=self.careful)).fetchall()
        return staged

    def ingest_many(self, items: list[tuple[str, str, list["pa.Table"], str | None]]) -> list[SourceCounts]:
        """Normalize and append many small sources ``(name, fmt, chunks, digest)`` in one transaction.

        The same result as ``ingest`` on each in turn (per-source ``sources`` rows and accounting,
        digests already ingested skipped, the first observation of an event_id kept), for the
        fixed cost of one transaction and one pass of each statement instead of one per file:
        a directory of ten thousand small logs. Each source's ``pos`` is moved to its own 2^36
        block, so the normalizer's ``obs`` (``source_id * 2^36 + pos``) comes out right for every
        source, and the source of each staged row is ``obs >> 36``.
        """
        import pyarrow as pa

        out: list[SourceCounts | None] = [None] * len(items)
        digests = [d for _, _, _, d in items if d is not None]
        known = {r[0] for r in self.con.execute(
            "SELECT digest FROM sources WHERE digest IN (SELECT unnest(?::VARCHAR[]))", [digests]).fetchall()}
        todo = []
        for i, (name, _fmt, _chunks, digest) in enumerate(items):
            if digest is not None and digest in known:
                out[i] = SourceCounts(name, 0, 0, 0, 0, skipped=True)
            else:
                known.add(digest)
                todo.append(i)
        if not todo:
            return out
        schema = pa.schema([("line", pa.int64()), ("pos", pa.int64()), ("raw", pa.large_binary()),
                            ("bad", pa.string())])
        con = self.con
        with self.transaction():
            ((first,),) = con.execute("SELECT coalesce(max(source_id), 0) + 1 FROM sources").fetchall()
            parts = []
            for k, i in enumerate(todo):
                for t in items[i][2]:
                    t = t.select(["line", "pos", "raw", "bad"])
                    if t.schema != schema:  # a cast imports pyarrow.compute: JSON lines need none
                        t = t.cast(schema)
                    if k:  # the first source keeps its pos: a lone file's audit imports neither
                        # pyarrow.compute (0.1 s) nor, through pc.add's Python int, pandas (see arrow.py)
                        import pyarrow.compute as pc

                        t = t.set_column(1, "pos", pc.add(t.column("pos"), k << 36))
                    parts.append(t)
            if parts:
                # One table of all the lines: ten thousand files' batches would be as many tiny scans.
                self._stage([pa.concat_tables(parts).combine_chunks()], _no_typed(), first)
                counts = {sid: (read, bad, skip) for sid, read, bad, skip in
                          con.execute(SQL["staged_counts_by_source"], [first]).fetchall()}
                count_ignored(con, first, self.vocabulary)
                con.execute(SQL["quarantine_staged"], [first])
                con.execute(SQL["drop_rejected"], [first])
                con.execute(SQL["drop_duplicates"], [first])
            else:
                counts = {}
            added = dict(con.execute("SELECT source_id, count(*) FROM events WHERE source_id >= ? GROUP BY 1",
                                     [first]).fetchall())
            rows = []
            for k, i in enumerate(todo):
                name, fmt, _chunks, digest = items[i]
                read, bad, skip = counts.get(first + k, (0, 0, 0))
                n = added.get(first + k, 0)
                out[i] = SourceCounts(name, read, n, read - bad - skip - n, bad, ignored=skip)
                rows.append((first + k, name, digest, fmt, read, n, read - bad - skip - n, bad, skip))
            # One INSERT of lists unnested side by side: executemany runs a statement per row, and
            # an Arrow table of Python lists imports pandas (see arrow.py).
            con.execute("INSERT INTO sources (source_id, name, digest, format, lines_read, events, duplicates, "
                        "quarantined, ignored) SELECT unnest(?::INTEGER[]), unnest(?::VARCHAR[]), unnest(?::VARCHAR[]), "
                        "unnest(?::VARCHAR[]), unnest(?::BIGINT[]), unnest(?::BIGINT[]), unnest(?::BIGINT[]), "
                        "unnest(?::BIGINT[]), unnest(?::BIGINT[])", [list(column) for column in zip(*rows)])
            con.execute(SQL["positions"], [first])
            con.execute(SQL["observed_order"])
        return out

    def append_records(self, name: str, records: Iterable[tuple[int, dict[str, Any]]]) -> SourceCounts:
        """Append Python records ``(line, canonical dict)`` through the same normalizer.

        Records the stage's fast path would take from their JSON text are handed to it as typed
        columns instead (``store_typed``: no JSON round trip, the same rows); the others, and
        every record of a ``careful`` store, go as JSON lines."""
        return self._append_split(name, [(line, pos, rec) for pos, (line, rec) in enumerate(records, 1)], [])

    def append_parts(self, name: str, parts: Iterable[tuple[int, list[dict[str, Any]], "Prepared | None"]],
                     refused: Iterable[tuple[int, str]] = (), digest: str | None = None) -> SourceCounts:
        """Append records given in parts ``(first line, records, prepared split or None)`` as one
        source: what ``append_records`` writes for all of them, numbered from each part's first
        line on. A part split ahead (``store_typed.prepare``, in serve's decoder processes) is not
        split again: its typed columns are renumbered in Arrow, no Python per record.

        ``refused`` are records the caller could not take, ``(line, reason)``: each is read and
        quarantined with its reason in the same transaction (nothing refused hides). ``digest``
        names the appended batch as ``ingest``'s does: a batch whose digest the store already
        holds is skipped whole (``auditor serve`` replays its spool exactly once this way)."""
        plain: list[tuple[int, int, dict[str, Any]]] = []
        ready: list[tuple[int, int, list[dict[str, Any]], Prepared]] = []
        pos0 = 0
        for first, records, prepared in parts:
            if (prepared is not None and prepared.typed is not None and not self.careful
                    and prepared.keep_payloads == self.keep_payloads):
                ready.append((pos0, first, records, prepared))
            else:
                plain += [(first + i, pos0 + i + 1, rec) for i, rec in enumerate(records)]
            pos0 += len(records)
        return self._append_split(name, plain, ready, [(line, pos0 + i, reason) for i, (line, reason)
                                                      in enumerate(refused, 1)], digest)

    def _append_split(self, name: str, plain: list[tuple[int, int, dict[str, Any]]],
                      ready: list[tuple[int, int, list[dict[str, Any]], "Prepared"]],
                      refused: list[tuple[int, int, str]] = (), digest: str | None = None) -> SourceCounts:
        """Stage ``plain`` records ``(line, pos, record)`` (split here) and ``ready`` parts
        ``(pos offset, first line, records, prepared split)`` as one source, and quarantine the
        ``refused`` ``(line, pos, reason)``."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from .typed import split, table

        tables, rest = [], plain
        if not self.careful:
            rest = []
            if plain:  # serve's parts all come split ahead: nothing to split here
                try:
                    cols, rest = split(plain, self.keep_payloads)
                    tables.append(table(cols))
                except (pa.ArrowException, UnicodeError):  # a lone surrogate, say: the JSON way decides
                    rest = plain
            for pos0, first, records, prepared in ready:
                t = prepared.typed
                if t.num_rows:
                    pos = t.column("pos")
                    t = t.set_column(0, "line", pc.add(pos, first - 1)).set_column(1, "pos", pc.add(pos, pos0))
                    tables.append(t)
                rest += [(first + p - 1, pos0 + p, records[p - 1]) for p in prepared.rest]
        typed = None
        if tables:
            typed = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
            typed, unread = self._unread_ts(typed)
            if unread:
                plain_at = {item[1]: item for item in plain}
                starts = [part[0] for part in ready]
                rest += [plain_at.get(p) or _ready_at(p, ready, starts) for p in unread]
        rest.sort(key=lambda r: r[1])  # in order already but for the ts unread and the parts' rests
        raws = [json.dumps(rec, default=str).encode() for _line, _pos, rec in rest]
        # A refused record is a line whose reader already found its reason (``bad``).
        chunk = pa.table({"line": pa.array([r[0] for r in rest] + [r[0] for r in refused], pa.int64()),
                          "pos": pa.array([r[1] for r in rest] + [r[1] for r in refused], pa.int64()),
                          "raw": pa.array(raws + [b""] * len(refused), pa.binary()),
                          "bad": pa.array([None] * len(rest) + [r[2] for r in refused], pa.string())})
        return self.ingest(name, "records", [chunk], digest=digest, typed=typed)

    def _unread_ts(self, typed: "pa.Table") -> tuple["pa.Table", list[int]]:
        """``typed`` without the records whose ``ts`` DuckDB does not read as an instant, and
        their ``pos``: those go the JSON way (the normalizer may read it as epoch seconds)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        unread = [p for (p,) in self.con.from_arrow(typed).filter(
            "ts IS NOT NULL AND try_cast(ts AS TIMESTAMPTZ) IS NULL").project("pos").fetchall()]
        if unread:
            mask = pc.is_in(typed.column("pos"), value_set=pa.array(unread, pa.int64()))
            typed = typed.filter(pc.invert(mask))
        return typed, unread


    # Reading.

    def input_summary(self, first: int = 20) -> InputSummary:
        lines_read, events, duplicates, quarantined, ignored = self.con.execute(SQL["totals"]).fetchone()
        files = [r[0] for r in self.con.execute(  # a live processor appends one name many times
            "SELECT name FROM sources GROUP BY name ORDER BY min(source_id)").fetchall()]
        sample = [QuarantinedLine(*r) for r in self.con.execute(SQL["quarantine_first"], [first]).fetchall()]
        return InputSummary(files, int(lines_read), int(events), int(duplicates), int(quarantined), int(ignored),
                            unplaced=sum(self.unplaced_kinds().values()), quarantine=sample,
                            ignore=ignore_summary(self.con) if ignored else [],
                            unplaced_first=[UnplacedLine(*r[:4]) for r in self.con.execute(
                                SQL["unplaced_first"], [first]).fetchall()],
                            skipped=list(self.skipped))

    def unplaced_kinds(self) -> dict[str, int]:
        """How many events of each kind are unplaced (SPEC rev 3: no seq in a key ordered by seq)."""
        return dict(self.con.execute(SQL["unplaced"]).fetchall())

    def malformed_fields(self) -> list[Diagnostic]:
        """One ``malformed_field`` diagnostic per file and field whose value was dropped on some
        lines (SPEC rev 3), saying how many lines, the first, and how many lose evidence."""
        return [malformed_field(*row[:8]) for row in self.con.execute(SQL["malformed"]).fetchall()]

    def id_conflicts(self, first: int = 5) -> list[Diagnostic]:
        """One ``event_id_conflict`` per event_id naming different events (all of them kept),
        in observation order; ``detail`` lists the first ``first`` lines using the id."""
        return [id_conflict(eid, rows, first) for eid, rows in self.con.execute(SQL["id_conflicts"]).fetchall()]

    def quarantine_frame(self) -> "pl.DataFrame":
        return self._frame(
            "SELECT s.name AS file, q.line, q.reason FROM quarantine q JOIN sources s USING (source_id) "
            "ORDER BY q.source_id, q.line")

    def events_frame(self) -> "pl.DataFrame":
        return self._frame(SQL["event_columns"] + " ORDER BY workflow_key, ord NULLS LAST, event_id, obs")

    def _frame(self, sql: str) -> "pl.DataFrame":
        import polars as pl

        return pl.from_arrow(self.con.sql(sql).to_arrow_table())

    def events_of(self, workflow_key: str, limit: int | None = None) -> list[Event]:
        # unplaced events (no seq in a key ordered by seq) last, in observation order
        sql = SQL["event_columns"] + " WHERE workflow_key = ? ORDER BY ord NULLS LAST, event_id, obs"
        params: list[Any] = [workflow_key]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        return [_event(r) for r in self.con.execute(sql, params).fetchall()]

    def iter_events(self, batch: int = 100_000) -> Iterator[Event]:
        """Every placed event in authoritative order per workflow key (the live detector's feed;
        unplaced events, without seq in a key ordered by seq, have no place in it)."""
        cur = self.con.cursor()
        cur.execute(QUIET)
        cur.execute(SQL["event_columns"] + " WHERE ord IS NOT NULL ORDER BY workflow_key, ord, event_id, obs")
        while rows := cur.fetchmany(batch):
            yield from (_event(r) for r in rows)


def id_conflict(event_id: str, rows: list[tuple], first: int = 5) -> Diagnostic:
    """The ``event_id_conflict`` of one id naming different events; ``rows`` are the events using
    it, ``(file, line, workflow_key, seq, kind)`` in observation order (``detail`` lists the first
    ``first``). The diagnostic sits at the first of them."""
    name, line, key, seq, kind = rows[0]
    shown = "; ".join(f"{n}:{ln} ({k}, seq {'-' if s is None else s}, {kd})" for n, ln, k, s, kd in rows[:first])
    more = f"; and {len(rows) - first} more" if len(rows) > first else ""
    detail = (f'event_id "{event_id[:80]}" names {len(rows)} different events, all kept: {shown}{more}; '
              "give each event its own id, or leave event_id out to have it derived")
    return Diagnostic(stable_id("d-", key, DiagnosticKind.EVENT_ID_CONFLICT, seq, event_id),
                      DiagnosticKind.EVENT_ID_CONFLICT, key, seq, None, detail)


def malformed_field(file: str, name: str, lines: int, first_line: int, key: str, seq: int | None,
                    position: int | None, lost: int) -> Diagnostic:
    """The ``malformed_field`` diagnostic of one file and field: ``lines`` events whose value of
    field ``name`` was dropped (the first at ``first_line``), ``lost`` of them in a field a finding
    rule reads (so the verdict cannot be a pass)."""
    what = ("missing or not continue, pause or terminate: the revalidation decides nothing"
            if name == "decision" else "an object, an array or a value the format does not know")
    detail = (f'"{name}" could not be read on {lines:,} line{"s" if lines != 1 else ""} of {file} (first: line '
              f"{first_line}): {what}; the value was dropped and the event kept")
    if lost:
        detail += (f"; {lost:,} of them lose evidence a finding rule reads, so a pass cannot be claimed; "
                   "write the value in the shape the format describes")
    return Diagnostic(stable_id("d-", key, DiagnosticKind.MALFORMED_FIELD, file, name), DiagnosticKind.MALFORMED_FIELD,
                      key, seq, None, detail, numbers={"lines": lines, "lost": lost}, position=position,
                      file=file, line=first_line)


def _cause(e: BaseException) -> str:
    """The first line of an error, without DuckDB's "IO Error: " style prefix."""
    text = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return text.split(": ", 1)[1] if text.split(": ", 1)[0].endswith("Error") and ": " in text else text


def _event(row: tuple) -> Event:
    """An ``event_columns`` row as an ``Event``."""
    (seq, key, kind, epoch, worker, effect_key, sink, sink_result, reporter, step_id, ts, eid, attrs,
     lease_until, heartbeat, reason, authority_id, expires_at, scope, decision, position) = row
    return Event(
        seq=seq, workflow_key=key, kind=Kind(kind), epoch=epoch, worker=worker,
        effect_key=effect_key, sink=sink,
        sink_result=SinkResult(sink_result) if sink_result else None,
        reporter=_REPORTERS.get(reporter, reporter),  # an unknown reporter is kept as given
        step_id=step_id, ts=ts, event_id=eid, attrs=json.loads(attrs) if attrs else None,
        lease_until=lease_until, heartbeat=heartbeat, reason=reason, authority_id=authority_id,
        expires_at=expires_at, scope=scope, decision=decision, position=position)
