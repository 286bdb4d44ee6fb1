"""Stages 1-2, read and normalize: find the input files, undo compression, detect the format, and
hand the store chunks of raw lines.

JSON lines are split in bulk (numpy finds the newlines, arrow wraps the bytes without copying) so
no Python code runs per line on the happy path; CSV and Parquet go through DuckDB's own readers and
arrive as one JSON object per row; OTLP JSON is unpacked by ``ingest.otlp``. All of them meet the
same SQL normalizer in ``normalize/normalize.sql``.

The stage is one small module per concern: ``sources`` (discovery, standard input),
``compression`` (gzip, zstd), ``jsonl``, ``readers`` (CSV, Parquet) and ``otlp``; this module
picks the format (``store_feed`` hands the chunks to the store).
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import InputError
from .compression import DamagedStream, compression_of, open_bytes
from .jsonl import CHUNK_BYTES, damage_table, jsonl_chunks
from .readers import careful_csv_chunks, duckdb_chunks
from .formats import COMPRESSED, FORMATS, NAMES, SUFFIXES
from .sources import Source, digest_of, discover

__all__ = ["FORMATS", "NAMES", "InputError", "DamagedStream", "Source", "discover", "detect_format",
           "compression_of", "open_bytes", "jsonl_chunks", "duckdb_chunks",
           "careful_csv_chunks", "damage_table", "digest_of", "CHUNK_BYTES"]


def detect_format(source: Source) -> str:
    """The format of ``source`` (``formats.FORMATS``): from its name, unless its content is
    unmistakably another format's (a Parquet magic, an OTLP export request); from its content
    when the name says nothing."""
    suffixes = [s.lower() for s in Path(source.name).suffixes[-2:]] if source.name != "<stdin>" else []
    if suffixes and suffixes[-1] in COMPRESSED:
        suffixes = suffixes[:-1]
    by_name = SUFFIXES.get(suffixes[-1]) if suffixes else None
    try:
        with open_bytes(source.path, source.limits, source.name) as f:
            head = f.read(64 << 10)
    except DamagedStream:
        head = b""  # damaged from the first byte: the reader reports it as line 1
    except (OSError, EOFError) as e:
        raise InputError(f"{source.name}: cannot read: {e}") from e
    with open(source.path, "rb") as raw:
        first = raw.read(8)
    for fmt in FORMATS:
        if (fmt.raw is not None and fmt.raw(first)) or (fmt.overrides and fmt.claims(by_name) and fmt.sniff(head)):
            return fmt.name
    if by_name:
        return by_name
    if source.name != "<stdin>":
        # SPEC rev 3.1: a file whose suffix names no format is JSONL or logfmt by its first line,
        # never CSV (a three-line logfmt .txt lost its first line as a header); standard input,
        # which has no name at all, still falls back to CSV when its head is not JSON
        return "jsonl"
    return next(fmt.name for fmt in FORMATS if fmt.sniff(head))


