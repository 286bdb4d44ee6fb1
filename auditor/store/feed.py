"""Stage 3's door in: every input source read (stage 1) into the store, which normalizes its lines
(stage 2) and appends them, one transaction per big file and one per batch of small files.

The readers (``ingest``) hand over chunks of raw lines and know nothing of the store; this module
picks the reader for a source's format, feeds the store, and reads a CSV file again, carefully,
when DuckDB's reader cannot be trusted with it.
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb

from ..core.errors import InputError, StoreError
from ..ingest import detect_format
from ..ingest.compression import DamagedStream
from ..ingest.formats import BY_NAME, NAMES
from ..ingest.jsonl import read_ahead
from ..ingest.readers import _ReadCarefully, careful_csv_chunks
from ..ingest.sources import Progress, Source, digest_of
from . import SourceCounts, Store

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
    """Normalize one source into ``store`` (one transaction). Should DuckDB run out of memory,
    the transaction is rolled back and the source read again under a higher limit
    (``Store.more_memory``)."""
    try:
        while True:
            try:
                return _read_once(store, source, fmt, progress, idempotent)
            except StoreError as e:
                if not isinstance(e.__cause__, duckdb.OutOfMemoryException) or not store.more_memory():
                    raise
    finally:
        if source.spooled:
            source.path.unlink(missing_ok=True)


def _read_once(store: Store, source: Source, fmt: str, progress: Progress | None,
               idempotent: bool) -> SourceCounts:
    fmt, chunks, digest = _open_source(store, source, fmt, progress, idempotent)
    try:
        return store.ingest(source.name, fmt, chunks, digest)
    except _ReadCarefully:  # the transaction was rolled back; nothing of the first try remains
        return store.ingest(source.name, fmt, careful_csv_chunks(store.con, source, progress), digest)
    except DamagedStream as e:
        raise _damaged(source, e) from e
    finally:  # should the store stop early, read_ahead's thread stops and closes the file now
        getattr(chunks, "close", lambda: None)()


def _read_small(store: Store, source: Source, fmt: str, progress: Progress | None,
                idempotent: bool) -> tuple[str, str, list, str | None]:
    """``(name, fmt, chunks, digest)`` of a small file, its chunks read into memory."""
    fmt, chunks, digest = _open_source(store, source, fmt, progress, idempotent)
    try:
        return source.name, fmt, list(chunks), digest
    except _ReadCarefully:
        return source.name, fmt, list(careful_csv_chunks(store.con, source, progress)), digest
    except DamagedStream as e:
        raise _damaged(source, e) from e


def _open_source(store: Store, source: Source, fmt: str, progress: Progress | None,
                 idempotent: bool) -> tuple[str, Iterator, str | None]:
    fmt = detect_format(source) if fmt == "auto" else fmt
    digest = digest_of(source.path) if idempotent and not source.spooled else None
    reader = BY_NAME.get(fmt)
    if reader is None:
        raise InputError(f"{source.name}: unknown format {fmt!r}; use one of {', '.join(NAMES)}")
    chunks = reader.read(source, store.con, progress, store.vocabulary.shaped)
    if reader.read_ahead and (source.spooled or source.size > SMALL_FILE):  # a small file is read whole
        chunks = read_ahead(chunks)
    return fmt, chunks, digest


def _damaged(source: Source, e: DamagedStream) -> InputError:
    # OTLP reads whole lines itself: a damaged stream fails the file
    return InputError(f"{source.name}: {e}; nothing from this file was used; re-copy or re-export the file")
