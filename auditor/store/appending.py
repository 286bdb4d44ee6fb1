"""Appending to the store: a source's raw lines (or a decoder's typed records) normalized into the
events table in one transaction per source, with its quarantine and its accounting (``SourceCounts``).
``Store`` takes these methods from ``Appending``.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.fields import (BLANK, DECISIONS, EFFECT_KINDS, FIELDS, HEARTBEATS, INSTANT_SHAPE, KEY_FIELDS,
                           REPORTERS, SINK_RESULTS)
from ..normalize.reference import SQL_SHAPE
from ..normalize.staging import SQL as STAGING_SQL
from ..normalize.vocabulary import REASONS
from .ignored import count_ignored
from .prefilter import stage_params
from .setup import known_attrs
from .schema import SQL

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

    from .typed import Prepared

STAGE_BATCH_ROWS = 16_384
#: Raw lines staged into the events table in one statement. Each INSERT into the compressed table
#: finishes its row groups (122,880 rows) on its own: a 32 MB chunk (about 140,000 events) a
#: time, appending took as long as 60 % of the stage (bench/RESULTS.md); four row groups at a time
#: take half of that, for about 120 MB of raw lines held (250 bytes a line).
APPEND_ROWS = 4 * 122_880


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
    "fast_shape": json.dumps({f: "JSON" if f in KEY_FIELDS else "VARCHAR" for f in (*FIELDS, "attrs")}
                             | {"attrs": "JSON"}),
    "effect_kinds": sorted(EFFECT_KINDS), "heartbeats": list(HEARTBEATS), "decisions": list(DECISIONS),
    "sink_results": list(SINK_RESULTS), "reporters": list(REPORTERS), "slow_shape": SQL_SHAPE,
    "not_utf8": REASONS["not_utf8"], "not_json": REASONS["not_json"], "instant_shape": INSTANT_SHAPE,
    # What the normalizer's str.strip() removes: a text value whose first character is one of
    # these may be blank (empty is absent), so it takes the careful path. DuckDB's trim removes
    # spaces only, and would keep "\t" as a worker or a workflow key.
    "blank": BLANK,
}


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


class Appending:
    """The appending half of ``Store`` (a mixin: ``self.con``, ``self.transaction`` and the
    store's settings come from ``Store``)."""

    con: "duckdb.DuckDBPyConnection"

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
        the fast path's columns (``store.typed``; ``pos`` numbered with the lines), staged with the
        first chunk.
        """
        if self.already_ingested(digest):
            return SourceCounts(name, 0, 0, 0, 0, skipped=True)

        con = self.con
        with self.transaction():
            (source_id,) = con.execute(
                "SELECT coalesce(max(source_id), 0) + 1 FROM sources").fetchone()
            ((before,),) = con.execute("SELECT count(*) FROM events").fetchall()
            ((base,),) = con.execute(SQL["position_base"], [source_id]).fetchall()
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
                    lines_read += self._stage(held, typed_chunk, source_id, base)
                    typed_chunk = _no_typed()
            if held:
                lines_read += self._stage(held, typed_chunk, source_id, base)
            ignored = count_ignored(con, source_id, self.vocabulary).get(source_id, 0)
            ((quarantined,),) = con.execute(SQL["quarantine_staged"], [source_id]).fetchall()
            con.execute(SQL["drop_rejected"], [source_id])
            self._fill_ids(source_id)
            normalized = lines_read - quarantined - ignored
            con.execute(SQL["drop_duplicates"], [source_id])
            (after,) = con.execute("SELECT count(*) FROM events").fetchone()
            added = after - before
            con.execute(
                "INSERT INTO sources (source_id, name, digest, format, lines_read, events, duplicates, quarantined, "
                "ignored) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [source_id, name, digest, fmt, lines_read, added, normalized - added, quarantined, ignored])
            con.execute(SQL["settle_given_ids"])
            ((numbered,),) = con.execute(SQL["numbered"], [source_id, base]).fetchall()
            if not numbered:
                con.execute(SQL["positions"], [source_id, base])
            con.execute(SQL["observed_order"])
        return SourceCounts(name, lines_read, added, normalized - added, quarantined, ignored=ignored)

    def _fill_ids(self, first: int) -> None:
        """The derived ids of the sources from ``first`` on that detection compares (store.sql's
        ``fill_ids``; a ``derive_ids`` store wrote them all as it staged)."""
        if not self.derive_ids:
            self.con.execute(SQL["fill_ids"], [first])

    def _stage(self, held: list["pa.Table"], typed_chunk: "pa.Table", source_id: int,
               position_base: int | None = None) -> int:
        """Normalize the raw chunks ``held`` and the typed records ``typed_chunk`` into the events
        table in one statement (``stage``), and empty ``held``; the count of lines staged. Each event
        is numbered ``position_base + pos`` (None: not numbered, see ``positions``)."""
        import pyarrow as pa

        schema = held[0].schema
        # DuckDB scans one arrow batch per thread: smaller batches let every core work. A
        # reader's own rows (a line too long, a cut stream) may hold their bytes in another
        # binary type; a cast imports pyarrow.compute, so only they pay for it.
        raw_chunk = pa.Table.from_batches(  # noqa: F841 - read by name in stage
            [b for t in held for b in (t if t.schema == schema else t.cast(schema)).to_batches(
                max_chunksize=STAGE_BATCH_ROWS)], schema)
        held.clear()
        attrs_known = known_attrs(self.keep_payloads)  # noqa: F841 - read by name in stage
        ((staged,),) = self.con.execute(STAGING_SQL["stage"], dict(
            _STAGE_PARAMS, **stage_params(self.vocabulary), source_id=source_id, keep_payloads=self.keep_payloads,
            careful=self.careful, position_base=position_base, derive_ids=self.derive_ids)).fetchall()
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
                self._fill_ids(first)
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
            con.execute(SQL["settle_given_ids"])
            ((base,),) = con.execute(SQL["position_base"], [first]).fetchall()
            con.execute(SQL["positions"], [first, base])
            con.execute(SQL["observed_order"])
        return out

    def append_records(self, name: str, records: Iterable[tuple[int, dict[str, Any]]]) -> SourceCounts:
        """Append Python records ``(line, canonical dict)`` through the same normalizer.

        Records the stage's fast path would take from their JSON text are handed to it as typed
        columns instead (``store.typed``: no JSON round trip, the same rows); the others, and
        every record of a ``careful`` store, go as JSON lines."""
        return self._append_split(name, [(line, pos, rec) for pos, (line, rec) in enumerate(records, 1)], [])

    def append_parts(self, name: str, parts: Iterable[tuple[int, list[dict[str, Any]], "Prepared | None"]],
                     refused: Iterable[tuple[int, str]] = (), digest: str | None = None) -> SourceCounts:
        """Append records given in parts ``(first line, records, prepared split or None)`` as one
        source: what ``append_records`` writes for all of them, numbered from each part's first
        line on. A part split ahead (``store.typed.prepare``, in serve's decoder processes) is not
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
