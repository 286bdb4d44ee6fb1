"""Stage 3, store: the DuckDB schema and idempotent, per-file transactional appends.

Every reader hands the store chunks of raw lines (``line``, ``raw`` bytes holding one JSON object);
stage 2's SQL normalizer (``normalize/normalize.sql``, run inside the append) normalizes them in
one SQL pass into events or quarantined lines with a reason (the lines its fast path cannot take
go through ``normalize.normalize_line``, with the store's ``vocabulary``). A file is ingested inside one transaction, so an interrupted ingest leaves the
store as it was, and an event already stored (same ``event_id``, same content) is not added again,
so ingesting the same evidence twice adds nothing. Rows are identified by ``obs``: one
``event_id`` with different content keeps both rows (``id_conflicts``).

Threading: a ``Store`` owns one DuckDB connection; use it from one thread at a time.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import duckdb

from ..core.errors import StoreError, StoreLocked
from ..core.summary import SkippedPath
from ..normalize.vocabulary import Vocabulary, vocabulary_of
from ..core.columns import optional_fields
from ..core.sql import QUIET
from . import memory
from .accounting import Accounting, id_conflict, malformed_field
from .appending import APPEND_ROWS, Appending, SourceCounts
from .memory import size_bytes
from .schema import SQL
from .setup import VOCABULARY_BOXES, attrs_batch, forget_attrs, normalize_udf, refuse_foreign, register

#: ``Store.in_order`` blocks open, by database (``Store._database``), in this process.
_ORDERED: dict[str, int] = {}
_ORDERED_LOCK = threading.Lock()

__all__ = ["APPEND_ROWS", "SMALL_INPUT", "SQL", "SourceCounts", "Store", "id_conflict", "malformed_field",
           "size_bytes"]
#: Input bytes up to which an audit's scratch store is ``small`` (in memory, one thread).
SMALL_INPUT = 16 << 20
T = TypeVar("T")


def _drop_scratch(con: duckdb.DuckDBPyConnection, scratch: str) -> None:
    con.close()
    shutil.rmtree(scratch, ignore_errors=True)


class Store(Appending, Accounting):
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
                 vocabulary: "Vocabulary | str | os.PathLike | None" = None, careful: bool = False,
                 derive_ids: bool = False, small: bool = False) -> None:
        self.path = None if path is None else Path(path)
        # A scratch store for an input known to be small (``SMALL_INPUT``): in memory, on one
        # thread. Most of a small audit is DuckDB's cost per statement, which a file (detection's
        # scratch too) and a second thread raise by half: the seed took 0.36 s, now 0.23 s.
        self.small = small and self.path is None
        self.keep_payloads = keep_payloads
        # Every line through normalize_line, none on the SQL fast path: the reference the fast
        # path is pinned to (tests/normalize/test_fast_path.py), never faster.
        self.careful = careful
        # Write every derived event id as the line is staged, not only those detection compares
        # (store.sql's fill_ids): the reference the lazy ids are pinned to (tests/store/test_lazy_ids.py).
        self.derive_ids = derive_ids
        # A box, not self, in the UDF's closure: the connection holds the UDF, and the store
        # must not be kept alive by its own connection.
        self._vocabulary = [vocabulary_of(vocabulary)]
        self.skipped: list[SkippedPath] = []  # directory entries this process did not read
        self._private: str | None = None  # see private_path
        if self.path is not None:
            refuse_foreign(self.path)
        self.read_only = read_only
        self.con = self._connect(lock_timeout, read_only)
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute(QUIET)
        # Bounded memory: DuckDB spills past this instead of growing with the log (see memory.py),
        # and no query here depends on the order rows were inserted in.
        self.memory_limit = memory.limit()
        self.con.execute("SET memory_limit = ?", [self.memory_limit])
        with _ORDERED_LOCK:  # not while another store on this database reads in order (in_order)
            if not _ORDERED.get(self._database()):
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
            if self.con.execute("SELECT is_nullable FROM information_schema.columns WHERE table_schema = 'main' "
                                "AND table_name = 'events' AND column_name = 'event_id'").fetchone() == ("NO",):
                self.con.execute(SQL["nullable_ids"])
        self._macros(self.con)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A connection of its own to this store's database (reads beside another's open
        result), quiet, with this store's macros (temporary ones are each connection's own)."""
        cur = self.con.cursor()
        cur.execute("SET TimeZone = 'UTC'")  # each connection's own setting: derived ids hash instants as text
        cur.execute(QUIET)
        self._macros(cur)
        return cur

    def _macros(self, con: duckdb.DuckDBPyConnection) -> None:
        """store.sql's macros (``derived_id_of``, ``event_id_of``, ``identified_events()``, ...) on
        ``con``; a read-only file without an events table has none to read."""
        try:
            con.execute(SQL["macros"])
        except duckdb.CatalogException:
            if not self.read_only:
                raise

    def _read_older_schema(self) -> None:
        """A store written before revision 3, opened read-only, cannot gain the columns revisions
        2 and 3 added: read it through a temporary view that adds them (nulls for the optional
        fields, as such a store holds none; positions numbered in observation order, and the
        order detection uses decided again by revision 3's rule)."""
        self._read_older_accounting()
        have = {r[0] for r in self.con.execute(
            "SELECT column_name FROM duckdb_columns() WHERE database_name = current_database() "
            "AND schema_name = 'main' AND table_name = 'events'").fetchall()}
        missing = [f for f in optional_fields() if f.name not in have]
        if not have or (not missing and "position" in have):
            return
        ((db,),) = self.con.execute("SELECT current_database()").fetchall()
        added = "".join(f", NULL::{f.sql} AS {f.name}" for f in missing)
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
                self.con.execute(SQL["positions"], [0, 0])
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
        them out, where in-memory rows of ten million events take 3 GB; a ``small`` store is held
        in memory (spilling to that directory if it must)."""
        scratch = tempfile.mkdtemp(prefix="auditor-")
        try:
            if self.small:
                con = duckdb.connect(":memory:")
                con.execute("SET threads = 1")
            else:
                con = duckdb.connect(os.path.join(scratch, "audit.duckdb"))
                con.execute("PRAGMA disable_checkpoint_on_shutdown")
            con.execute("SET temp_directory = ?", [os.path.join(scratch, "spill")])
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        self._drop_scratch = weakref.finalize(self, _drop_scratch, con, scratch)
        self._private = scratch
        return con

    def _private_spill(self) -> None:
        """A read-only store may sit in a folder we cannot write (``<db>.tmp`` is DuckDB's default
        spill place): spill to a private temporary directory, removed with the store."""
        self.con.execute("SET temp_directory = ?", [self.private_path("spill")])

    def private_path(self, name: str) -> str:
        """``name`` in a directory of this store's own (the scratch store's, or a temporary one
        made on first use), removed with the store: for files no other process may see, such as
        the database detection attaches beside a read-only store."""
        if self._private is None:
            self._private = tempfile.mkdtemp(prefix="auditor-private-")
            weakref.finalize(self, shutil.rmtree, self._private, ignore_errors=True)
        return os.path.join(self._private, name)

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
        self.con.execute("SET memory_limit = ?", [self.memory_limit])

    def _database(self) -> str:
        """What names this store's DuckDB database in this process: stores on one file share it."""
        return f"file {self.path.resolve()}" if self.path is not None else f"scratch {id(self)}"

    @contextmanager
    def in_order(self) -> Iterator[None]:
        """Within it, a plain scan of a table returns its rows in the table's order, streamed: a
        table written from an ``ORDER BY`` lies in that order (detect.sql writes the tables explain
        reads in key order), and the scans started within it read them so. The store otherwise lets DuckDB reorder what has no ``ORDER BY``
        (``preserve_insertion_order`` off, for speed). The setting is the whole database's, so
        every store open on it scans in order meanwhile (which costs only speed), and none turns
        it off before the last ``in_order`` on it ends: a store opened beside a report (``auditor
        serve`` reopens its store while one runs) would otherwise reorder the report's keys."""
        database = self._database()
        with _ORDERED_LOCK:
            self.con.execute("SET preserve_insertion_order = true")
            _ORDERED[database] = _ORDERED.get(database, 0) + 1
        try:
            yield
        finally:
            with _ORDERED_LOCK:
                left = _ORDERED.pop(database) - 1
                if left:
                    _ORDERED[database] = left
                else:
                    with contextlib.suppress(duckdb.ConnectionException):  # closed meanwhile: nothing to restore
                        self.con.execute("SET preserve_insertion_order = false")

    def lower_memory(self, limit: str) -> None:
        """DuckDB's memory limit down to ``limit`` for a while (``shrink`` restores the usual one),
        never up: a usual limit already lower stays."""
        if size_bytes(limit) < size_bytes(self.memory_limit):
            self.con.execute("SET memory_limit = ?", [limit])

    def adapting(self, run: Callable[[], T]) -> T:
        """``run()``; should DuckDB run out of memory, the store's limit is raised (``memory.raised``)
        and ``run`` called again, until it fits or the limit can go no higher (then the error is
        raised). ``run`` must be safe to repeat. A limit set by ``AUDITOR_MEMORY_LIMIT`` is kept:
        the error is raised at once."""
        while True:
            try:
                return run()
            except duckdb.OutOfMemoryException:
                if not self.more_memory():
                    raise

    def more_memory(self) -> bool:
        """Raise the store's memory limit for a statement that ran out (``memory.raised``); False
        when it cannot go higher, or was set by ``AUDITOR_MEMORY_LIMIT``."""
        higher = memory.raised(self.memory_limit)
        if higher is None:
            return False
        self.memory_limit = higher
        self.con.execute("SET memory_limit = ?", [higher])
        return True

    def close(self) -> None:
        self.con.close()
        if self.path is None:
            self._drop_scratch()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cause(e: BaseException) -> str:
    """The first line of an error, without DuckDB's "IO Error: " style prefix."""
    text = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return text.split(": ", 1)[1] if text.split(": ", 1)[0].endswith("Error") and ": " in text else text
