"""Stages 1-2, read and normalize: find the input files, undo compression, detect the format, and
hand the store chunks of raw lines.

JSON lines are split in bulk (numpy finds the newlines, arrow wraps the bytes without copying) so
no Python code runs per line on the happy path; CSV and Parquet go through DuckDB's own readers and
arrive as one JSON object per row; OTLP JSON is unpacked by ``ingest.otlp``. All of them meet the
same SQL normalizer in ``store.sql``.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

import duckdb

from ..store import SourceCounts, Store

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS = ("auto", "jsonl", "csv", "parquet", "otlp")
CHUNK_BYTES = 32 << 20
_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".log": "jsonl",
             ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_COMPRESSED = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}

Progress = Callable[[int], None]  # called with the number of input bytes just consumed


class InputError(Exception):
    """An input path cannot be read at all (missing, unreadable, unknown format, corrupt archive)."""


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
            found = sorted(f for f in path.rglob("*") if f.is_file() and _supported(f))
            out.extend(Source(str(f), f, f.stat().st_size) for f in found)
        elif path.is_file():
            out.append(Source(str(path), path, path.stat().st_size))
        elif path.exists():
            raise InputError(f"{path}: not a regular file or directory")
        else:
            raise InputError(f"{path}: no such file or directory; check the path")
    return out


def _supported(path: Path) -> bool:
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if suffixes and suffixes[-1] in _COMPRESSED:
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in _SUFFIXES


def _spool_stdin() -> Source:
    tmp = tempfile.NamedTemporaryFile(prefix="auditor-stdin-", delete=False)
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
    """A binary stream of the file's content, decompressed when it is gzip or zstd."""
    kind = compression_of(path)
    if kind == "gzip":
        return gzip.open(path, "rb")
    if kind == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True)
    return open(path, "rb")


def detect_format(source: Source) -> str:
    """Guess the format from the name, else from the first bytes of the content."""
    suffixes = [s.lower() for s in source.path.suffixes[-2:]] if source.name != "<stdin>" else []
    if suffixes and suffixes[-1] in _COMPRESSED:
        suffixes = suffixes[:-1]
    by_name = _SUFFIXES.get(suffixes[-1]) if suffixes else None
    try:
        with open_bytes(source.path) as f:
            head = f.read(64 << 10)
    except (OSError, EOFError) as e:
        raise InputError(f"{source.name}: cannot read: {e}") from e
    if head[:4] == b"PAR1":
        return "parquet"
    if by_name in (None, "jsonl") and b'"resourceSpans"' in head[:4096]:
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
    return store.ingest(source.name, fmt, chunks, digest)


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
        reader = ("read_csv(?, all_varchar = true, header = true, null_padding = true, "
                  "strict_mode = false, compression = ?)")
        params = [str(source.path), compression_of(source.path) or "none"]
        first = 2
    else:
        reader = "read_parquet(?)"
        params = [str(source.path)]
        first = 1
    cur = store.con.cursor()
    try:
        batches = cur.sql(f"SELECT to_json(t)::BLOB AS raw FROM {reader} t",
                          params=params).to_arrow_reader(batch_rows)
        line = first
        for batch in batches:
            n = batch.num_rows
            lines = pa.array(range(line, line + n), pa.int64())
            yield pa.table({"line": lines, "pos": lines, "raw": batch.column(0),
                            "bad": pa.nulls(n, pa.string())})
            line += n
    except duckdb.Error as e:
        raise InputError(f"{source.name}: cannot read as {fmt}: {_first_line(e)}") from e
    finally:
        cur.close()
    if progress is not None:
        progress(source.size)


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
