"""Reading the store back: the input's accounting, the diagnostics about the input
(``event_id_conflict``, ``malformed_field``), and events as ``Event`` objects or frames. ``Store``
takes these methods from ``Accounting``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..core.model import Diagnostic, DiagnosticKind, Event
from ..core.rows import event_reader, names
from ..core.summary import InputSummary, QuarantinedLine, first_unplaced
from ..rules import stable_id
from .ignored import ignore_summary
from .schema import SQL

if TYPE_CHECKING:
    import duckdb
    import polars as pl


class Accounting:
    """The reading half of ``Store`` (a mixin: ``self.con`` and ``self.skipped`` come from ``Store``)."""

    con: "duckdb.DuckDBPyConnection"

    def input_summary(self, first: int = 20) -> InputSummary:
        lines_read, events, duplicates, quarantined, ignored = self.con.execute(SQL["totals"]).fetchone()
        files = [r[0] for r in self.con.execute(  # a live processor appends one name many times
            "SELECT name FROM sources GROUP BY name ORDER BY min(source_id)").fetchall()]
        sample = [QuarantinedLine(*r) for r in self.con.execute(SQL["quarantine_first"], [first]).fetchall()]
        return InputSummary(files, int(lines_read), int(events), int(duplicates), int(quarantined), int(ignored),
                            unplaced=sum(self.unplaced_kinds().values()), quarantine=sample,
                            ignore=ignore_summary(self.con) if ignored else [],
                            unplaced_first=first_unplaced(self.con.execute(
                                SQL["unplaced_first"], [first]).fetchall(), first),
                            skipped=list(self.skipped))

    def quarantine_reasons(self, first: int = 5) -> tuple[list[tuple[str, int, str, int]], int]:
        """The ``first`` most frequent quarantine reasons as ``(reason, lines, file, first line)``,
        and how many distinct reasons there are in all."""
        rows = self.con.execute(SQL["quarantine_reasons"], [first]).fetchall()
        return [(r[0], int(r[1]), r[2], int(r[3])) for r in rows], int(rows[0][4]) if rows else 0

    def unplaced_kinds(self) -> dict[str, int]:
        """How many events of each kind are unplaced (SPEC rev 3: no seq in a key ordered by seq)."""
        return dict(self.con.execute(SQL["unplaced"]).fetchall())

    def malformed_fields(self) -> list[Diagnostic]:
        """One ``malformed_field`` diagnostic per file and field whose value was dropped on some
        lines (SPEC rev 3), saying how many lines, the first, and how many lose evidence."""
        return [malformed_field(*row[:8]) for row in self.con.execute(SQL["malformed"]).fetchall()]

    def id_conflicts(self, first: int = 5) -> list[Diagnostic]:
        """One ``event_id_conflict`` per event_id naming different events (all of them kept),
        in observation order; ``detail`` lists the first ``first`` lines using the id."""
        return [id_conflict(eid, rows, first) for eid, rows in self.con.execute(SQL["id_conflicts"]).fetchall()]

    def quarantine_frame(self) -> "pl.DataFrame":
        return self._frame(
            "SELECT s.name AS file, q.line, q.reason FROM quarantine q JOIN sources s USING (source_id) "
            "ORDER BY q.source_id, q.line")

    def events_frame(self) -> "pl.DataFrame":
        return self._frame(SQL["event_columns"] + " ORDER BY workflow_key, ord NULLS LAST, event_id, obs")

    def _frame(self, sql: str) -> "pl.DataFrame":
        import polars as pl

        return pl.from_arrow(self.con.sql(sql).to_arrow_table())

    def events_of(self, workflow_key: str, limit: int | None = None) -> list[Event]:
        # unplaced events (no seq in a key ordered by seq) last, in observation order
        sql = SQL["event_columns"] + " WHERE workflow_key = ? ORDER BY ord NULLS LAST, event_id, obs"
        params: list[Any] = [workflow_key]
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        cur = self.con.execute(sql, params)
        read = event_reader(names(cur.description))
        return [read(r) for r in cur.fetchall()]

    def iter_events(self, batch: int = 100_000) -> Iterator[Event]:
        """Every placed event in authoritative order per workflow key (the live detector's feed;
        unplaced events, without seq in a key ordered by seq, have no place in it)."""
        cur = self.cursor()
        cur.execute(SQL["event_columns"] + " WHERE ord IS NOT NULL ORDER BY workflow_key, ord, event_id, obs")
        read = event_reader(names(cur.description))
        while rows := cur.fetchmany(batch):
            yield from map(read, rows)


def id_conflict(event_id: str, rows: list[tuple], first: int = 5) -> Diagnostic:
    """The ``event_id_conflict`` of one id naming different events; ``rows`` are the events using
    it, ``(file, line, workflow_key, seq, kind)`` in observation order (``detail`` lists the first
    ``first``). The diagnostic sits at the first of them."""
    name, line, key, seq, kind = rows[0]
    shown = "; ".join(f"{n}:{ln} ({k}, seq {'-' if s is None else s}, {kd})" for n, ln, k, s, kd in rows[:first])
    more = f"; and {len(rows) - first} more" if len(rows) > first else ""
    detail = (f'event_id "{event_id[:80]}" names {len(rows)} different events, all kept: {shown}{more}; '
              "give each event its own id, or leave event_id out to have it derived")
    return Diagnostic(stable_id("d-", key, DiagnosticKind.EVENT_ID_CONFLICT, seq, event_id),
                      DiagnosticKind.EVENT_ID_CONFLICT, key, seq, None, detail, file=name, line=line)


def malformed_field(file: str, name: str, lines: int, first_line: int, key: str, seq: int | None,
                    position: int | None, lost: int) -> Diagnostic:
    """The ``malformed_field`` diagnostic of one file and field: ``lines`` events whose value of
    field ``name`` was dropped (the first at ``first_line``), ``lost`` of them in a field a finding
    rule reads (so the verdict cannot be a pass)."""
    what = ("missing or not continue, pause or terminate: the revalidation decides nothing"
            if name == "decision" else "an object, an array or a value the format does not know")
    detail = (f'"{name}" could not be read on {lines:,} line{"s" if lines != 1 else ""} of {file} (first: line '
              f"{first_line}): {what}; the value was dropped and the event kept")
    if lost:
        detail += (f"; {lost:,} of them lose evidence a finding rule reads, so a pass cannot be claimed; "
                   "write the value in the shape the format describes")
    return Diagnostic(stable_id("d-", key, DiagnosticKind.MALFORMED_FIELD, file, name), DiagnosticKind.MALFORMED_FIELD,
                      key, seq, None, detail, numbers={"lines": lines, "lost": lost}, position=position,
                      file=file, line=first_line)
