"""Stage 1-2, read JSON lines: split in bulk into chunks of raw lines for the store's normalizer.

numpy finds the newlines and arrow wraps the bytes without copying, so no Python code runs per
line on the happy path. A compressed stream cut short keeps the lines before the cut and counts
the rest as one quarantined line; a corrupt one fails the file.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..errors import InputError
from .compression import DamagedStream, compression_of, open_bytes
from .sources import Progress, Source

if TYPE_CHECKING:
    import pyarrow as pa

CHUNK_BYTES = 32 << 20


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
