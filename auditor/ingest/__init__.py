"""Stages 1-2, read and normalize: find the input files, undo compression, detect the format, and
hand the store chunks of raw lines.

JSON lines are split in bulk (numpy finds the newlines, arrow wraps the bytes without copying) so
no Python code runs per line on the happy path; CSV and Parquet go through DuckDB's own readers and
arrive as one JSON object per row; OTLP JSON is unpacked by ``ingest.otlp``. All of them meet the
same SQL normalizer in ``store.sql``.
"""

from __future__ import annotations

import atexit
import hashlib
import io
import os
import re
import shutil
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

import duckdb

from ..store import QUIET, SourceCounts, Store

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS = ("auto", "jsonl", "csv", "parquet", "otlp")
CHUNK_BYTES = 32 << 20
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".log": "jsonl",
             ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_COMPRESSED = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}
#: The Collector's file exporter writes one export request per line, ``{"resourceSpans": ...``.
#: Only the first line decides: canonical events may well mention resourceSpans in their attrs.
_OTLP_FIRST_LINE = re.compile(rb'(?:\xef\xbb\xbf)?\s*\{\s*"resourceSpans"\s*:')

Progress = Callable[[int], None]  # called with the number of input bytes just consumed


class InputError(Exception):
    """An input path cannot be read at all (missing, unreadable, unknown format, corrupt archive)."""


class DamagedStream(InputError):
    """A gzip or zstd stream is cut short (``truncated``) or corrupt; the bytes before it were read."""

    def __init__(self, message: str, truncated: bool) -> None:
        super().__init__(message)
        self.truncated = truncated


@dataclass(frozen=True, slots=True)
class Source:
    """One input: a file, or standard input spooled to a temporary file."""

    name: str      # as the user will recognise it
    path: Path     # where the bytes are
    size: int


def discover(paths: Iterable[str | os.PathLike]) -> list[Source]:
    """Expand directories (every supported file below, sorted) and standard input (``-``)."""
    out: list[Source] = []
    for p in paths:
        if str(p) == "-":
            out.append(_spool_stdin())
            continue
        path = Path(p)
        if path.is_dir():
            found = sorted(f for f in _below(path) if _supported(f))
            for f in found:
                _check_readable(f, path)
            out.extend(Source(str(f), f, f.stat().st_size) for f in found)
        elif path.is_file():
            _check_readable(path)
            out.append(Source(str(path), path, path.stat().st_size))
        elif path.exists():
            raise InputError(f"{path}: not a regular file or directory")
        else:
            raise InputError(f"{path}: no such file or directory; check the path")
    return out


def _below(top: Path) -> list[Path]:
    """Every file below ``top``, links to files included.

    An unreadable directory or a link to nothing is an error rather than a silent skip: the
    evidence an operator pointed at must be read in full, or the audit says what it could not read.
    """
    def refuse(e: OSError) -> None:
        raise InputError(f"{e.filename}: cannot list this directory ({e.strerror}); check its "
                         f"permissions, or move it out of {top}")

    out = []
    for root, _dirs, files in os.walk(top, onerror=refuse):  # links to directories not followed, as rglob
        for name in files:
            f = Path(root, name)
            if f.is_file():
                out.append(f)
            elif f.is_symlink() and not f.exists() and _supported(f):
                raise InputError(f"{f}: broken symbolic link (its target {os.readlink(f)} is missing); "
                                 f"restore the target, or remove the link from {top}")
    return out


def _check_readable(path: Path, within: Path | None = None) -> None:
    """Fail before anything is ingested when a file cannot be opened (permissions, mostly)."""
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        where = f", or move it out of {within}" if within is not None else ""
        raise InputError(f"{path}: cannot read this file ({e.strerror or e}); check its "
                         f"permissions{where}") from e


def _supported(path: Path) -> bool:
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if suffixes and suffixes[-1] in _COMPRESSED:
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in _SUFFIXES


def _spool_stdin() -> Source:
    tmp = tempfile.NamedTemporaryFile(prefix="auditor-stdin-", delete=False)
    # The copy holds the raw input, payloads included: gone once read (read_source), or at exit.
    atexit.register(Path(tmp.name).unlink, missing_ok=True)
    with tmp:
        shutil.copyfileobj(sys.stdin.buffer, tmp, 1 << 20)
    return Source("<stdin>", Path(tmp.name), os.path.getsize(tmp.name))


def compression_of(path: Path) -> str | None:
    with open(path, "rb") as f:
        magic = f.read(4)
    if magic[:2] == b"\x1f\x8b":
        return "gzip"
    if magic == b"\x28\xb5\x2f\xfd":
        return "zstd"
    return None


def open_bytes(path: Path) -> IO[bytes]:
    """A binary stream of the file's content, decompressed when it is gzip or zstd.

    A compressed stream hands out every byte it can decode; at a cut or a corruption, the read
    after the last good byte raises ``DamagedStream``.
    """
    kind = compression_of(path)
    if kind is None:
        return open(path, "rb")
    return _Decompressed(path, kind)


class _Decompressed(io.RawIOBase):
    """gzip or zstd content, member after member (frame after frame), that reports damage late.

    ``gzip.open`` drops the block it was decoding when the file is cut short, and zstandard's
    stream reader ends a truncated frame silently: a log copied off a crashed host is exactly
    such a file, and the lines before the cut are evidence. Output per call is bounded (gzip by
    ``max_length``, zstd by feeding small pieces) so a highly compressed file does not balloon.
    """

    def __init__(self, path: Path, kind: str) -> None:
        self._f = open(path, "rb")
        self._kind = kind
        self._step = (1 << 20) if kind == "gzip" else (16 << 10)
        self._d = self._decoder()
        self._errors: tuple[type[Exception], ...] = (zlib.error,)
        if kind == "zstd":
            import zstandard

            self._errors = (zstandard.ZstdError,)
        self._fed = False   # the current member/frame has consumed input and not yet ended
        self._in = b""      # compressed bytes not yet consumed
        self._out = bytearray()
        self._end = False
        self._damage: tuple[str, bool] | None = None  # message, truncated

    def _decoder(self):
        if self._kind == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj()

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        want = -1 if size is None else size
        while (want < 0 or len(self._out) < want) and not self._end:
            self._decode_some()
        take = len(self._out) if want < 0 else min(want, len(self._out))
        if take:
            with memoryview(self._out) as view:
                chunk = bytes(view[:take])
            del self._out[:take]
            return chunk
        if self._damage is not None:
            raise DamagedStream(*self._damage)
        return b""

    def readinto(self, buffer) -> int:
        chunk = self.read(len(buffer))
        buffer[:len(chunk)] = chunk
        return len(chunk)

    def _decode_some(self) -> None:
        if not self._in:
            self._in = self._f.read(self._step)
            if not self._in:
                self._end = True
                if self._fed:
                    self._damage = (f"the {self._kind} stream is cut short (the file is truncated)", True)
                return
        if self._kind == "gzip" and not self._fed:
            self._in = self._in.lstrip(b"\0")  # zero padding after a member, as gzip allows
            if not self._in:
                return
        try:
            if self._kind == "gzip":
                out = self._d.decompress(self._in, 4 << 20)
                rest = self._d.unconsumed_tail
            else:
                out, rest = self._d.decompress(self._in), b""
        except self._errors as e:
            self._end, self._in = True, b""
            self._damage = (f"the {self._kind} stream is corrupt ({e})", False)
            return
        self._out += out
        self._fed = True
        if self._d.eof:  # a member or frame ended: the next one (if any) starts in unused_data
            rest = self._d.unused_data + rest
            self._d, self._fed = self._decoder(), False
        self._in = rest

    def close(self) -> None:
        self._f.close()
        super().close()


def detect_format(source: Source) -> str:
    """Guess the format from the name, else from the first bytes of the content."""
    suffixes = [s.lower() for s in source.path.suffixes[-2:]] if source.name != "<stdin>" else []
    if suffixes and suffixes[-1] in _COMPRESSED:
        suffixes = suffixes[:-1]
    by_name = _SUFFIXES.get(suffixes[-1]) if suffixes else None
    try:
        with open_bytes(source.path) as f:
            head = f.read(64 << 10)
    except DamagedStream:
        head = b""  # damaged from the first byte: the reader reports it as line 1
    except (OSError, EOFError) as e:
        raise InputError(f"{source.name}: cannot read: {e}") from e
    if head[:4] == b"PAR1":
        return "parquet"
    from .otlp import is_framed

    with open(source.path, "rb") as raw:
        if is_framed(raw.read(8)):  # the Collector's zstd layout: a size prefix, then a frame
            return "otlp"
    if by_name in (None, "jsonl") and _OTLP_FIRST_LINE.match(head):
        return "otlp"
    if by_name:
        return by_name
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return "jsonl" if stripped[:1] in (b"{", b"[") or not stripped else "csv"


def digest_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def read_source(store: Store, source: Source, fmt: str = "auto",
                progress: Progress | None = None, idempotent: bool = False) -> SourceCounts:
    """Normalize one source into ``store`` (one transaction)."""
    try:
        return _read_source(store, source, fmt, progress, idempotent)
    finally:
        if source.name == "<stdin>":
            source.path.unlink(missing_ok=True)


def _read_source(store: Store, source: Source, fmt: str, progress: Progress | None,
                 idempotent: bool) -> SourceCounts:
    fmt = detect_format(source) if fmt == "auto" else fmt
    digest = digest_of(source.path) if idempotent and source.name != "<stdin>" else None
    if fmt == "jsonl":
        chunks = jsonl_chunks(source, progress)
    elif fmt in ("csv", "parquet"):
        chunks = duckdb_chunks(store, source, fmt, progress)
    elif fmt == "otlp":
        from .otlp import otlp_chunks

        chunks = otlp_chunks(source, progress)
    else:
        raise InputError(f"{source.name}: unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    try:
        return store.ingest(source.name, fmt, chunks, digest)
    except _ReadCarefully:  # the transaction was rolled back; nothing of the first try remains
        return store.ingest(source.name, fmt, careful_csv_chunks(store, source, progress), digest)
    except DamagedStream as e:  # OTLP reads whole lines itself: a damaged stream fails the file
        raise InputError(f"{source.name}: {e}; nothing from this file was used; re-copy or "
                         "re-export the file") from e


def jsonl_chunks(source: Source, progress: Progress | None = None,
                 chunk_bytes: int = CHUNK_BYTES) -> Iterator["pa.Table"]:
    """Raw lines of a JSON-lines file in chunks of about ``chunk_bytes``, numbered from 1."""
    import numpy as np
    import pyarrow as pa

    first_line = 1
    carry = b""
    compressed = compression_of(source.path) is not None
    with open_bytes(source.path) as f:
        while True:
            try:
                block = f.read(chunk_bytes)
            except DamagedStream as e:
                if not e.truncated:
                    raise _corrupt(source, first_line, e) from e
                # A cut: the lines before it are kept; the cut line and everything after it
                # count as one quarantined line, so the accounting still adds up.
                yield damage_table(first_line, str(e))
                return
            except (OSError, EOFError) as e:
                raise InputError(
                    f"{source.name}: line {first_line}: the compressed stream is damaged ({e}); "
                    "re-copy or re-export the file") from e
            if progress is not None and not compressed:
                progress(len(block))
            data = carry + block if carry else block
            if not block:
                if data:
                    yield _lines_table(np, pa, data + b"\n", first_line)
                return
            last_nl = data.rfind(b"\n")
            if last_nl < 0:
                carry = data
                continue
            carry = data[last_nl + 1:]
            table = _lines_table(np, pa, data[:last_nl + 1], first_line)
            first_line += table.num_rows
            yield table
            if progress is not None and compressed:
                progress(0)


def _corrupt(source: Source, line: int, e: DamagedStream) -> InputError:
    # Unlike a cut, corruption is found late (a checksum at the end of a member or frame): the
    # lines already decoded may be wrong too, so none of them is trusted as evidence.
    return InputError(f"{source.name}: line {line}: {e}; nothing from this file was used; re-copy "
                      "or re-export the file")


def damage_table(line: int, what: str) -> "pa.Table":
    """One quarantined line standing for a damaged compressed stream from ``line`` on."""
    import pyarrow as pa

    reason = (f"{what}: this line and everything after it are lost, the lines before it are "
              "kept; re-copy or re-export the file")
    return pa.table({"line": pa.array([line], pa.int64()), "pos": pa.array([line], pa.int64()),
                     "raw": pa.array([b""], pa.large_binary()), "bad": pa.array([reason], pa.string())})


def _lines_table(np, pa, data: bytes, first_line: int) -> "pa.Table":
    """Wrap ``data`` (ending in a newline) as one binary value per line, without copying."""
    ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
    offsets = np.empty(len(ends) + 1, np.int64)
    offsets[0] = 0
    offsets[1:] = ends + 1
    raw = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(ends), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    lines = pa.array(np.arange(first_line, first_line + len(ends), dtype=np.int64))
    return pa.table({"line": lines, "pos": lines, "raw": raw, "bad": pa.nulls(len(ends), pa.string())})


def duckdb_chunks(store: Store, source: Source, fmt: str, progress: Progress | None = None,
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
        if params[1] != "none" and not _intact(source.path):
            raise _ReadCarefully()  # DuckDB would stop silently at the cut of a zstd frame
        query = f"SELECT to_json(t)::BLOB AS raw FROM {reader} t"
    else:
        # Parquet says which row each one is: numbering does not depend on the scan's output order.
        query = ("SELECT to_json(struct_pack(*COLUMNS(* EXCLUDE (file_row_number))))::BLOB AS raw, "
                 "file_row_number + 1 AS line FROM read_parquet(?, file_row_number = true)")
        params = [str(source.path)]
        first = 1
    cur = store.con.cursor()
    cur.execute(QUIET)
    try:
        batches = cur.sql(query, params=params).to_arrow_reader(batch_rows)
        line = first
        for batch in batches:
            n = batch.num_rows
            lines = batch.column(1) if batch.num_columns > 1 else pa.array(range(line, line + n), pa.int64())
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
    "LINE SIZE OVER MAXIMUM": "line is longer than the CSV reader's limit; write such events as JSON lines",
}


class _ReadCarefully(Exception):
    """DuckDB's strict CSV reader refused the file; read it again line by line (see careful_csv_chunks)."""


def _intact(path: Path) -> bool:
    """Whether a compressed file decompresses to its end (one pass, nothing kept)."""
    try:
        with open_bytes(path) as f:
            while f.read(CHUNK_BYTES):
                pass
    except DamagedStream:
        return False
    return True


def careful_csv_chunks(store: Store, source: Source, progress: Progress | None = None,
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
    cur = store.con.cursor()
    cur.execute(QUIET)
    try:
        reader = f"read_csv(?, {_CSV_OPTIONS}, ignore_errors = true, max_line_size = {64 << 20}"
        [(good,)] = cur.execute(  # fetchall: the rejects table exists once the result is drained
            f"SELECT count(to_json(t)) FROM {reader}, store_rejects = true, "
            "rejects_table = 'auditor_rejects', rejects_scan = 'auditor_scans') t",
            [str(path)]).fetchall()
        refused = cur.execute(
            "SELECT line, min(error_type) FROM auditor_rejects GROUP BY line ORDER BY line").fetchall()
        numbers = np.setdiff1d(np.arange(2, 2 + good + len(refused), dtype=np.int64),
                               np.array([r[0] for r in refused], np.int64))
        done = 0
        for batch in cur.sql(f"SELECT to_json(t)::BLOB AS raw FROM {reader}) t",
                             params=[str(path)]).to_arrow_reader(batch_rows):
            lines = pa.array(numbers[done:done + batch.num_rows])
            done += batch.num_rows
            yield pa.table({"line": lines, "pos": lines, "raw": batch.column(0),
                            "bad": pa.nulls(batch.num_rows, pa.string())})
    except (duckdb.Error, OSError) as e:
        raise InputError(f"{source.name}: cannot read as csv: {_first_line(e)}; fix the file or "
                         "re-export it") from e
    finally:
        cur.close()
        if spool is not None:
            spool.unlink()
    if refused:
        lines = pa.array([r[0] for r in refused], pa.int64())
        reasons = [_CSV_REJECTS.get(r[1], f"line cannot be read as CSV ({str(r[1]).lower()}); "
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
    with tmp, open_bytes(source.path) as f:
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
