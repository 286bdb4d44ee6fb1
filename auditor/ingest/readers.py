"""Stage 1-2, read CSV and Parquet through DuckDB's own readers, one JSON object per row.

CSV cells stay strings (the normalizer accepts integers written as decimal strings). When DuckDB's
strict CSV reader refuses a file, ``careful_csv_chunks`` reads it again and quarantines each
refused line on its own.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from ..core.errors import InputError
from ..core.sql import QUIET
from .compression import DamagedStream, compression_of, open_bytes
from .csv_lines import record_lines
from .jsonl import CHUNK_BYTES, _corrupt, damage_table, too_long_reason
from .contract import Progress, Source

if TYPE_CHECKING:
    import pyarrow as pa



def duckdb_chunks(con: duckdb.DuckDBPyConnection, source: Source, fmt: str, progress: Progress | None = None,
                  batch_rows: int = 200_000) -> Iterator["pa.Table"]:
    """CSV or Parquet rows through DuckDB's readers, each row as one JSON object.

    CSV cells stay strings (the normalizer accepts integers written as decimal strings); the
    header is not a line read, so row ``n`` is line ``n + 1``. Parquet rows are numbered from 1.
    """
    import pyarrow as pa

    if fmt == "csv":
        reader = f"read_csv(?, {_CSV_OPTIONS}, compression = ?)"
        params = [str(source.path), compression_of(source.path) or "none"]
        first = 2
        if params[1] != "none" and not _intact(source):
            raise _ReadCarefully()  # DuckDB would stop silently at the cut of a zstd frame
        query = f"SELECT {_row_object(con, reader, params)}::BLOB AS raw, {_BLANK_ROW} AS blank FROM {reader} t"
    else:
        # Parquet says which row each one is: numbering does not depend on the scan's output order.
        params = [str(source.path)]
        row = _parquet_object(con, params) or "to_json(struct_pack(*COLUMNS(* EXCLUDE (file_row_number))))"
        query = (f"SELECT {row}::BLOB AS raw, "
                 "file_row_number + 1 AS line FROM read_parquet(?, file_row_number = true) t")
        first = 1
    starts = record_lines(source) if fmt == "csv" else None
    cur = con.cursor()
    cur.execute(QUIET)
    try:
        batches = cur.sql(query, params=params).to_arrow_reader(batch_rows)
        line = first
        for batch in batches:
            n = batch.num_rows
            if fmt == "csv":
                lines = pa.array(_numbers(starts, line - first, n, line), pa.int64())
                yield _without_blank_rows(pa.table({"line": lines, "pos": lines, "raw": batch.column(0),
                                                    "bad": pa.nulls(n, pa.string())}), batch.column(1))
            else:
                lines = batch.column(1)
                yield pa.table({"line": lines, "pos": lines, "raw": batch.column(0),
                                "bad": pa.nulls(n, pa.string())})
            line += n
    except (duckdb.Error, OSError) as e:  # arrow's batch reader re-raises DuckDB's errors as OSError
        if fmt == "csv":
            raise _ReadCarefully() from e
        raise InputError(f"{source.name}: cannot read as {fmt}: {_first_line(e)}; check that it is "
                         f"a {fmt} file (--format), or re-export it") from e
    finally:
        cur.close()
    if progress is not None:
        progress(source.size)


def _row_object(con: duckdb.DuckDBPyConnection, reader: str, params: list) -> str:
    """The SQL expression of one CSV row as a JSON object: ``to_json(t)``, or, when the header
    names one field twice (``epoch,epoch``, ``epoch,Epoch``: DuckDB renames the second one
    ``epoch_1``, and its value would land in attrs unread), an object written with the header's
    own names, so the normalizer reads the row as it reads a JSON line naming the field twice:
    the same value is read once, different values make the row ambiguous (quarantined)."""
    try:
        names = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {reader}", params).fetchall()]
        header = con.execute(f"SELECT * FROM {reader.replace('header = true', 'header = false')} LIMIT 1",
                             params).fetchall()
    except duckdb.Error:
        return "to_json(t)"  # the readers below say what is wrong with the file
    # cells past the header's (a row with more cells, null_padding) keep DuckDB's names
    cells = [c if isinstance(c, str) else n for c, n in zip(header[0], names)] if header else []
    return _object_of(cells, names) if len(cells) == len(names) else "to_json(t)"


def _object_of(given: list[str], names: list[str]) -> str:
    """``to_json(t)`` when the ``given`` column names are distinct fields; else the object with
    the given names, DuckDB's ``names`` for the columns (a null member is left out, as absent)."""
    from ..core.fields import name_key

    keys = [name_key(c) for c in given]
    if len(set(keys)) == len(keys):
        return "to_json(t)"
    members = ", ".join(f"to_json({_literal(c)}) || ':' || to_json(t.{_identifier(n)})" for c, n in zip(given, names))
    return f"('{{' || concat_ws(',', {members}) || '}}')"


def _parquet_object(con: duckdb.DuckDBPyConnection, params: list) -> str | None:
    """``_row_object`` for Parquet: a file may name one column twice (DuckDB renames the second)."""
    try:
        import pyarrow.parquet as pq

        given = pq.read_schema(params[0]).names
        names = [r[0] for r in con.execute("DESCRIBE SELECT * EXCLUDE (file_row_number) FROM "
                                           "read_parquet(?, file_row_number = true)", params).fetchall()]
    except Exception:  # the reader below says what is wrong with the file
        return None
    if len(given) != len(names):
        return None
    row = _object_of(given, names)
    return None if row == "to_json(t)" else row


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _numbers(starts, done: int, n: int, line: int):
    """The line numbers of ``n`` rows after ``done`` rows: where each starts (``record_lines``),
    or consecutive ones from ``line`` when every row is one line (or the rows outrun the map)."""
    if starts is not None and done + n <= len(starts):
        return starts[done:done + n]
    return range(line, line + n)


#: A CSV row whose every cell is empty or spaces is a blank line: not a line read (SPEC rev 2).
_BLANK_ROW = "coalesce(trim(concat_ws('', *COLUMNS(*))), '') = ''"


def _without_blank_rows(table: "pa.Table", blank: "pa.Array") -> "pa.Table":
    import pyarrow.compute as pc

    return table.filter(pc.invert(blank)) if pc.any(blank).as_py() else table


# parallel = false: rows are numbered by the order they come back in, which only one scanning
# thread keeps once preserve_insertion_order is off (the store turns it off, for speed, globally);
# it is also what lets quoted newlines and null_padding go together.
_CSV_OPTIONS = ("all_varchar = true, header = true, null_padding = true, strict_mode = false, "
                "parallel = false")

#: What DuckDB's CSV reader calls a refused line, in the words of the quarantine.
_CSV_REJECTS = {
    "INVALID ENCODING": "line is not valid UTF-8; re-encode the file as UTF-8",
    "TOO MANY COLUMNS": "line has more cells than the header; quote cells holding the delimiter",
    "UNQUOTED VALUE": "line has a quote inside an unquoted cell; quote the cell and double the quote",
}


class _ReadCarefully(Exception):
    """DuckDB's strict CSV reader refused the file; read it again line by line (see careful_csv_chunks)."""


def _intact(source: Source) -> bool:
    """Whether a compressed file decompresses to its end (one pass, nothing kept)."""
    try:
        with open_bytes(source.path, source.limits, source.name) as f:
            while f.read(CHUNK_BYTES):
                pass
    except DamagedStream:
        return False
    return True


def careful_csv_chunks(con: duckdb.DuckDBPyConnection, source: Source, progress: Progress | None = None,
                       batch_rows: int = 200_000) -> Iterator["pa.Table"]:
    """CSV rows when the strict reader refused the file: each refused line is quarantined.

    The slow path, taken only for a damaged file: a compressed file is first decompressed up to
    any damage into a temporary file (the damage becomes one quarantined line); then DuckDB
    reads it once to list the lines it refuses (``store_rejects``) and once more to hand over the
    rest. Rows are numbered around the refused lines, one row per line, as on the fast path.
    """
    import numpy as np
    import pyarrow as pa

    path, damage, spool = source.path, None, None
    if compression_of(source.path) is not None:
        spool, damage = _spool_decompressed(source)
        path = spool
    cur = con.cursor()
    cur.execute(QUIET)
    try:
        reader = (f"read_csv(?, {_CSV_OPTIONS}, ignore_errors = true, "
                  f"max_line_size = {int(source.limits.max_line_bytes)}")
        [(good,)] = cur.execute(  # fetchall: the rejects table exists once the result is drained
            f"SELECT count(to_json(t)) FROM {reader}, store_rejects = true, "
            "rejects_table = 'auditor_rejects', rejects_scan = 'auditor_scans') t",
            [str(path)]).fetchall()
        refused = cur.execute(
            "SELECT line, min(error_type) FROM auditor_rejects GROUP BY line ORDER BY line").fetchall()
        numbers = np.setdiff1d(np.arange(2, 2 + good + len(refused), dtype=np.int64),
                               np.array([r[0] for r in refused], np.int64))
        done = 0
        for batch in cur.sql(f"SELECT {_row_object(cur, reader + ')', [str(path)])}::BLOB AS raw, "
                             f"{_BLANK_ROW} AS blank FROM {reader}) t",
                             params=[str(path)]).to_arrow_reader(batch_rows):
            lines = pa.array(numbers[done:done + batch.num_rows])
            done += batch.num_rows
            yield _without_blank_rows(pa.table({"line": lines, "pos": lines, "raw": batch.column(0),
                                                "bad": pa.nulls(batch.num_rows, pa.string())}), batch.column(1))
    except (duckdb.Error, OSError) as e:
        raise InputError(f"{source.name}: cannot read as csv: {_first_line(e)}; fix the file or "
                         "re-export it") from e
    finally:
        cur.close()
        if spool is not None:
            spool.unlink()
    if refused:
        lines = pa.array([r[0] for r in refused], pa.int64())
        reasons = [too_long_reason(source.limits.max_line_bytes) if r[1] == "LINE SIZE OVER MAXIMUM" else _CSV_REJECTS.get(r[1], f"line cannot be read as CSV ({str(r[1]).lower()}); "
                                    "fix the line or re-export the file") for r in refused]
        yield pa.table({"line": lines, "pos": lines, "raw": pa.array([b""] * len(refused), pa.large_binary()),
                        "bad": pa.array(reasons, pa.string())})
    if damage is not None:
        yield damage_table(*damage)
    if progress is not None:
        progress(source.size)


def _spool_decompressed(source: Source) -> tuple[Path, tuple[int, str] | None]:
    """Decompress into a temporary file up to any damage; the damage as ``(line, what)``."""
    tmp = tempfile.NamedTemporaryFile(prefix="auditor-csv-", suffix=".csv", delete=False)
    damage, lines, keep = None, 0, 0
    with tmp, open_bytes(source.path, source.limits, source.name) as f:
        while True:
            try:
                block = f.read(CHUNK_BYTES)
            except DamagedStream as e:
                if not e.truncated:
                    Path(tmp.name).unlink()
                    raise _corrupt(source, lines + 1, e) from e
                tmp.truncate(keep)  # the cut line goes, with everything after it
                damage = (lines + 1, str(e))
                break
            if not block:
                break
            tmp.write(block)
            if (nl := block.rfind(b"\n")) >= 0:
                lines += block.count(b"\n")
                keep = tmp.tell() - len(block) + nl + 1
    return Path(tmp.name), damage


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
