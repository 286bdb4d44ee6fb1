"""Stage 4, detect, read back: the detector's rows turned into findings, one workflow key at a time.

``detect.sql`` leaves two tables in its scratch database: every workflow key with its counts and
facts (``keys``), and the finding rows (``finding_rows``). Both are read in key order through
cursors of their own, side by side, in Arrow batches; a key's findings are built, the authority
rules applied to them (``authorize``), sorted and handed over with the key's facts. Nothing is
held for more than one batch of keys, however many findings the audit has.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from ...core.model import Diagnostic, Finding, Grade, Kind, Outcome, build_finding
from ...core.sql import QUIET
from ...rules import attempt_grade, finding_order
from ...store import Store
from .base import SQL, Handover, KeyFindings

if TYPE_CHECKING:
    import pyarrow as pa

# Value -> member by dict: Grade(value) and friends cost a microsecond each on Python 3.11.
_GRADES = {g.value: g for g in Grade}
_KINDS = {k.value: k for k in Kind}
_OUTCOMES = {o.value: o for o in Outcome}
_REJECTED = Grade.REJECTED_ATTEMPT
#: Finding rows read at a time (see ``KEY_BATCH``).
FINDING_BATCH = 16_384


def batches(store: Store, newest_ts: datetime | None, notes: list[Diagnostic],
            size: int) -> "Iterator[tuple[pa.RecordBatch, list[KeyFindings]]]":
    """``Detection.batches``: every key in key order, in batches of ``size``, with the
    ``KeyFindings`` of the marked ones; authority diagnostics go to ``notes``."""
    # Detection's tables lie in key order (detect.sql): scanned in order, they stream without a sort.
    with store.in_order():
        yield from _batches(store, newest_ts, notes, size)


def _batches(store: Store, newest_ts: datetime | None, notes: list[Diagnostic],
             size: int) -> "Iterator[tuple[pa.RecordBatch, list[KeyFindings]]]":
    cursors = [store.con.cursor() for _ in range(5)]
    try:
        for cur in cursors:
            cur.execute(QUIET)
        keys_cur, rows_cur, *fact_curs = cursors
        found = _finding_groups(rows_cur.sql(SQL["read_findings"]).to_arrow_reader(FINDING_BATCH))
        pending = next(found, None)
        handovers, acquirers, verifications = (_Facts(cur, name) for cur, name in zip(
            fact_curs, ("read_handovers", "read_acquirers", "read_verifications")))
        last = None
        for batch in keys_cur.sql(SQL["read_keys"]).to_arrow_reader(size):
            last = _ascending(batch.column("workflow_key"), last)
            rows = [i for i, m in enumerate(batch.column("marked").to_pylist()) if m]
            marked = batch.filter(batch.column("marked")).select(["workflow_key", "observed", "events", "acquisitions",
                                                                  "handovers", "found", "authority"])
            authority = [k for k, a in zip(marked.column("workflow_key").to_pylist(),
                                          marked.column("authority").to_pylist()) if a is not None]
            events = _authority_events(store, authority)
            out = []
            for row, (key, observed, *counts, has_findings, opted) in zip(
                    rows, zip(*(c.to_pylist() for c in marked.columns))):
                findings, stamps, capped = [], {}, set()
                if pending is not None and pending[0] <= key:
                    if pending[0] != key or not has_findings:
                        raise RuntimeError(f"finding rows of {pending[0]!r} and the keys read out of step")
                    _, findings, stamps, capped = pending
                    pending = next(found, None)
                handed = handovers.take(key)
                kf = KeyFindings(row, key, bool(observed), counts, findings,
                                 [Handover(key, s, epoch, worker) for _, s, epoch, worker, _ in handed],
                                 {(key, ek): (place, position) for _, ek, place, position in verifications.take(key)},
                                 {(key, epoch): worker for _, epoch, worker in acquirers.take(key)}, newest_ts, stamps,
                                 {(key, s): ts for _, s, _, _, ts in handed}, capped)
                if opted is not None:
                    _authorized(kf, events.get(key, []), opted, notes)
                out.append(kf)
            yield batch, out
        if pending is not None:
            raise RuntimeError(f"finding rows of {pending[0]!r} and the keys read out of step")
        for facts in (handovers, acquirers, verifications):
            facts.finish()
    finally:
        for cur in cursors:
            cur.close()


def _ascending(keys: "pa.Array", last: str | None) -> str | None:
    """The last of ``keys`` (or ``last``, if there are none) once they are checked to come after
    ``last`` and each after the one before: the order every stream read beside the keys is
    merged in. Should a scan come back out of order, the audit stops here instead of writing a
    document in another order."""
    import pyarrow.compute as pc

    n = len(keys)
    if not n:
        return last
    if (last is not None and not keys[0].as_py() > last) or (
            n > 1 and not pc.all(pc.less(keys.slice(0, n - 1), keys.slice(1))).as_py()):
        raise RuntimeError("detection's keys were read out of key order; the document would not be in it")
    return keys[n - 1].as_py()


class _Facts:
    """The rows of one of detect.sql's fact tables (``key_facts``, ``acquirers``), grouped by their
    first column, the workflow key, read in key order beside the keys (each key's, once)."""

    __slots__ = ("_groups", "_pending", "_name")

    def __init__(self, cur, name: str) -> None:
        self._name = name
        self._groups = _grouped(cur.sql(SQL[name]).to_arrow_reader(FINDING_BATCH))
        self._pending = next(self._groups, None)

    def take(self, key: str) -> list[tuple]:
        """The rows of ``key``: none if it has none."""
        pending = self._pending
        if pending is None or pending[0] > key:
            return []
        if pending[0] != key:
            raise RuntimeError(f"{self._name} rows of {pending[0]!r} and the keys read out of step")
        self._pending = next(self._groups, None)
        return pending[1]

    def finish(self) -> None:
        """Once every key is read: no rows may be left."""
        if self._pending is not None:
            raise RuntimeError(f"{self._name} rows of {self._pending[0]!r} and the keys read out of step")


def _authority_events(store: Store, keys: list[str]) -> dict[str, list[tuple]]:
    """The events (with their parsed ts) of ``keys``, by key (``timeline.authority_events``)."""
    if not keys:
        return {}
    from .timeline import authority_events

    return dict(authority_events(store.con, keys))


def _authorized(kf: KeyFindings, events: list[tuple], opted: bool, notes: list[Diagnostic]) -> None:
    """The authority rules and compensation applied to one key's findings (``authorize``)."""
    from .authorize import _key

    kf.findings = _key(kf.workflow_key, events, kf.findings, opted, notes, kf.finding_ts)
    kf.findings.sort(key=finding_order)


def _grouped(reader) -> Iterator[tuple[str, list[tuple]]]:
    """``(key, rows)`` for each run of rows with one key (the first column) in the batches of
    ``reader``, a run cut by a batch's end joined up again: the runs are found by arrow (a
    generator step per row and ``groupby`` cost 4 % of explain at ten million events)."""
    import pyarrow.compute as pc

    key, rows = None, []
    for batch in reader:
        n = batch.num_rows
        if not n:
            continue
        keys = batch.column(0)
        after, before = keys.slice(1), keys.slice(0, n - 1)
        # a null key (none is: every fact row's key comes from finding_keys) is its own run, as in
        # groupby: a comparison with null is null, which indices_nonzero skips, unless one side only
        # is null (Kleene's or). No Python scalar here: pa.scalar imports pandas (core.arrow).
        differs = pc.or_kleene(pc.not_equal(after, before), pc.xor(pc.is_null(after), pc.is_null(before)))
        cut = pc.indices_nonzero(differs).to_pylist()
        got = list(zip(*(column.to_pylist() for column in batch.columns)))
        start = 0
        for end in (*(i + 1 for i in cut), n):
            run_key = got[start][0]
            if run_key != key:
                if rows:
                    yield key, rows
                key, rows = run_key, []
            rows += got[start:end]
            start = end
    if rows:
        yield key, rows


def _finding_groups(reader) -> Iterator[tuple[str, list[Finding], dict[str, int | None], set[str]]]:
    """``(key, findings, ts by finding id (microseconds), capped finding ids)`` of each key with findings,
    in key order; each key's findings sorted (``finding_order``), two of one id kept once."""
    key = None
    findings: list[Finding] = []
    stamps: dict[str, int | None] = {}
    capped: set[str] = set()
    for batch in reader:
        for f, ts_utc, is_capped in _findings(batch):
            if f.workflow_key != key:
                if key is not None:
                    yield key, _sorted(findings), stamps, capped
                key, findings, stamps, capped = f.workflow_key, [], {}, set()
            findings.append(f)
            stamps[f.id] = ts_utc  # in microseconds, read by base.instant
            if is_capped:
                capped.add(f.id)
    if key is not None:
        yield key, _sorted(findings), stamps, capped


def _sorted(findings: list[Finding]) -> list[Finding]:
    findings.sort(key=finding_order)
    # Two attempts of one seq (an ordering conflict) that grade alike are one finding.
    return [f for i, f in enumerate(findings) if not i or f.id != findings[i - 1].id]


def _findings(batch: "pa.RecordBatch") -> Iterator[tuple[Finding, int | None, bool]]:
    """Each finding row of ``batch`` as ``(finding, its ts in microseconds, capped)``."""
    rows = zip(*(column.to_pylist() for column in batch.columns))
    for (grade, k, s, kind, epoch, worker, cur_epoch, cur_worker, t_seq, effect_key, step_id,
         sink, reporter, ts, outcome, receipt, epochs, unstable, ts_utc, capped, sink_result, seq,
         file, line, position, t_pos, receipt_pos, fid, iid) in rows:
        if grade == "attempt":
            g, resolved = attempt_grade(outcome, sink_result)
            if g is not _REJECTED:
                receipt = receipt_pos = None
        else:
            g, resolved = _GRADES[grade], _OUTCOMES[outcome] if outcome else None
        epochs = tuple(epochs or ())
        if seq is None:  # a key ordered by observation: no seq is ever invented (SPEC rev 3)
            t_seq = receipt = None
        # Findings carry their incident id from the start, as the live detector fills it in:
        # explain then keeps the finding instead of copying it. Both ids come with the row
        # (read_findings: finding_id(k, g, s) and incident_id(k, displaced_epoch(g, epoch, epochs))).
        yield build_finding(
            id=fid, grade=g, workflow_key=k, seq=seq, position=position, kind=_KINDS[kind],
            epoch=epoch, worker=worker, current_epoch=cur_epoch, current_worker=cur_worker, transition_seq=t_seq,
            transition_position=t_pos, effect_key=effect_key, step_id=step_id, sink=sink, reporter=reporter,
            ts=ts, outcome=resolved, receipt_seq=receipt, receipt_position=receipt_pos, epochs=epochs,
            unstable_effect_key=bool(unstable), incident_id=iid,
            file=file, line=line), ts_utc, capped
