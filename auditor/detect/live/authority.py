"""SPEC section 8 in the live detector: the authority rules and compensation for one key.

The batch detector's counterpart is ``detect/batch/authorize.py``; both feed ``authority.KeyAuthority``
and judge with ``authority.judged``, so the rules exist once. A key opts in at its first authority
event (the live detector cannot see the rest of the log), seeded with the acquisitions so far.
"""

from __future__ import annotations

from typing import Any

from ...rules.authority import KeyAuthority, compensated, judged, resolves
from ...core.model import DiagnosticKind, Event, Finding, Grade, Kind
from ...rules import authority_incident_id, finding_id

# ``det`` is the ``live.LiveDetector`` and ``st`` its per-key state (``live._Key``); typed ``Any`` here
# so this room does not import the one that imports it.
LiveDetector = _Key = Any

_ATTEMPT, _COMMIT = Kind.EFFECT_ATTEMPTED, Kind.EFFECT_COMMITTED


def authorize(det: "LiveDetector", st: "_Key", e: Event, found: list[Finding]) -> list[Finding]:
    """SPEC section 8 for an opted-in key: feed its tracker; an unauthorized effect's finding
    is ``authority.judged`` of its stale finding (or of none), a stale attempt still pending
    keeps its verdict until it is resolved."""
    if st.authority is None:  # opts in now: the acquisitions so far seed the tracker
        st.authority = KeyAuthority.after_acquisitions(
            st.max_epoch, None if st.last_acq_seq is None else (st.last_acq_seq, st.last_acq_position),
            resumed=len(st.rec_seqs) > 1 or (st.acquired is not None and len(st.acquired) > 1))
    verdict, notes = st.authority.feed(e)
    for n in notes:
        det._diagnose(DiagnosticKind(n.kind), e.workflow_key, n.seq, n.epoch, n.detail, e)
    found = [verdict_of(st, f) for f in found] if st.verdicts else found
    resolution = resolves(e)
    resolved = st.unresolved.pop((e.epoch, e.effect_key), []) if resolution and st.unresolved else []
    if resolved:
        found = found + [judged(a, v, None, finding_id, authority_incident_id, resolution, e)
                         for a, v in resolved]
    if verdict is None or (e.kind is not _ATTEMPT and e.kind is not _COMMIT):
        return found
    mine = [f for f in found if f.place == e.seq and f.kind is e.kind and not f.reasons
            and f.grade is not Grade.DOUBLE_COMMIT]
    if mine:
        return [judged(e, verdict, f, finding_id, authority_incident_id) if f in mine else f for f in found]
    if e.kind is _COMMIT:
        return found + [judged(e, verdict, None, finding_id, authority_incident_id)]
    if st.pending and any(w[0] is e for w in st.pending.get((e.epoch, e.effect_key), ())):
        if st.verdicts is None:
            st.verdicts = {}
        st.verdicts[e.seq] = (e, verdict)  # a stale attempt: judged when its finding is made
        return found
    if resolution == "rejected":
        if resolved or any(f.receipt_place == e.seq for f in found):
            return found  # the receipt of the attempts it resolved, not a finding of its own
        return found + [judged(e, verdict, None, finding_id, authority_incident_id)]
    if st.unresolved is None:
        st.unresolved = {}
    st.unresolved.setdefault((e.epoch, e.effect_key), []).append((e, verdict))
    return found

def verdict_of(st: "_Key", f: Finding) -> Finding:
    """A stale attempt's finding, judged with the verdict its event got when it was fed."""
    if f.kind is not _ATTEMPT or f.reasons or not st.verdicts:
        return f
    held = st.verdicts.pop(f.place, None)
    if held is None:
        return f
    return judged(held[0], held[1], f, finding_id, authority_incident_id)

def compensate(det: "LiveDetector", st: "_Key", e: Event) -> list[Finding]:
    """``effect_compensated`` turns the earliest double commit of its effect key before it
    that is not yet compensated into ``compensated`` (the double commit is withdrawn)."""
    waiting = st.doubles.get(e.effect_key) if st.doubles else None
    if not waiting:
        return []
    waiting.sort(key=lambda f: f.place)
    for i, d in enumerate(waiting):
        if d.place < e.seq:
            del waiting[i]
            det.withdrawn.append(d.id)
            return [compensated(d, finding_id)]
    return []


def unresolved(st: "_Key") -> list[Finding]:
    """Unauthorized attempts nothing resolved, at the end: each judged on its own verdict."""
    out = [judged(a, v, None, finding_id, authority_incident_id)
           for waiting in st.unresolved.values() for a, v in waiting]
    st.unresolved = None
    return out
