"""Stages 1-2, read and normalize: find the input files, undo compression, detect the format, and
hand the store chunks of raw lines.

JSON lines are split in bulk (numpy finds the newlines, arrow wraps the bytes without copying) so
no Python code runs per line on the happy path; CSV and Parquet go through DuckDB's own readers and
arrive as one JSON object per row; OTLP JSON is unpacked by ``ingest.otlp``. All of them meet the
same SQL normalizer in ``store.sql``.

The stage is one small module per concern: ``sources`` (discovery, standard input),
``compression`` (gzip, zstd), ``jsonl``, ``readers`` (CSV, Parquet) and ``otlp``; this module
picks the format and hands the chunks to the store.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import InputError, StoreError
from ..store import SourceCounts, Store
from .compression import DamagedStream, compression_of, open_bytes
from .jsonl import CHUNK_BYTES, damage_table, jsonl_chunks, read_ahead
from .readers import _ReadCarefully, careful_csv_chunks, duckdb_chunks
from .sources import Progress, _COMPRESSED, _SUFFIXES, Source, digest_of, discover

__all__ = ["FORMATS", "InputError", "DamagedStream", "Source", "discover", "detect_format",
           "read_source", "read_sources", "compression_of", "open_bytes", "jsonl_chunks", "duckdb_chunks",
           "careful_csv_chunks", "damage_table", "digest_of", "CHUNK_BYTES"]

FORMATS = ("auto", "jsonl", "csv", "parquet", "otlp")
#: The Collector's file exporter writes one export request per line, ``{"resourceSpans": ...`` or
#: ``{"resourceLogs": ...``. Only the first line decides: canonical events may well mention them
#: in their attrs.
_OTLP_FIRST_LINE = re.compile(rb'(?:\xef\xbb\xbf)?\s*\{\s*"resource(?:Spans|Logs)"\s*:')



def detect_format(source: Source) -> str:
    """Guess the format from the name, else from the first bytes of the content."""
    suffixes = [s.lower() for s in Path(source.name).suffixes[-2:]] if source.name != "<stdin>" else []
    if suffixes and suffixes[-1] in _COMPRESSED:
        suffixes = suffixes[:-1]
    by_name = _SUFFIXES.get(suffixes[-1]) if suffixes else None
    try:
        with open_bytes(source.path, source.limits, source.name) as f:
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


#: A file this small (on disk) is read into memory and ingested with its neighbours, in batches
#: of up to BATCH_BYTES of lines or BATCH_FILES files, one transaction each (Store.ingest_many).
SMALL_FILE = 1 << 20
BATCH_BYTES = 32 << 20
BATCH_FILES = 2000


def read_sources(store: Store, sources: list[Source], fmt: str = "auto",
                 progress: Progress | None = None, idempotent: bool = False) -> list[SourceCounts]:
    """Normalize every source into ``store``, in order; returns one ``SourceCounts`` per source.

    A big file (or a stream) is one transaction; small files go in batches. Either way, when a
    file cannot be read, the files before it are in the store and the error is raised.
    """
    out: list[SourceCounts] = []
    batch: list[tuple[str, str, list, str | None]] = []
    held = 0

    def flush() -> None:
        nonlocal held
        if batch:
            try:
                out.extend(store.ingest_many(batch))
            except StoreError:  # one file the batch cannot take: find it, file by file
                out.extend(store.ingest(*item) for item in batch)
            batch.clear()
        held = 0

    for src in sources:
        if src.spooled or src.size > SMALL_FILE:
            flush()
            out.append(read_source(store, src, fmt, progress, idempotent))
            continue
        try:
            item = _read_small(store, src, fmt, progress, idempotent)
        except BaseException:
            flush()
            raise
        batch.append(item)
        held += sum(t.nbytes for t in item[2])
        if held > BATCH_BYTES or len(batch) >= BATCH_FILES:
            flush()
    flush()
    return out


def read_source(store: Store, source: Source, fmt: str = "auto",
                progress: Progress | None = None, idempotent: bool = False) -> SourceCounts:
    """Normalize one source into ``store`` (one transaction)."""
    try:
        fmt, chunks, digest = _open_source(store, source, fmt, progress, idempotent)
        try:
            return store.ingest(source.name, fmt, chunks, digest)
        except _ReadCarefully:  # the transaction was rolled back; nothing of the first try remains
            return store.ingest(source.name, fmt, careful_csv_chunks(store, source, progress), digest)
        except DamagedStream as e:
            raise _damaged(source, e) from e
        finally:  # should the store stop early, read_ahead's thread stops and closes the file now
            getattr(chunks, "close", lambda: None)()
    finally:
        if source.spooled:
            source.path.unlink(missing_ok=True)


def _read_small(store: Store, source: Source, fmt: str, progress: Progress | None,
                idempotent: bool) -> tuple[str, str, list, str | None]:
    """``(name, fmt, chunks, digest)`` of a small file, its chunks read into memory."""
    fmt, chunks, digest = _open_source(store, source, fmt, progress, idempotent)
    try:
        return source.name, fmt, list(chunks), digest
    except _ReadCarefully:
        return source.name, fmt, list(careful_csv_chunks(store, source, progress)), digest
    except DamagedStream as e:
        raise _damaged(source, e) from e


def _open_source(store: Store, source: Source, fmt: str, progress: Progress | None,
                 idempotent: bool) -> tuple[str, Iterator, str | None]:
    fmt = detect_format(source) if fmt == "auto" else fmt
    digest = digest_of(source.path) if idempotent and not source.spooled else None
    if fmt == "jsonl":
        chunks = jsonl_chunks(source, progress)
        if source.spooled or source.size > SMALL_FILE:  # a small file is read whole: no thread
            chunks = read_ahead(chunks)
    elif fmt in ("csv", "parquet"):
        chunks = duckdb_chunks(store, source, fmt, progress)
    elif fmt == "otlp":
        from .otlp import otlp_chunks

        chunks = otlp_chunks(source, progress)
    else:
        raise InputError(f"{source.name}: unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    return fmt, chunks, digest


def _damaged(source: Source, e: DamagedStream) -> InputError:
    # OTLP reads whole lines itself: a damaged stream fails the file
    return InputError(f"{source.name}: {e}; nothing from this file was used; re-copy or re-export the file")
