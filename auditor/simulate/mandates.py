"""SPEC section 8 in the simulator: mandates that expire or are revoked during preemptions, and
the ground truth of the authority rules, bookkept from the coordinator's own state as each event
lands (never by running the auditor). A mixin of ``world.World``; the state is on ``world.Run``.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from ..core.model import Kind, Reporter

Run = Any  # ``world.Run``, named so here without importing the module that imports this one


class Mandates(StrEnum):
    """SPEC section 8: whether runs hold a mandate, and whether the gateway checks it."""

    NONE = "none"  # no authority events: the rules never apply
    CHECKED = "checked"  # the gateway refuses an effect whose mandate is revoked, expired or not revalidated
    UNCHECKED = "unchecked"  # the gateway checks the epoch fence (per mode) but not the mandate


class MandateRules:
    """The mandate half of ``World``: grants, validity, and the section 8 truth of each event.
    ``World`` provides ``record``, ``now`` and ``instant`` (simulated ms as RFC 3339)."""

    def _authority(self, run: Run, kind: Kind, epoch: int | None, sent: int,
                   fields: dict[str, Any]) -> tuple[str, ...]:
        """Move the log's mandate state past one event; for an effect, why it is unauthorized."""
        if run.mandate is None:
            return ()
        if kind is Kind.LEASE_ACQUIRED:
            run.acquisitions += 1
            run.resume_pending = run.resume_pending or run.acquisitions > 1
        elif kind is Kind.AUTHORITY_GRANTED:
            run.revoked = run.failed = False
        elif kind is Kind.AUTHORITY_REVOKED:
            run.revoked = True
        elif kind is Kind.REVALIDATED and epoch is not None and epoch >= run.epoch:
            run.resume_pending = False
            run.failed = run.failed or fields.get("decision") in ("pause", "terminate")
        elif kind in (Kind.EFFECT_ATTEMPTED, Kind.EFFECT_COMMITTED):
            return _authority_reasons(run, sent)
        return ()

    def _grant_mandate(self, run: Run) -> None:
        self.record(run, self.now, Kind.AUTHORITY_GRANTED, None, "coordinator", Reporter.COORDINATOR,
                    authority={"expires_at": self.instant(run.expires_ms), "scope": "charge<=50.00"})

    def _mandate_valid(self, run: Run, at: int) -> bool:
        return not run.revoked and not run.failed and at <= run.expires_ms


def _authority_reasons(run: Run, sent: int) -> tuple[str, ...]:
    """Why an effect recorded now has no valid mandate (SPEC section 8), from the log's state."""
    reasons = []
    if run.revoked:
        reasons.append("revoked")
    elif run.expires_ms < sent:
        reasons.append("expired")
    if run.failed:
        reasons.append("failed_revalidation")
    if run.resume_pending:
        reasons.append("unrevalidated_resume")
    return tuple(reasons)
