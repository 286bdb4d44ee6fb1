"""Where each CSV row starts in the file: physical line numbers for quarantine reasons.

DuckDB's CSV reader hands rows over in order but does not say on which line each began. Rows
are one line each unless a quoted cell holds a newline, and DuckDB skips empty lines: after
either, "row n is line n + 1" points the operator at the wrong line. ``record_lines`` finds the
starting line of every row the way the reader splits them (a newline inside double quotes stays
in its cell; an empty line is no row; a quote still open at the end of the file was a stray quote,
so its row ends at its own line), in one pass over the bytes, and only for files that need it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .compression import open_bytes

if TYPE_CHECKING:
    import numpy as np

    from .contract import Source

_BLOCK = 1 << 20


def record_lines(source: "Source") -> "np.ndarray | None":
    """The starting line of each row after the header (an int64 array), or None when every row
    is one line and no empty line is skipped (row ``n`` is line ``n + 1``)."""
    import numpy as np

    if not _needs_mapping(source):
        return None
    parities, empties = [], []
    with open_bytes(source.path, source.limits, source.name) as f:
        for line in f:  # physical lines, in C
            parities.append(line.count(b'"') & 1)
            empties.append(not line.strip(b"\r\n"))
    odd = np.array(parities, dtype=bool)
    empty = np.array(empties, dtype=bool)
    starts: list[int] = []
    n, i = len(odd), 0
    while i < n:
        if empty[i]:
            i += 1
            continue
        start, j, open_ = i, i, bool(odd[i])
        while open_ and j + 1 < n:  # a quoted newline: the row goes on
            j += 1
            open_ ^= bool(odd[j])
        if open_:  # never closed: a stray quote, the row is its own line
            j = start
        starts.append(start + 1)
        i = j + 1
    return np.array(starts[1:], dtype=np.int64)  # the first row is the header


def _needs_mapping(source: "Source") -> bool:
    """Whether the file has a double quote or an empty line anywhere (a cheap scan in blocks)."""
    tail = b""
    with open_bytes(source.path, source.limits, source.name) as f:
        while block := f.read(_BLOCK):
            data = tail + block
            if b'"' in block or b"\n\n" in data or b"\n\r\n" in data or data.startswith((b"\n", b"\r\n")):
                return True
            tail = data[-2:]
    return False
