"""Who delivered the evidence: the name of the ``auditor serve`` token each stored record came
through (``attrs["auditor.token"]``, written by the receiver, never the token itself).

Only records the receiver stored (source ``otlp:serve``) are read: an ``auditor.token`` attribute
in a file given to ``ingest`` or ``audit`` is the file's claim, not an attribution, and a store
without the receiver's records costs one look at its sources table.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .spooled import SOURCE

if TYPE_CHECKING:
    import duckdb

    from ..core.model import Finding

#: The attribute the receiver writes on every record a named token delivers: the token's name.
TOKEN_ATTR = "auditor.token"
_PATH = f'$."{TOKEN_ATTR}"'
#: The events a finding rests on, as the document names their roles.
ROLES = (("event", "position"), ("transition", "transition_position"), ("receipt", "receipt_position"),
         ("since", "since_position"))


def attribution(con: "duckdb.DuckDBPyConnection",
                findings: Iterable["Finding"]) -> tuple[dict[str, dict[str, str]], tuple[str, ...]]:
    """``({finding id: {role: token name}}, every token name stored)`` over the events each
    finding rests on (its own event, the transition, the receipt, the mandate's start): empty
    unless the receiver stored records under a named token."""
    names = tuple(r[0] for r in con.execute(
        "SELECT DISTINCT json_extract_string(attrs, ?) AS t FROM events WHERE source_id IN "
        "(SELECT source_id FROM sources WHERE name = ?) AND t IS NOT NULL ORDER BY t",
        [_PATH, SOURCE]).fetchall()) if _served(con) else ()
    if not names:
        return {}, ()
    rows: dict[str, list[Any]] = {"fid": [], "role": [], "k": [], "pos": []}
    for f in findings:
        for role, attr in ROLES:
            pos = getattr(f, attr)
            if pos is not None and (role == "event" or pos != f.position):
                for col, value in zip(rows, (f.id, role, f.workflow_key, pos)):
                    rows[col].append(value)
    if not rows["fid"]:
        return {}, names
    import pyarrow as pa

    wanted = pa.table({"fid": pa.array(rows["fid"], pa.string()), "role": pa.array(rows["role"], pa.string()),
                       "k": pa.array(rows["k"], pa.string()), "pos": pa.array(rows["pos"], pa.int64())})
    con.register("auditor_wanted_tokens", wanted)
    try:
        found = con.execute(
            "SELECT w.fid, w.role, json_extract_string(e.attrs, ?) AS t FROM auditor_wanted_tokens w "
            "JOIN events e ON e.workflow_key = w.k AND e.position = w.pos WHERE e.source_id IN "
            "(SELECT source_id FROM sources WHERE name = ?) AND t IS NOT NULL", [_PATH, SOURCE]).fetchall()
    finally:
        con.unregister("auditor_wanted_tokens")
    order = [r for r, _ in ROLES]
    out: dict[str, dict[str, str]] = {}
    for fid, role, name in sorted(found, key=lambda r: (r[0], order.index(r[1]))):
        out.setdefault(fid, {})[role] = name
    return out, names


def _served(con: "duckdb.DuckDBPyConnection") -> bool:
    return con.execute("SELECT count(*) FROM sources WHERE name = ?", [SOURCE]).fetchall()[0][0] > 0
