"""Store rows read by name: one generated reader per column list turns a row into an ``Event``.

No module unpacks an event row by position: a query names its columns (``SELECT ... AS file``),
and ``event_reader`` maps each of ``Event``'s fields to the column of that name, converted as the
field's role says (a kind name to ``Kind``, attrs' JSON text to a dict, ...). The reader is
generated once per column list, as ``core.builder`` generates constructors: the same speed as
the hand-written unpacking it replaces, by the million.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

from .builder import builder
from .model import Event, Kind, Reporter, SinkResult

#: How a column's value becomes the field's, by field: ``{}`` is the value itself.
_CONVERT = {
    "kind": "_kinds[{v}]",
    "sink_result": "(_results.get({v}) if {v} else None)",
    "reporter": "_reporters.get({v}, {v})",  # an unknown reporter is kept as given
    "attrs": "(_loads({v}) if {v} else None)",
    "observed": "bool({v})",
}
_SCOPE: dict[str, Any] = {
    "_kinds": {k.value: k for k in Kind}, "_results": {r.value: r for r in SinkResult},
    "_reporters": {r.value: r for r in Reporter}, "_loads": json.loads, "_build": builder(Event),
}


def names(description: Sequence[Sequence[Any]] | None) -> tuple[str, ...]:
    """The column names of a DuckDB cursor's ``description``."""
    return tuple(d[0] for d in description or ())


@functools.lru_cache(maxsize=64)
def event_reader(columns: tuple[str, ...], seq: str = "seq") -> Callable[[Sequence[Any]], Event]:
    """A function from a row of ``columns`` to its ``Event``: each field of ``Event`` from the
    column of its name (``seq`` from the column ``seq`` names, such as the order ``ord``), a field
    without a column left at its default. A column no field reads is left alone (the caller's)."""
    index = {name: i for i, name in enumerate(columns)}
    args = []
    for f in dataclasses.fields(Event):
        column = seq if f.name == "seq" else f.name
        if column in index:
            value = f"row[{index[column]}]"
            args.append(f"{f.name}=" + _CONVERT.get(f.name, "{v}").format(v=value))
        elif f.default is dataclasses.MISSING:
            raise KeyError(f"no column {column!r} for Event.{f.name} among {columns}")
    code = f"def read(row):\n    return _build({', '.join(args)})\n"
    scope = dict(_SCOPE)
    exec(compile(code, f"<event reader of {len(columns)} columns>", "exec"), scope)  # noqa: S102 - our own names
    return scope["read"]


def column_index(columns: tuple[str, ...]) -> dict[str, int]:
    """``{name: position}`` of ``columns``: what a caller reads beside the event, by name."""
    return {name: i for i, name in enumerate(columns)}
