"""Loads the named SQL statements kept in ``.sql`` files beside the modules that run them, their
column lists expanded from the field registry (``core.columns``)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from .columns import FRAGMENTS

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
#: A column list generated from the field registry: ``{{name}}`` or ``{{name:alias}}`` (see core.columns).
_PLACEHOLDER = re.compile(r"\{\{(\w+)(?::(\w+))?\}\}")


@cache
def statements(filename: str) -> dict[str, str]:
    """``{name: sql}`` for every ``-- name: x`` block of ``auditor/<filename>`` (a path in the package)."""
    text = expand((Path(__file__).parent.parent / filename).read_text())
    parts = _NAME.split(text)
    return {name: body.strip().rstrip(";") for name, body in zip(parts[1::2], parts[2::2])}


def expand(text: str) -> str:
    """``text`` with each placeholder replaced by the column list it names (``core.columns.FRAGMENTS``):
    column names only, from the registry; values stay bound parameters."""
    def one(m: re.Match) -> str:
        if m.group(1) not in FRAGMENTS:
            raise KeyError(f"{{{{{m.group(1)}}}}}: no such column list (core/columns.py FRAGMENTS)")
        return FRAGMENTS[m.group(1)](m.group(2) or "")
    return _PLACEHOLDER.sub(one, text)


#: Run on every connection and cursor: DuckDB draws its progress bar on stdout for a query over two
#: seconds, into the terminal summary and into ``--json -``. A local setting, so per cursor too.
QUIET = "SET enable_progress_bar = false"
