"""Stage 1-2, read JSON lines: split in bulk into chunks of raw lines for the store's normalizer.

numpy finds the newlines and arrow wraps the bytes without copying, so no Python code runs per
line on the happy path. A compressed stream cut short keeps the lines before the cut and counts
the rest as one quarantined line; a corrupt one fails the file.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

from ..core.arrow import bools, int64s
from ..core.errors import InputError
from .compression import DamagedStream, compression_of, open_bytes
from .contract import Progress, Source

if TYPE_CHECKING:
    import pyarrow as pa

CHUNK_BYTES = 32 << 20


def jsonl_chunks(source: Source, progress: Progress | None = None, chunk_bytes: int = CHUNK_BYTES,
                 span: tuple[int, int, int] | None = None) -> Iterator["pa.Table"]:
    """Raw lines of a JSON-lines file in chunks of about ``chunk_bytes``, numbered from 1; or,
    given ``span = (start, end, first_line)`` (an uncompressed file, ``start`` and ``end`` at
    line starts), the lines of those bytes only, the first numbered ``first_line``: one piece of
    a file split for several readers (the Spark engine), numbered as the whole file is.

    A line longer than ``source.limits.max_line_bytes`` is quarantined with a reason that names
    the limit, and only ever held up to that size: the bytes past it are read and dropped, so a
    gigabyte without a newline costs the limit, not the gigabyte. A line over ``BIG_LINE`` comes
    in a chunk of its own, so that DuckDB never parses two of them at once.
    """
    import numpy as np
    import pyarrow as pa

    max_line = source.limits.max_line_bytes
    first_line = 1 if span is None else span[2]
    carry = b""
    skipping = False  # inside a line already longer than max_line: drop bytes up to its newline
    compressed = compression_of(source.path) is not None
    with open_bytes(source.path, source.limits, source.name) if span is None else open(source.path, "rb") as f:
        left = None if span is None else span[1] - f.seek(span[0])
        while True:
            try:
                block = f.read(chunk_bytes if left is None else min(chunk_bytes, left))
                if left is not None:
                    left -= len(block)
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
            if skipping:
                nl = block.find(b"\n")
                if nl < 0 and block:
                    continue
                yield too_long_table(first_line, max_line)
                first_line, skipping = first_line + 1, False
                block = block[nl + 1:] if block else block
                if not block:
                    if nl < 0:
                        return
                    continue
            data = carry + block if carry else block
            if not block:
                if data:
                    yield from _split(np, pa, data + b"\n", len(data) + 1, first_line, max_line)
                return
            last_nl = data.rfind(b"\n")
            carry = data[last_nl + 1:]
            if last_nl >= 0:  # the lines up to it are split in place: data is not copied again
                first_line += yield from _split(np, pa, data, last_nl + 1, first_line, max_line)
            if len(carry) > max_line:
                carry, skipping = b"", True
            if progress is not None and compressed:
                progress(0)


def read_ahead(chunks: Iterator["pa.Table"]) -> Iterator["pa.Table"]:
    """``chunks``, the next one read in a thread while the caller works on the current one.

    Reading a chunk (the file, gzip or zstd, numpy's newlines) runs while DuckDB stages and
    appends the one before: those hold a core each only part of the time (binding the stage,
    finishing row groups). An error reading comes out where the chunk would have; when the
    caller stops early, the reader stops after the chunk it is on and closes the file.
    """
    import queue
    import threading

    done = object()
    ready: queue.Queue = queue.Queue(maxsize=1)
    stop = threading.Event()

    def read() -> None:
        try:
            for chunk in chunks:
                while not stop.is_set():
                    try:
                        ready.put((chunk, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            ready.put((done, None))
        except BaseException as e:  # noqa: BLE001 - handed to the caller, raised there
            ready.put((done, e))
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    reader = threading.Thread(target=read, name="auditor-read-ahead", daemon=True)
    reader.start()
    try:
        while True:
            chunk, error = ready.get()
            if error is not None:
                raise error
            if chunk is done:
                return
            yield chunk
    finally:
        stop.set()
        while reader.is_alive():  # let a reader blocked on a full queue see the stop
            try:
                ready.get_nowait()
            except queue.Empty:
                pass
            reader.join(0.05)


#: A line at least this long is staged on its own (see jsonl_chunks).
BIG_LINE = 1 << 20


def too_long_reason(max_line: int) -> str:
    from ..core.limits import how_to_raise

    return (f"line is longer than {max_line:,} bytes, the limit on one line; write large payloads "
            f"elsewhere and reference them, or {how_to_raise('max_line_bytes')}")


def too_long_table(line: int, max_line: int) -> "pa.Table":
    """One quarantined line standing for a line longer than the limit (its bytes are not kept)."""
    return _reason_table(line, too_long_reason(max_line))


def _corrupt(source: Source, line: int, e: DamagedStream) -> InputError:
    # Unlike a cut, corruption is found late (a checksum at the end of a member or frame): the
    # lines already decoded may be wrong too, so none of them is trusted as evidence.
    return InputError(f"{source.name}: line {line}: {e}; nothing from this file was used; re-copy "
                      "or re-export the file")


def damage_table(line: int, what: str) -> "pa.Table":
    """One quarantined line standing for a damaged compressed stream from ``line`` on."""
    reason = (f"{what}: this line and everything after it are lost, the lines before it are "
              "kept; re-copy or re-export the file")
    return _reason_table(line, reason)


def _reason_table(line: int, reason: str) -> "pa.Table":
    import pyarrow as pa

    return pa.table({"line": pa.array([line], pa.int64()), "pos": pa.array([line], pa.int64()),
                     "raw": pa.array([b""], pa.large_binary()), "bad": pa.array([reason], pa.string())})


def _lines_table(np, pa, data: bytes, ends, first_line: int) -> "pa.Table":
    """Wrap the lines of ``data`` ending at ``ends`` (the newlines' offsets) as one binary value
    per line, without copying."""
    offsets = np.empty(len(ends) + 1, np.int64)
    offsets[0] = 0
    offsets[1:] = ends + 1
    raw = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(ends), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    lines = int64s(np.arange(first_line, first_line + len(ends), dtype=np.int64))  # not pa.array: see arrow.py
    return pa.table({"line": lines, "pos": lines, "raw": raw, "bad": pa.nulls(len(ends), pa.string())})


def _split(np, pa, data: bytes, end: int, first_line: int, max_line: int) -> Generator["pa.Table", None, int]:
    """The lines of ``data[:end]`` (``end`` just past a newline) as tables: runs of ordinary lines,
    each big line alone, and each line over ``max_line`` as its quarantine row; returns how many
    lines that was. Empty lines carry nothing and are left out here.

    The newlines are found in one numpy pass. Where lines are denser than any event can be (mostly
    newlines: a file of blank lines, a newline bomb), ``data`` is taken in slices of
    ``DENSE_SLICE`` so the per-line arrays stay small.
    """
    newline = np.frombuffer(data, np.uint8, count=end) == 10
    lines = int(np.count_nonzero(newline))
    if lines <= end // 16:
        yield from _split_slice(np, pa, data, np.flatnonzero(newline), first_line, max_line)
        return lines
    del newline
    start = 0
    while start < end:
        stop = data.rfind(b"\n", start, min(start + DENSE_SLICE, end)) + 1 or data.find(b"\n", start, end) + 1
        piece = data[start:stop]
        view = np.frombuffer(piece, np.uint8)
        if ((view != 10) & (view != 13)).any():  # else: nothing but CR and LF, no line to stage
            yield from _split_slice(np, pa, piece, np.flatnonzero(view == 10), first_line, max_line)
        first_line += piece.count(b"\n")
        start = stop
    return lines


#: See _split.
DENSE_SLICE = 2 << 20


def _split_slice(np, pa, data: bytes, ends, first_line: int, max_line: int) -> Iterator["pa.Table"]:
    table = _lines_table(np, pa, data, ends, first_line)
    offsets = np.frombuffer(table.column("raw").chunks[0].buffers()[1], np.int64)[:table.num_rows + 1]
    lengths = np.diff(offsets)
    buf = np.frombuffer(data, np.uint8)
    empty = (lengths == 1) | ((lengths == 2) & (buf[offsets[:-1]] == 13))
    big = np.flatnonzero(lengths > min(BIG_LINE, max_line + 1))  # lengths count the newline
    if not big.size:
        kept = table.filter(bools(~empty)) if empty.any() else table
        if kept.num_rows:
            yield kept
        return
    start = 0
    for i in big.tolist():
        if i > start:
            yield table.slice(start, i - start)
        if lengths[i] - 1 > max_line:
            yield too_long_table(first_line + i, max_line)
        else:
            yield table.slice(i, 1)
        start = i + 1
    if start < table.num_rows:
        yield table.slice(start)
