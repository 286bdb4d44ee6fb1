"""Loads the named SQL statements kept in ``.sql`` files beside the modules that run them."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


@cache
def statements(filename: str) -> dict[str, str]:
    """``{name: sql}`` for every ``-- name: x`` block of ``auditor/<filename>`` (a path in the package)."""
    text = (Path(__file__).parent.parent / filename).read_text()
    parts = _NAME.split(text)
    return {name: body.strip().rstrip(";") for name, body in zip(parts[1::2], parts[2::2])}


#: Run on every connection and cursor: DuckDB draws its progress bar on stdout for a query over two
#: seconds, into the terminal summary and into ``--json -``. A local setting, so per cursor too.
QUIET = "SET enable_progress_bar = false"
