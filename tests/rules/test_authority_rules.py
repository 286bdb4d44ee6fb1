"""The authority state machine (SPEC section 8) on its own: one table of histories and verdicts."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from auditor.rules.authority import AuthorityTracker, as_event, compensate, opts_in


def t(minute: int) -> datetime:
    return datetime(2026, 7, 26, 14, minute, tzinfo=UTC)


def run(*events):
    tracker, verdicts, notes = AuthorityTracker(), {}, []
    for e in events:
        v, n = tracker.feed(e)
        notes += [(d.kind, d.seq) for d in n]
        if v is not None:
            verdicts[e.seq] = (v.reasons, v.anchor, v.since_seq, v.since_ts)
    return verdicts, notes


acq = lambda s, ep: as_event(seq=s, kind="lease_acquired", epoch=ep)
grant = lambda s, aid, exp=None: as_event(seq=s, kind="authority_granted", authority_id=aid, expires_at=exp)
revoke = lambda s, aid: as_event(seq=s, kind="authority_revoked", authority_id=aid)
reval = lambda s, ep, d: as_event(seq=s, kind="revalidated", epoch=ep, decision=d)
resumed = lambda s, ep: as_event(seq=s, kind="resumed", epoch=ep)
commit = lambda s, ep, aid=None, ts=None: as_event(seq=s, kind="effect_committed", epoch=ep, authority_id=aid, ts=ts)


CASES = {
    "seed 004: refund after the mandate expired": (
        [acq(1, 1), grant(2, "mandate-7", t(0)), commit(3, 1, "mandate-7", t(5))],
        {3: (("expired",), "mandate-7", None, t(0))}, []),
    "within the mandate's lifetime": (
        [acq(1, 1), grant(2, "mandate-7", t(10)), commit(3, 1, "mandate-7", t(5))], {}, []),
    "revoked before the effect": (
        [acq(1, 1), grant(2, "m"), revoke(3, "m"), commit(4, 1, "m")],
        {4: (("revoked",), "m", 3, None)}, []),
    "re-granted after a revocation: the latest grant decides": (
        [acq(1, 1), grant(2, "m"), revoke(3, "m"), grant(4, "m"), commit(5, 1, "m")], {}, []),
    "takeover without revalidation": (
        [acq(1, 1), grant(2, "m"), acq(3, 2), commit(4, 2, "m")],
        {4: (("unrevalidated_resume",), "resume@3", 3, None)}, []),
    "a revalidated takeover is clean": (
        [acq(1, 1), grant(2, "m"), acq(3, 2), reval(4, 2, "continue"), commit(5, 2, "m")], {}, []),
    "revalidation by the displaced epoch does not count": (
        [acq(1, 1), acq(2, 2), reval(3, 1, "continue"), commit(4, 2)],
        {4: (("unrevalidated_resume",), "resume@2", 2, None)}, []),
    "durable resume without revalidation": (
        [acq(1, 1), resumed(2, 1), commit(3, 1)], {3: (("unrevalidated_resume",), "resume@2", 2, None)}, []),
    "failed revalidation is terminal; a retry is a diagnostic": (
        [acq(1, 1), resumed(2, 1), reval(3, 1, "pause"), reval(4, 1, "continue"), commit(5, 1)],
        {5: (("failed_revalidation",), "revalidation@3", 3, None)}, [("revalidation_retry", 4)]),
    "a new grant after a failed revalidation restores authority": (
        [acq(1, 1), reval(2, 1, "terminate"), grant(3, "m2"), commit(4, 1, "m2")], {}, []),
    "an authority never granted is a diagnostic, once": (
        [acq(1, 1), grant(2, "m"), commit(3, 1, "other"), commit(4, 1, "other")], {}, [("ungranted_authority", 3)]),
}


@pytest.mark.parametrize("name", CASES)
def test_rules(name):
    events, verdicts, notes = CASES[name]
    assert run(*events) == (verdicts, notes)


def test_opt_in():
    assert opts_in("resumed", None) and opts_in("effect_committed", "m")
    assert not opts_in("effect_committed", None) and not opts_in("lease_acquired", None)


def test_compensation_takes_the_earliest_open_double_commit_before_it():
    doubles = [("pay", 9), ("pay", 15), ("mail", 12)]
    assert compensate(doubles, [("pay", 20)]) == {9}
    assert compensate(doubles, [("pay", 20), ("pay", 21)]) == {9, 15}
    assert compensate(doubles, [("pay", 5)]) == set()        # nothing precedes it
    assert compensate(doubles, [("pay", 10), ("pay", 11)]) == {9}  # 15 comes after both
