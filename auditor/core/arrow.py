"""Arrow arrays from Python lists and numpy arrays, built from their buffers.

pyarrow imports pandas, when it is installed, at a process's first ``pa.array`` or ``pa.scalar``
(it asks whether the value is a pandas object): a quarter of a second of a small audit's cold
start, in any environment that has pandas (the spark extra, a notebook). The paths a small audit
takes build their arrays here instead; ``tests/core/test_packaging.py`` holds them to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa


def strings(values: list[str | None]) -> "pa.Array":
    """``pa.array(values, pa.string())``."""
    import numpy as np
    import pyarrow as pa

    data = [b"" if v is None else v.encode() for v in values]
    lengths = np.array([len(d) for d in data], np.int64)
    if lengths.sum() >= 1 << 31:  # past 32-bit offsets: pyarrow splits it into chunks
        return pa.array(values, pa.string())
    offsets = np.zeros(len(data) + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.StringArray.from_buffers(len(data), pa.py_buffer(offsets), pa.py_buffer(b"".join(data)),
                                       pa.py_buffer(np.packbits(np.array([v is not None for v in values], bool),
                                                                bitorder="little")))


def int64s(values: "np.ndarray") -> "pa.Array":
    """``pa.array(values)`` of a contiguous int64 ndarray, sharing its memory."""
    import pyarrow as pa

    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def bools(values: "np.ndarray") -> "pa.Array":
    """``pa.array(values)`` of a boolean ndarray."""
    import numpy as np
    import pyarrow as pa

    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(np.packbits(values, bitorder="little"))])


def int64_view(values: "pa.Array | pa.ChunkedArray") -> "np.ndarray":
    """A numpy view of an int64 Arrow array without nulls (``to_numpy`` imports pandas too)."""
    import numpy as np

    if hasattr(values, "combine_chunks"):
        values = values.combine_chunks()
    if values.null_count:
        return values.to_numpy(zero_copy_only=False)
    return np.frombuffer(values.buffers()[1], np.int64, count=len(values), offset=values.offset * 8)
