"""What the live audit says about its findings: once per incident (and again when its severity
rises) a ``logging`` warning with the witness sentence, the user's callback and the OTel
metrics; its own warnings about bad evidence, rate-limited. A mixin of ``core.LiveAudit``,
reading the state that class keeps."""

from __future__ import annotations

import time
from typing import Any

from ..core.model import Confidence, Finding, Owner
from ..rules import confidence as rule_confidence

#: Warnings about bad evidence (unmapped records, capped spans): at most this many per minute,
#: then one line saying how many were suppressed. Their keys are fixed, so memory stays bounded.
WARNINGS_PER_MINUTE = 10


class Alerts:
    """Reporting findings and warnings for ``LiveAudit`` (its attributes: ``findings``, ``detector``,
    ``_metrics``, ``_alerted``, ``_lowered``, ``_log``, ``_logged``, ``_on_finding`` and the counters)."""

    def _report(self, findings: list[Finding]) -> None:
        for f in findings:
            self.findings.append(f)
            self._metrics.finding(f)
            if not self._alert_due(f):
                self.incident_updates += 1
                continue
            try:
                self._warn(f)
            except Exception:  # noqa: BLE001
                self._once("warn", "auditor: could not log a finding", exc_info=True)
            if self._on_finding is not None:
                try:
                    self._on_finding(f)
                except Exception:  # noqa: BLE001 - the user's callback must not stop the audit
                    self._once("callback", "auditor: the on_finding callback raised", exc_info=True)

    def _alert_due(self, f: Finding) -> bool:
        """True for an incident's first finding and for one that raises its severity."""
        key = f.incident_id or f.id
        before = self._alerted.get(key)
        if before is not None and before >= f.grade.rank:
            self._alerted.move_to_end(key)
            return False
        self._alerted[key] = f.grade.rank
        self._alerted.move_to_end(key)
        if len(self._alerted) > self._max_findings:  # bounded: the oldest incidents go first
            self._alerted.popitem(last=False)
        return True

    def confidence(self, f: Finding) -> Confidence:
        """How far the live evidence of ``f`` can be trusted (SPEC section 3, per finding)."""
        lowered = [self._lowered.get((f.workflow_key, s)) for s in (f.place, f.receipt_place) if s is not None]
        return rule_confidence([f], observed=Confidence.LOW in lowered, capped=Confidence.MEDIUM in lowered)

    def witness(self, f: Finding) -> str:
        """The witness sentence of one finding, in the words of ``explain.witness``."""
        from ..explain.incidents import witness

        transition = None
        if f.transition_place is not None:
            transition = self._owner_at(f.workflow_key, f.transition_place)
        return witness(transition, f.transition_seq, f.transition_position, [f])

    def _owner_at(self, key: str, seq: int) -> Owner | None:
        st = self.detector._keys.get(key)  # noqa: SLF001 - same package, read-only
        if st is None:
            return None
        for s, epoch, worker in zip(st.rec_seqs, st.rec_epochs, st.rec_workers):
            if s == seq:
                return Owner(worker, epoch)
        return None

    def _warn(self, f: Finding) -> None:
        from ..explain.incidents import at

        confidence = self.confidence(f)
        self._log.warning(
            "split-brain %s on %s at %s (confidence %s): %s", f.grade.value, f.workflow_key, at(f),
            confidence.value, self.witness(f),
            extra={"ownership.grade": f.grade.value, "ownership.workflow_key": f.workflow_key,
                   "ownership.seq": f.seq, "ownership.epoch": f.epoch, "auditor.finding_id": f.id,
                   "auditor.incident_id": f.incident_id, "auditor.confidence": confidence.value})

    def _publish_counts(self) -> None:
        d = self.detector
        now = (d.reclaims, d.stale_events, self.dropped_spans, self.unmapped, d.late_events, d.evicted_keys,
               self.persist_failures)
        before = self._reported
        self._reported = now
        self._metrics.counts(*(a - b for a, b in zip(now, before)))

    def _limited(self, msg: str, *args: Any) -> None:
        """A warning about bad evidence, rate-limited (``WARNINGS_PER_MINUTE``) with a fixed memory."""
        now = time.monotonic()
        start, n = self._warn_window
        if now - start >= 60.0:
            if self.suppressed_warnings:
                msg += f" ({self.suppressed_warnings} similar warnings suppressed in the last minute)"
                self.suppressed_warnings = 0
            start, n = now, 0
        if n >= WARNINGS_PER_MINUTE:
            self.suppressed_warnings += 1
            return
        self._warn_window = (start, n + 1)
        try:
            self._log.warning(msg, *args)
        except Exception:  # noqa: BLE001 - even a broken logging setup must not escape
            pass

    def _once(self, key: str, msg: str, *args: Any, exc_info: bool = False) -> None:
        if key in self._logged:
            return
        try:
            self._logged.add(key)
            self._log.warning(msg, *args, exc_info=exc_info)
        except Exception:  # noqa: BLE001 - even a broken logging setup must not escape
            pass
