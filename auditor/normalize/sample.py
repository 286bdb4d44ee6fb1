"""The first lines of a log as members, for ``auditor map`` (``suggest``): read with the same
readers an audit uses (formats, compression, logfmt, CSV, Parquet, OTLP log records), stopped
after ``limit`` lines, each line kept as its members and its leaves (``lease.token`` for
``{"lease": {"token": 7}}`` and for a flat ``"lease.token"`` alike).
"""

from __future__ import annotations

import csv
import io
import itertools
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import InputError
from ..core.limits import Limits
from ..ingest import detect_format, discover, open_bytes
from ..ingest.logfmt import LogfmtError
from ..ingest.logfmt import parse as parse_logfmt
from ..ingest.sources import Source
from .values import Rejected
from .jsonline import parse_line

#: How many lines ``auditor map`` reads by default (SPEC section 2).
SAMPLE_LINES = 100_000


@dataclass(slots=True)
class Line:
    """One line of the sample: where it is, its members (for the normalizer) and its leaves
    (dotted path as written -> value; an object is walked, a list is one leaf)."""

    file: str
    line: int
    members: list[tuple[str, Any]]
    leaves: dict[str, Any]


@dataclass
class Sample:
    lines: list[Line] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    formats: dict[str, str] = field(default_factory=dict)
    unreadable: int = 0      # lines that are no record (not JSON, not logfmt)
    first_unreadable: str | None = None


def as_int(v: Any) -> int | None:
    """An integer as a log writes one: a JSON integer, a decimal string or a ``0x`` hexadecimal
    string (a ZooKeeper zxid); None for anything else."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if not isinstance(v, str):
        return None
    text = v.strip()
    try:
        if text[:2].lower() == "0x" and len(text) > 2:
            return int(text[2:], 16)
        if text.lstrip("+-").isdigit() and text.isascii():
            return int(text)
    except ValueError:
        return None
    return None


def leaves(members: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """Every leaf of a record by its dotted path (the first of duplicate members)."""
    out: dict[str, Any] = {}
    stack = [("", members)]
    while stack:
        prefix, items = stack.pop()
        for name, value in items:
            path = f"{prefix}.{name}" if prefix else str(name)
            if isinstance(value, dict):
                inner = getattr(value, "members", None)
                stack.append((path, inner if inner is not None else list(value.items())))
            else:
                out.setdefault(path, value)
    return out


def read_sample(paths: Iterable[str | os.PathLike], limit: int = SAMPLE_LINES, fmt: str = "auto",
                limits: Limits | None = None, progress: Callable[[int], None] | None = None) -> Sample:
    """The first ``limit`` lines of ``paths`` (files in the order given, directories expanded);
    ``InputError`` when a path cannot be read or holds nothing to read. ``progress`` is called
    with the number of lines just read (every 10,000)."""
    limits = limits or Limits.from_env()
    sample = Sample()
    for source in discover(paths, limits):
        if len(sample.lines) >= limit:
            break
        fmt_of = detect_format(source) if fmt == "auto" else fmt
        sample.files.append(source.name)
        sample.formats[source.name] = fmt_of
        try:
            for n, members in itertools.islice(_records(source, fmt_of, sample), limit - len(sample.lines)):
                sample.lines.append(Line(source.name, n, members, leaves(members)))
                if progress is not None and len(sample.lines) % 10_000 == 0:
                    progress(10_000)
        except (OSError, EOFError, UnicodeDecodeError, ValueError) as e:
            raise InputError(f"{source.name}: cannot read: {e}") from e
        finally:
            if source.spooled:
                source.path.unlink(missing_ok=True)
    if not sample.lines:
        first = f" (first: {sample.first_unreadable})" if sample.first_unreadable else ""
        raise InputError(f"no record found in {', '.join(sample.files) or 'the input'}{first}; check the path "
                         "and the format")
    return sample


def _records(source: Source, fmt: str, sample: Sample) -> Iterator[tuple[int, list[tuple[str, Any]]]]:
    if fmt == "csv":
        yield from _csv(source)
    elif fmt == "parquet":
        yield from _parquet(source)
    elif fmt == "otlp":
        from ..ingest.otlp import read_otlp

        for n, rec, _bad in read_otlp(source.path, source.name, source.limits, shaped=True):
            if rec is not None:
                yield n, list(rec.items())
    else:
        yield from _lines(source, fmt, sample)


def _lines(source: Source, fmt: str, sample: Sample) -> Iterator[tuple[int, list[tuple[str, Any]]]]:
    """Numbered as the store numbers them (newlines), a line over the limit skipped unread."""
    limit = source.limits.max_line_bytes
    with open_bytes(source.path, source.limits, source.name) as f:
        n = 0
        while raw := f.readline(limit + 1):
            n += 1
            if len(raw) > limit and not raw.endswith(b"\n"):
                while (rest := f.readline(1 << 20)) and not rest.endswith(b"\n"):
                    pass
                continue
            text = raw.decode("utf-8", "replace").strip().lstrip("\ufeff")
            if not text:
                continue
            try:
                members = parse_logfmt(text) if fmt == "logfmt" else _json_members(text)
            except (Rejected, LogfmtError) as e:
                sample.unreadable += 1
                if sample.first_unreadable is None:
                    sample.first_unreadable = f"{source.name}:{n}: {e}"
                continue
            yield n, members


def _json_members(text: str) -> list[tuple[str, Any]]:
    """A JSON line's members, by orjson (a sample need not keep duplicate members: the audit
    does); the careful reader for what orjson refuses (NaN, numbers beyond a double)."""
    import orjson

    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:
        return parse_line(text)
    if not isinstance(doc, dict):
        raise Rejected("line is JSON but not an object")
    return list(doc.items())


def _csv(source: Source) -> Iterator[tuple[int, list[tuple[str, Any]]]]:
    with open_bytes(source.path, source.limits, source.name) as f:
        rows = csv.reader(io.TextIOWrapper(f, encoding="utf-8", errors="replace", newline=""))
        header = next(rows, None)
        if header is None:
            return
        for n, row in enumerate(rows, 2):
            members = [(k, v) for k, v in zip(header, row) if v != ""]
            if members:
                yield n, members


def _parquet(source: Source) -> Iterator[tuple[int, list[tuple[str, Any]]]]:
    import pyarrow.parquet as pq

    n = 0
    for batch in pq.ParquetFile(source.path).iter_batches(batch_size=8192):
        for row in batch.to_pylist():
            n += 1
            yield n, [(k, v) for k, v in row.items() if v is not None]
