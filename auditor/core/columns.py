"""Every column list of the event, generated from the field registry (``core.fields.REGISTRY``).

The store's ``events`` table is the fields' columns and the columns the store keeps beside them
(``STORE_COLUMNS``): a store written under revision 1 has ``REVISION_1_LAYOUT``, and every later
column (a field or the store's own) is appended in revision order, by ``events_upgrade`` on a
store written before. The SQL files name these lists with placeholders (``{{name}}`` or
``{{name:alias}}``, the alias prefixing each column) that ``core/sql.py`` expands when it loads a
statement: only column names are ever expanded; values stay bound parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .fields import FieldSpec, registered


@dataclass(frozen=True, slots=True)
class StoreColumn:
    """A column of ``events`` that is not a field: the rows' identity and order, what was parsed or
    derived, and where each row came from."""

    name: str
    sql: str
    revision: str = "1"
    note: str = ""


STORE_COLUMNS: tuple[StoreColumn, ...] = (
    StoreColumn("ord", "BIGINT", note="the order detection uses: seq, or observation rank when seq is missing"),
    StoreColumn("obs", "BIGINT NOT NULL", note="observation position: source_id * 2^36 + pos; the row's unique identity"),
    StoreColumn("ts_utc", "TIMESTAMPTZ", note="parsed, for durations and freshness only, never for order"),
    StoreColumn("attrs", "VARCHAR", note="JSON text; payload-like fields hashed"),
    StoreColumn("source_id", "INTEGER NOT NULL"),
    StoreColumn("line", "BIGINT NOT NULL"),
    StoreColumn("position", "BIGINT", "3", "1-based in global observation order: the files as given, then line order"),
    StoreColumn("dropped", "VARCHAR[]", "3", "the descriptive fields whose unreadable value was dropped"),
)

#: The events table of a store written under revision 1, column for column: fields and the
#: store's own columns interleaved. Later columns are appended (an older store gains them by
#: ALTER, which appends), so this layout is history and never changes.
REVISION_1_LAYOUT = ("event_id", "ord", "seq", "obs", "workflow_key", "kind", "epoch", "worker", "effect_key",
                     "sink", "sink_result", "reporter", "step_id", "ts", "ts_utc", "attrs", "source_id", "line")

#: The fields a revision-1 event id hashes, in this order (attrs is not a field but is hashed;
#: event_id is not hashed). History too: later fields join the id only when given (``later_id``).
REVISION_1_ID = ("seq", "workflow_key", "kind", "epoch", "worker", "effect_key", "sink", "sink_result",
                 "reporter", "step_id", "attrs", "ts")

Column = FieldSpec | StoreColumn


def _revision(c: Column) -> tuple[int, ...]:
    return tuple(int(p) for p in str(c.revision).split("."))


def table() -> tuple[Column, ...]:
    """The events table's columns in their order: revision 1's layout, then every later column
    (field or store column) by revision, in declaration order within one."""
    by_name: dict[str, Column] = {c.name: c for c in (*registered(), *STORE_COLUMNS)}
    first = [by_name[n] for n in REVISION_1_LAYOUT]
    later = sorted((c for c in by_name.values() if c.name not in REVISION_1_LAYOUT), key=_revision)
    return (*first, *later)


#: ``optional_fields`` and ``added_fields`` by revision, with the registry they were drawn from:
#: the reference normalizer asks for them once per line (recomputing them cost it 70 µs a line).
_DRAWN: dict[tuple[int, ...], tuple[tuple[FieldSpec, ...], tuple[FieldSpec, ...]]] = {}


def _after(revision: tuple[int, ...]) -> tuple[FieldSpec, ...]:
    registry = registered()
    drawn = _DRAWN.get(revision)
    if drawn is None or drawn[0] is not registry:
        drawn = _DRAWN[revision] = (registry, tuple(s for s in registry if _revision(s) > revision))
    return drawn[1]


def optional_fields() -> tuple[FieldSpec, ...]:
    """The fields of revision 2 and later: optional, none can cost a line."""
    return _after((1,))


def added_fields() -> tuple[FieldSpec, ...]:
    """The fields added after revision 2: the normalizers (``normalize/reference.py``, the SQL one
    in ``normalize/normalize.sql``) name the fields up to revision 2 in their rules and carry these
    by their role alone; the SQL normalizer's fast path leaves a line that gives one to the reference one."""
    return _after((2,))


def added_picked(_alias: str = "") -> str:
    """The store normalizer's ``picked`` columns of the added fields (the reference normalizer's
    values, ``n``): ``, n.region AS region``; instants read in the shape both engines read."""
    out = []
    for s in added_fields():
        if s.role == "time":
            out.append(f"CASE WHEN regexp_full_match(n.{s.name}, $instant_shape) THEN try_cast(upper(n.{s.name}) "
                       f"AS TIMESTAMPTZ) END AS {s.name}")
        else:
            out.append(f"CASE WHEN NOT fast THEN n.{s.name} END AS {s.name}")
    return "".join(f", {c}" for c in out)


def added_typed(_alias: str = "") -> str:
    """The added fields as the typed records give them: none (``, NULL::VARCHAR AS region``)."""
    return "".join(f", NULL::{s.sql.split()[0]} AS {s.name}" for s in added_fields())


def added(_alias: str = "") -> str:
    """``, region, ...``: the added fields' names, after a column list."""
    return "".join(f", {s.name}" for s in added_fields())


def _later_revisions() -> dict[tuple[int, ...], list[Column]]:
    out: dict[tuple[int, ...], list[Column]] = {}
    for c in table()[len(REVISION_1_LAYOUT):]:
        out.setdefault(_revision(c), []).append(c)
    return out


def events_table(_alias: str = "") -> str:
    """The body of ``CREATE TABLE events (...)``."""
    lines = []
    for c in table()[:len(REVISION_1_LAYOUT)]:
        lines.append(_ddl_line(c))
    for revision, columns in _later_revisions().items():
        lines.append(f"    -- Revision {'.'.join(map(str, revision))}: a store written before has these added "
                     "by events_upgrade.")
        lines += [_ddl_line(c) for c in columns]
    return _join(lines)


def _join(lines: list[str]) -> str:
    """Comma-separated column lines, comment lines kept as they are (no comma after a comment)."""
    columns = [i for i, line in enumerate(lines) if not line.lstrip().startswith("--")]
    last = columns[-1]
    return "\n".join(line if line.lstrip().startswith("--") or i == last else _comma(line)
                     for i, line in enumerate(lines))


def _comma(line: str) -> str:
    body, sep, note = line.partition("  -- ")
    return f"{body.rstrip()},{'  -- ' + note if sep else ''}"


def _ddl_line(c: Column) -> str:
    return f"    {c.name:<12} {c.sql}" + (f"  -- {c.note}" if c.note else "")


def events_upgrade(_alias: str = "") -> str:
    """What a store written before gains on open: every column after revision 1's, appended."""
    return "\n".join(f"ALTER TABLE events ADD COLUMN IF NOT EXISTS {c.name} {c.sql};"
                     for c in table()[len(REVISION_1_LAYOUT):])


def _prefixed(names, alias: str) -> str:
    return ", ".join(f"{alias}.{n}" if alias else n for n in names)


def optional(alias: str = "") -> str:
    """The optional fields, ``alias.``-prefixed: ``e.lease_until, e.heartbeat, ...``."""
    return _prefixed((s.name for s in optional_fields()), alias)


def later_id(alias: str = "e") -> str:
    """The derived event id's later parts (after revision 1's hash): each later revision's fields
    join it, as the JSON text of their values, only when one of them is given, so an event without
    them keeps the id an earlier revision derived."""
    parts = []
    for columns in _later_revisions().values():
        names = [c.name for c in columns if isinstance(c, FieldSpec)]
        if names:
            absent = " AND ".join(f"{alias}.{n} IS NULL" for n in names)
            packed = ", ".join(f"{n} := {alias}.{n}" for n in names)
            parts.append(f"|| CASE WHEN {absent} THEN '' ELSE to_json(struct_pack({packed}))::VARCHAR END")
    return "\n        ".join(parts)


def revision_1_id(alias: str = "e") -> str:
    """The struct of revision 1's hashed fields (``REVISION_1_ID``)."""
    return ", ".join(f"{n} := {alias}.{n}" for n in REVISION_1_ID)


#: The placeholders the SQL files may use, by name.
FRAGMENTS: dict[str, Callable[[str], str]] = {
    "events_table": events_table,
    "events_upgrade": events_upgrade,
    "optional": optional,
    "later_id": later_id,
    "revision_1_id": revision_1_id,
    "added_picked": added_picked,
    "added_typed": added_typed,
    "added": added,
}
