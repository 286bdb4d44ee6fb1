"""Small scenarios in canonical form whose findings are known, for ``shapes`` to write the way
teams' loggers do. Each event is a dict of canonical fields; ``rows`` and ``note`` are extras a
shape may show (a progress count in a message, a free-text note with escapes) and the twin drops.
"""

from __future__ import annotations

from typing import Any

Event = dict[str, Any]


def _ev(seq: int, key: str, kind: str, epoch: int | None, worker: str, reporter: str, **extra: Any) -> Event:
    out: Event = {"seq": seq, "workflow_key": key, "kind": kind}
    if epoch is not None:
        out["epoch"] = epoch
    out["worker"] = worker
    out.update(extra)
    out["reporter"] = reporter
    return out


_L, _R, _C = "ledger/export/2026-07-26", "reports/index/2026-07-26", "checkout/sync/cart-881"

#: SPEC section 5: one unsafe takeover (4 findings), one clean handover, one single owner.
SEED = [
    _ev(1, _L, "lease_acquired", 17, "alpha", "coordinator"),
    _ev(2, _R, "lease_acquired", 5, "gamma", "coordinator"),
    _ev(3, _L, "progress", 17, "alpha", "worker", rows=400),
    _ev(4, _C, "lease_acquired", 3, "delta", "coordinator"),
    _ev(5, _L, "lease_acquired", 18, "beta", "coordinator"),
    _ev(6, _L, "progress", 17, "alpha", "worker", rows=600),
    _ev(7, _L, "effect_attempted", 17, "alpha", "worker", effect_key="release-index/2026-07-26", sink="release-index"),
    _ev(8, _L, "effect_committed", 17, "alpha", "sink", effect_key="release-index/2026-07-26", sink="release-index"),
    _ev(9, _L, "effect_committed", 18, "beta", "sink", effect_key="release-index/2026-07-26", sink="release-index"),
    _ev(10, _R, "effect_committed", 5, "gamma", "sink", effect_key="fragment/part-1", sink="report-store"),
    _ev(11, _R, "lease_acquired", 6, "epsilon", "coordinator"),
    _ev(12, _R, "effect_committed", 6, "epsilon", "sink", effect_key="fragment/part-2", sink="report-store"),
    _ev(13, _C, "progress", 3, "delta", "worker", rows=12),
    _ev(14, _C, "effect_attempted", 3, "delta", "worker", effect_key="sync/cart-881", sink="cart-service"),
    _ev(15, _C, "effect_committed", 3, "delta", "sink", effect_key="sync/cart-881", sink="cart-service"),
    _ev(16, _C, "outcome_verified", None, "verifier", "verifier", effect_key="sync/cart-881"),
]

_P7, _P8 = "payments/capture/inv-7", "payments/capture/inv-8"

#: A fence that holds: rejections only (rejected_attempt), a lost heartbeat, one stale heartbeat.
FENCED_PAYMENTS = [
    _ev(1, _P7, "lease_acquired", 1, "w1", "coordinator"),
    _ev(2, _P7, "progress", 1, "w1", "worker", heartbeat="ok"),
    _ev(3, _P7, "progress", 1, "w1", "worker", heartbeat="lost"),
    _ev(4, _P7, "lease_acquired", 2, "w2", "coordinator"),
    _ev(5, _P7, "effect_attempted", 1, "w1", "worker", effect_key="payment:inv-7:capture", sink="psp"),
    _ev(6, _P7, "effect_attempted", 1, "w1", "sink", effect_key="payment:inv-7:capture", sink="psp",
        sink_result="rejected"),
    _ev(7, _P7, "effect_committed", 2, "w2", "sink", effect_key="payment:inv-7:capture", sink="psp"),
    _ev(8, _P7, "outcome_verified", None, "verifier", "verifier", effect_key="payment:inv-7:capture", sink="psp"),
    _ev(1, _P8, "lease_acquired", 1, "w1", "coordinator"),
    _ev(2, _P8, "effect_attempted", 1, "w1", "worker", effect_key="payment:inv-8:capture", sink="psp"),
    _ev(3, _P8, "lease_acquired", 2, "w2", "coordinator"),
    _ev(4, _P8, "effect_attempted", 1, "w1", "sink", effect_key="payment:inv-8:capture", sink="psp",
        sink_result="rejected"),
    _ev(5, _P8, "progress", 1, "w1", "worker", heartbeat="ok"),
]

_A17, _A18 = "agent/run-17", "agent/run-18"

#: A zombie re-execution: one effect key committed under two epochs, and an epoch leaked into
#: another's key (the same step under two keys); the keys hold quotes and spaces, a note escapes.
ZOMBIE_REEXECUTION = [
    _ev(1, _A17, "lease_acquired", 1, "w1", "coordinator"),
    _ev(2, _A17, "effect_committed", 1, "w1", "sink", effect_key='charge "run-17" step 3', sink="psp",
        step_id="step-3", note='first try\nwaited on "psp"'),
    _ev(3, _A17, "lease_acquired", 2, "w2", "coordinator"),
    _ev(4, _A17, "effect_committed", 2, "w2", "sink", effect_key='charge "run-17" step 3', sink="psp",
        step_id="step-3", note="replayed after a pause = 45 s"),
    _ev(1, _A18, "lease_acquired", 1, "w1", "coordinator"),
    _ev(2, _A18, "effect_committed", 1, "w1", "sink", effect_key="charge run-18 step 3 epoch=1", sink="psp",
        step_id="step-3"),
    _ev(3, _A18, "lease_acquired", 2, "w2", "coordinator"),
    _ev(4, _A18, "effect_committed", 2, "w2", "sink", effect_key="charge run-18 step 3 epoch=2", sink="psp",
        step_id="step-3"),
]

_E, _F = "ledger/export/2026-07-27", "reports/index/2026-07-27"

#: A takeover whose displaced owner still commits (stale attempt and commit, double commit),
#: beside a clean handover.
ECS_TAKEOVER = [
    _ev(1, _E, "lease_acquired", 3, "alpha", "coordinator"),
    _ev(1, _F, "lease_acquired", 8, "gamma", "coordinator"),
    _ev(2, _E, "progress", 3, "alpha", "worker"),
    _ev(3, _E, "lease_acquired", 4, "beta", "coordinator"),
    _ev(2, _F, "effect_committed", 8, "gamma", "sink", effect_key="fragment/part-1"),
    _ev(4, _E, "effect_attempted", 3, "alpha", "worker", effect_key="release/2026-07-27"),
    _ev(5, _E, "effect_committed", 3, "alpha", "sink", effect_key="release/2026-07-27"),
    _ev(3, _F, "lease_acquired", 9, "delta", "coordinator"),
    _ev(6, _E, "effect_committed", 4, "beta", "sink", effect_key="release/2026-07-27"),
    _ev(4, _F, "effect_committed", 9, "delta", "sink", effect_key="fragment/part-2"),
    _ev(7, _E, "outcome_verified", None, "verifier", "verifier", effect_key="release/2026-07-27"),
]

SCENARIOS: dict[str, list[Event]] = {"seed": SEED, "fenced_payments": FENCED_PAYMENTS,
                                     "zombie_reexecution": ZOMBIE_REEXECUTION, "ecs_takeover": ECS_TAKEOVER}
