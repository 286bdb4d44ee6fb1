"""Stages 1-2, read and normalize: find the input files, undo compression, detect the format, and
hand the store chunks of raw lines.

JSON lines are split in bulk (numpy finds the newlines, arrow wraps the bytes without copying) so
no Python code runs per line on the happy path; CSV and Parquet go through DuckDB's own readers and
arrive as one JSON object per row; OTLP JSON is unpacked by ``ingest.otlp``. All of them meet the
same SQL normalizer in ``store.sql``.

The stage is one small module per concern: ``sources`` (discovery, standard input),
``compression`` (gzip, zstd), ``jsonl``, ``readers`` (CSV, Parquet) and ``otlp``; this module
picks the format (``store_feed`` hands the chunks to the store).
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import InputError
from .compression import DamagedStream, compression_of, open_bytes
from .jsonl import CHUNK_BYTES, damage_table, jsonl_chunks
from .readers import careful_csv_chunks, duckdb_chunks
from .sources import _COMPRESSED, _SUFFIXES, Source, digest_of, discover

__all__ = ["FORMATS", "InputError", "DamagedStream", "Source", "discover", "detect_format",
           "compression_of", "open_bytes", "jsonl_chunks", "duckdb_chunks",
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


