"""The input formats, declared once: each one's name, file suffixes, how its content is recognised
and how it is read into chunks of raw lines.

Format detection (``ingest.detect_format``), directory discovery (``sources``), the store's guard
against an input given as ``--db``, the ``--format`` option and the store's feed all read this
registry; a new format is one entry here (and its reader).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

    from .contract import Progress, Source


@dataclass(frozen=True, slots=True)
class Format:
    """One input format: ``name`` (what ``--format`` takes), ``suffixes`` (lower case, with the dot:
    a file so named is read in this format), ``sniff`` (does this head of the decompressed content
    look like it?), ``read`` (the chunks of raw lines of a source: a function of the source, the
    store's DuckDB connection, the progress callback and ``shaped``: whether the store's
    vocabulary reads logs as teams write them, which only OTLP log records depend on), ``overrides`` (the formats, by name, whose
    file name the content overrides: ``("*",)`` all of them, ``()`` none: only a file without a
    known suffix is sniffed), ``raw`` (a test of the file's first 8 bytes, compressed or not) and
    ``read_ahead`` (a big file's next chunk is read in a thread while the store takes this one)."""

    name: str
    suffixes: tuple[str, ...]
    sniff: Callable[[bytes], bool]
    read: Callable[["Source", "duckdb.DuckDBPyConnection", "Progress | None", bool], Iterator[Any]]
    overrides: tuple[str, ...] = ()
    raw: Callable[[bytes], bool] | None = None
    read_ahead: bool = False

    def claims(self, by_name: str | None) -> bool:
        """Whether this format's content test decides over a file named as ``by_name``."""
        return by_name is None or "*" in self.overrides or by_name in self.overrides


#: The Collector's file exporter writes one export request per line, ``{"resourceSpans": ...`` or
#: ``{"resourceLogs": ...``. Only the first line decides: canonical events may well mention them
#: in their attrs.
_OTLP_FIRST_LINE = re.compile(rb'(?:\xef\xbb\xbf)?\s*\{\s*"resource(?:Spans|Logs)"\s*:')


def _read_jsonl(source: "Source", con: "duckdb.DuckDBPyConnection", progress: "Progress | None",
                shaped: bool = False) -> Iterator[Any]:
    from .jsonl import jsonl_chunks

    return jsonl_chunks(source, progress)


def _read_csv(source: "Source", con: "duckdb.DuckDBPyConnection", progress: "Progress | None",
              shaped: bool = False) -> Iterator[Any]:
    from .readers import duckdb_chunks

    return duckdb_chunks(con, source, "csv", progress)


def _read_parquet(source: "Source", con: "duckdb.DuckDBPyConnection", progress: "Progress | None",
                  shaped: bool = False) -> Iterator[Any]:
    from .readers import duckdb_chunks

    return duckdb_chunks(con, source, "parquet", progress)


def _read_otlp(source: "Source", con: "duckdb.DuckDBPyConnection", progress: "Progress | None",
               shaped: bool = False) -> Iterator[Any]:
    from .otlp import otlp_chunks

    return otlp_chunks(source, progress, shaped=shaped)


def _read_logfmt(source: "Source", con: "duckdb.DuckDBPyConnection", progress: "Progress | None",
                 shaped: bool = False) -> Iterator[Any]:
    from .logfmt import logfmt_chunks

    return logfmt_chunks(source, progress)


def _is_logfmt(head: bytes) -> bool:
    from .logfmt import looks_like_logfmt

    return looks_like_logfmt(head)


def _is_framed(first: bytes) -> bool:
    from .otlp import is_framed

    return is_framed(first)


def _is_parquet(head: bytes) -> bool:
    return head[:4] == b"PAR1"


def _is_otlp(head: bytes) -> bool:
    return bool(_OTLP_FIRST_LINE.match(head))


def _is_jsonl(head: bytes) -> bool:
    stripped = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return stripped[:1] in (b"{", b"[") or not stripped


#: As ``--format`` lists them, which is also the order content is tested in: first the formats whose
#: content overrides a file's name (a Parquet magic, logfmt lines, an OTLP export request), then, for a file whose
#: name says nothing, the others (the first that recognises the head wins; CSV takes the rest).
FORMATS: tuple[Format, ...] = (
    Format("jsonl", (".jsonl", ".ndjson", ".json", ".log"), _is_jsonl, _read_jsonl, read_ahead=True),
    Format("csv", (".csv",), lambda head: True, _read_csv),
    Format("parquet", (".parquet", ".pq"), _is_parquet, _read_parquet, overrides=("*",)),
    # key=value lines: a .log (or .jsonl) file whose first lines are logfmt is read as logfmt
    Format("logfmt", (".logfmt",), _is_logfmt, _read_logfmt, overrides=("jsonl",), read_ahead=True),
    # the Collector's zstd layout is recognised by its size prefix, before any decompression
    Format("otlp", (), _is_otlp, _read_otlp, overrides=("jsonl",), raw=_is_framed),
)
BY_NAME: dict[str, Format] = {f.name: f for f in FORMATS}
#: What ``--format`` takes: ``auto`` (by name, then content) and every format.
NAMES: tuple[str, ...] = ("auto",) + tuple(f.name for f in FORMATS)
#: File suffix -> format name.
SUFFIXES: dict[str, str] = {s: f.name for f in FORMATS for s in f.suffixes}
#: Compression suffixes, undone before the format's own suffix is read.
COMPRESSED: dict[str, str] = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}
