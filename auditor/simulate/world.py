"""The world of the simulation: a lease store, workers, a tool gateway, two sinks and the log.

A deterministic discrete-event simulation (one time-ordered queue of callbacks, workers written as
generators that yield what they wait for). The lease store (the coordinator) grants epochs and
owns the authoritative sequence: every event gets its ``seq`` when it lands in the one log, while
``ts`` is the simulated time at its source, so a late arrival carries a ``ts`` that disagrees with
its ``seq``. Each run is one workflow key: ``plan`` (a model call), ``charge`` ($50 at the bank)
and ``receipt`` (an email at the mailer), a checkpoint after each step. The first owner of a run is
preempted at its run's ``Injection``; the store grants epoch + 1 when the lease runs out and the new
owner resumes from the last accepted checkpoint, while the displaced one may wake up and go on.

The ground truth is bookkept in ``World.record`` as each event lands, from what the store, the
gateway and the sinks know at that moment (SPEC section 3 applied to the simulation's own state),
never by running the auditor: that keeps the acceptance test from being circular.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Generator
from enum import StrEnum
from typing import Any

from ..core.model import Grade, Kind, Reporter, SinkResult
from .mandates import Mandates, MandateRules
from .parts import (CHARGE_CENTS, LATE_ONE_IN, SINKS, STEPS, TOOLS, TTL_MS, WORKERS, Injection, LeaseTiming, Mode,
                    Run, rfc3339)


DANGEROUS: tuple[Injection, ...] = tuple(i for i in Injection if i is not Injection.CRASH)


_Command = tuple  # ("sleep", ms) or ("call", fn, *args): fn(process, *args) resumes it later
_Process = Generator[_Command, Any, None]


class World(MandateRules):
    """The kernel (a time-ordered queue of callbacks) and every actor's state."""

    instant = staticmethod(rfc3339)  # simulated milliseconds as RFC 3339, for mandates.py

    def __init__(self, seed: int | str, specs: list[tuple[Mode, Injection | None]],
                 verify_share: float = 0.25, drop_share: float = 0.0,
                 lease: LeaseTiming | None = None, mandates: Mandates = Mandates.NONE) -> None:
        self.rng = random.Random(seed)
        self.lease = lease
        self.mandates = Mandates(mandates)
        self.unauthorized_applies = 0  # effects a destination applied under no valid mandate
        self.mandate_refusals = 0
        self.drop_share = drop_share  # requests lost on the way: attempts nobody ever answers
        self.now = 0
        self._queue: list[tuple[int, int, Callable[..., None], tuple]] = []
        self._order = 0
        self.seq = 0
        self.events: list[dict[str, Any]] = []
        self.sent: list[int] = []  # per event, the simulated time at its source (ms)
        self.truth: list[tuple[Grade, str, int]] = []
        self.runs = [
            Run(i, f"run-{i:04d}", f"payments/run-{i:04d}", mode, inj, self.rng.randint(1, 40))
            for i, (mode, inj) in enumerate(specs)
        ]
        self.stale_commits = 0
        self.double_applies = 0
        self.rejections = 0
        self.replays = 0
        self.stale_checkpoints_accepted = 0
        start = 0
        for run in self.runs:
            start += self.rng.randint(1_500, 4_500)
            if self.mandates is not Mandates.NONE:
                run.mandate = f"mandate-{run.run_id}"
                run.expires_ms = start + self.rng.randint(6_000, 60_000)
                run.revalidates = self.rng.random() < 0.5
                self._after(start - 1, self._grant_mandate, run)
            self._after(start, self._acquire, run)
            if self.rng.random() < verify_share:
                self._after(start + 150_000, self._verify, run)

    def run(self) -> None:
        while self._queue:
            self.now, _, fn, args = heapq.heappop(self._queue)
            fn(*args)
        for run in self.runs:  # an attempt no destination ever answered stays open
            for attempts in run.pending.values():
                self.truth += [(Grade.UNAUTHORIZED_ATTEMPT if un else Grade.STALE_ATTEMPT, run.workflow_key, s)
                               for s, st, un in attempts if st or un]
        self.truth.sort(key=lambda t: (t[1], t[2], t[0].rank))

    def _after(self, delay: int, fn: Callable[..., None], *args: Any) -> None:
        heapq.heappush(self._queue, (self.now + delay, self._order, fn, args))
        self._order += 1

    def _resume(self, proc: _Process, value: Any = None) -> None:
        try:
            command = proc.send(value)
        except StopIteration:
            return
        if command[0] == "sleep":
            self._after(command[1], self._resume, proc)
        else:
            command[1](proc, *command[2:])

    def _net(self) -> int:
        return self.rng.randint(5, 80)

    # The lease store.

    def _acquire(self, run: Run) -> None:
        first = run.holder is None
        if not first and run.epoch in run.running:
            run.revoked_live += 1
        run.epoch = run.first_epoch if first else run.epoch + 1
        run.holder = self.rng.choice([w for w in WORKERS if w != run.holder])
        attrs = None if first else {"reason": "lease expired"}
        extra: dict[str, Any] = {}
        if self.lease is not None:
            attrs = {**(attrs or {}), "tool": TOOLS[run.index % len(TOOLS)]}
            extra = self._grant(run, run.epoch)
            self._resume(self._heartbeats(run, run.holder, run.epoch))
        self.record(run, self.now, Kind.LEASE_ACQUIRED, run.epoch, run.holder,
                    Reporter.COORDINATOR, attrs=attrs, **extra)
        run.running.add(run.epoch)
        self._after(self.rng.randint(200, 1_000), self._resume, self._worker(run, run.holder, run.epoch))

    # Heartbeat-driven leases (lease timing only).

    def _grant(self, run: Run, epoch: int) -> dict[str, Any]:
        """Grant or extend the lease of ``epoch`` from now; the reclaim is checked at its expiry."""
        run.lease_until = self.now + self.lease.lease_ms
        self._after(self.lease.lease_ms + self.rng.randint(100, 1_000), self._reclaim, run, epoch,
                    run.lease_until)
        return {"lease_until": rfc3339(run.lease_until)}

    def _reclaim(self, run: Run, epoch: int, until: int) -> None:
        """The coordinator's sweep: an expired lease that was not extended since is taken back."""
        if run.epoch == epoch and run.lease_until == until and self.now >= until and not run.done:
            self._acquire(run)

    def _heartbeats(self, run: Run, worker: str, epoch: int) -> _Process:
        """The owner's heartbeat loop: extend while the lease is still ours, stop when refused."""
        timing, rng = self.lease, self.rng
        attrs = {"tool": TOOLS[run.index % len(TOOLS)]}
        while True:
            late = rng.randrange(LATE_ONE_IN) == 0
            yield ("sleep", timing.heartbeat_ms + rng.randint(0, timing.jitter_ms if late else 500))
            if epoch not in run.running:
                return
            if rng.random() < timing.miss_share:
                self.record(run, self.now, Kind.PROGRESS, epoch, worker, Reporter.WORKER,
                            attrs=attrs, heartbeat="lost", reason="timeout")
                continue
            if run.epoch != epoch or self.now >= run.lease_until:
                # Zero rows updated: the lease is gone (reclaimed, or about to be).
                self.record(run, self.now, Kind.PROGRESS, epoch, worker, Reporter.WORKER,
                            attrs=attrs, heartbeat="lost", reason="zero_rows")
                return
            extra = self._grant(run, epoch)
            self.record(run, self.now, Kind.PROGRESS, epoch, worker, Reporter.WORKER,
                        attrs=attrs, heartbeat="ok", **extra)

    def _lose_lease(self, run: Run, epoch: int) -> None:
        """The holder stops renewing now; the store grants epoch + 1 when the lease runs out."""
        left = self.rng.randint(TTL_MS // 2, TTL_MS)  # what was left of the last renewal
        self._after(left + self.rng.randint(100, 1_500), self._expire, run, epoch)

    def _expire(self, run: Run, epoch: int) -> None:
        if run.epoch == epoch:
            if run.mandate is not None and not run.revoked and self.rng.random() < 0.35:
                # the coordinator withdraws the mandate of a run that lost its owner
                self.record(run, self.now, Kind.AUTHORITY_REVOKED, None, "coordinator", Reporter.COORDINATOR)
            self._acquire(run)

    # A worker: one owner epoch of one run, with the failpoints of its injection.

    def _worker(self, run: Run, worker: str, epoch: int) -> _Process:
        try:
            if (yield from self._steps(run, worker, epoch)):
                run.done = True
        finally:
            run.running.discard(epoch)

    def _steps(self, run: Run, worker: str, epoch: int) -> _Process:
        rng = self.rng
        inject = run.injection if epoch == run.first_epoch else None
        if run.mandate is not None and epoch != run.first_epoch and run.revalidates:
            # A resumed run checks its decision context against current policy before acting.
            valid = self._mandate_valid(run, self.now)
            self.record(run, self.now, Kind.REVALIDATED, epoch, worker, Reporter.COORDINATOR,
                        authority={"decision": "continue" if valid else "terminate"})
            if not valid:
                return  # a failed revalidation is terminal: hand the run to a human
        for i in range(run.checkpoint + 1, len(STEPS)):
            step = STEPS[i]
            if step == "plan":
                if inject is Injection.CRASH:
                    yield ("sleep", rng.randint(300, 3_000))
                    self._lose_lease(run, epoch)
                    return
                if inject is Injection.SLOW_MODEL_CALL:
                    # The streaming call blocks the loop that renews the lease.
                    self._lose_lease(run, epoch)
                    yield ("sleep", TTL_MS + rng.randint(3_000, 40_000))
                elif self.lease is not None:  # a long tool call, heartbeating as it goes
                    yield ("sleep", rng.randint(3, 8) * self.lease.heartbeat_ms)
                else:
                    yield ("sleep", rng.randint(800, 4_000))
                self._checkpoint(run, worker, epoch, i, self._net(), {})
                continue
            key = self._effect_key(run, step, epoch)
            sent = self.now
            yield ("sleep", self._net())  # the outbox write: the attempt is durable before the call
            attrs = {"amount_cents": CHARGE_CENTS} if step == "charge" else None
            self.record(run, sent, Kind.EFFECT_ATTEMPTED, epoch, worker, Reporter.WORKER,
                        step, key, attrs=attrs)
            delay = self._net()
            if inject is Injection.LATE_ACK and step == "charge":
                self._lose_lease(run, epoch)  # cut off as the call leaves: no renewals, no answer
                delay = TTL_MS + rng.randint(3_000, 20_000)
            verdict = yield ("call", self._gateway, run, worker, epoch, step, key, delay)
            if verdict == "rejected":
                return
            if verdict == "timeout":  # give up; whoever holds the lease next starts over
                self._lose_lease(run, epoch)
                return
            if step == "charge" and inject is Injection.COMMIT_BEFORE_CHECKPOINT:
                self._lose_lease(run, epoch)
                return
            if step == "charge" and inject is Injection.LATE_CHECKPOINT:
                self._checkpoint(run, worker, epoch, i, TTL_MS + rng.randint(3_000, 20_000),
                                 {"result": verdict})
                self._lose_lease(run, epoch)  # the VM is suspended with the write still buffered
                yield ("sleep", TTL_MS + rng.randint(5_000, 30_000))
                if rng.random() < 0.5:
                    return
                continue
            self._checkpoint(run, worker, epoch, i, self._net(), {"result": verdict})
        return True

    @staticmethod
    def _effect_key(run: Run, step: str, epoch: int) -> str:
        key = f"{'payment' if step == 'charge' else 'email'}:{run.run_id}:{step}"
        return f"{key}:e{epoch}" if run.mode is Mode.KEY_INCLUDES_EPOCH else key

    # The checkpoint store and the tool gateway.

    def _checkpoint(self, run: Run, worker: str, epoch: int, index: int, delay: int,
                    attrs: dict[str, Any]) -> None:
        self._after(delay, self._land_checkpoint, run, worker, epoch, index, self.now, attrs)

    def _land_checkpoint(self, run: Run, worker: str, epoch: int, index: int, sent: int,
                         attrs: dict[str, Any]) -> None:
        stale = epoch < run.epoch
        accepted = not stale or run.mode is Mode.UNFENCED
        if accepted:
            run.checkpoint = index  # an accepted stale write clobbers the newer snapshot
            self.stale_checkpoints_accepted += stale
        attrs = {"checkpoint": STEPS[index], **attrs, "write": "accepted" if accepted else "refused"}
        self.record(run, sent, Kind.PROGRESS, epoch, worker, Reporter.WORKER, STEPS[index], attrs=attrs)

    def _gateway(self, proc: _Process, run: Run, worker: str, epoch: int, step: str, key: str,
                 delay: int) -> None:
        if self.drop_share and self.rng.random() < self.drop_share:
            self._after(30_000, self._resume, proc, "timeout")
            return
        self._after(delay + self.rng.randint(20, 300), self._arrive, proc, run, worker, epoch, step, key)

    def _arrive(self, proc: _Process, run: Run, worker: str, epoch: int, step: str, key: str) -> None:
        """The gateway and its destination; the request names its worker and epoch in headers."""
        sink, fenced = SINKS[step], run.mode is not Mode.UNFENCED
        if (self.mandates is Mandates.CHECKED and run.mandate is not None
                and (not self._mandate_valid(run, self.now) or run.resume_pending)):
            verdict = "rejected"  # the authority token is checked with the idempotency key
            self.mandate_refusals += 1
            self.record(run, self.now, Kind.EFFECT_ATTEMPTED, epoch, worker, Reporter.SINK, step,
                        key, sink, SinkResult.REJECTED, {"reason": "mandate not valid"})
        elif fenced and epoch < run.epoch:
            verdict = "rejected"
            self.rejections += 1
            self.record(run, self.now, Kind.EFFECT_ATTEMPTED, epoch, worker, Reporter.SINK, step,
                        key, sink, SinkResult.REJECTED, {"reason": "stale epoch"})
        elif fenced and run.applied[key]:
            verdict = "replayed"  # the destination answers with the original receipt
            self.replays += 1
        else:
            verdict = "committed"
            self.stale_commits += epoch < run.epoch
            if run.mandate is not None:
                self.unauthorized_applies += not self._mandate_valid(run, self.now) or run.resume_pending
            self.double_applies += step in run.applied_steps
            run.applied[key] += 1
            run.applied_steps.add(step)
            attrs = None
            if step == "charge":
                run.cents += CHARGE_CENTS
                attrs = {"amount_cents": CHARGE_CENTS}
            self.record(run, self.now, Kind.EFFECT_COMMITTED, epoch, worker, Reporter.SINK,
                        step, key, sink, attrs=attrs)
        self._after(self._net(), self._resume, proc, verdict)

    def _verify(self, run: Run) -> None:
        for key in sorted(k for k in run.applied if k.startswith("payment:")):
            self.record(run, self.now, Kind.OUTCOME_VERIFIED, None, "reconciler", Reporter.VERIFIER,
                        "charge", key, "bank", attrs={"times_applied": run.applied[key]})

    # The authoritative log, and the truth bookkept as each event is recorded.

    def record(self, run: Run, sent: int, kind: Kind, epoch: int | None, worker: str,
               reporter: Reporter, step: str | None = None, key: str | None = None,
               sink: str | None = None, sink_result: SinkResult | None = None,
               attrs: dict[str, Any] | None = None, heartbeat: str | None = None,
               lease_until: str | None = None, reason: str | None = None,
               authority: dict[str, Any] | None = None) -> None:
        """Append one event at the next seq, and the findings it makes true (SPEC section 3).

        Staleness is the store's view now: the run's epoch is the highest acquired before this seq.
        An attempt stays open until a rejection or commit of its (epoch, effect key) resolves it.
        """
        self.seq += 1
        seq, wk = self.seq, run.workflow_key
        ev: dict[str, Any] = {"seq": seq, "ts": rfc3339(sent), "workflow_key": wk, "kind": kind.value}
        for name, value in (("epoch", epoch), ("worker", worker), ("step_id", step),
                            ("effect_key", key), ("sink", sink), ("sink_result", sink_result),
                            ("reporter", reporter), ("heartbeat", heartbeat),
                            ("lease_until", lease_until), ("reason", reason), ("attrs", attrs)):
            if value is not None:
                ev[name] = value.value if isinstance(value, StrEnum) else value
        if run.mandate is not None and kind not in (Kind.LEASE_ACQUIRED, Kind.PROGRESS, Kind.OUTCOME_VERIFIED,
                                                    Kind.REVALIDATED):
            ev["authority_id"] = run.mandate
        if authority:
            ev.update(authority)
        self.events.append(ev)
        self.sent.append(sent)
        reasons = self._authority(run, kind, epoch, sent, authority or {})
        if kind not in (Kind.PROGRESS, Kind.EFFECT_ATTEMPTED, Kind.EFFECT_COMMITTED):
            return
        stale = epoch < run.epoch
        found: list[tuple[Grade, int]] = []
        if kind is Kind.PROGRESS:
            if stale:
                found.append((Grade.STALE_ACTIVITY, seq))
        elif kind is Kind.EFFECT_ATTEMPTED and sink_result is None:
            run.pending.setdefault((epoch, key), []).append((seq, stale, bool(reasons)))
        elif kind is Kind.EFFECT_ATTEMPTED:  # a rejection: the receipt of every open attempt
            opened = run.pending.pop((epoch, key), [])
            found += [(Grade.REJECTED_ATTEMPT, s) for s, st, un in opened if st or un]
            stale_receipts = any(st for _, st, _ in opened)
            resolved_unauthorized = any(un and not st for _, st, un in opened)
            # refused after its attempt was judged: a finding of its own only when it resolved nothing
            if (stale and not stale_receipts) or (reasons and not stale_receipts and not resolved_unauthorized):
                found.append((Grade.REJECTED_ATTEMPT, seq))
        else:
            found += [(Grade.UNAUTHORIZED_ATTEMPT if un else Grade.STALE_ATTEMPT, s)
                      for s, st, un in run.pending.pop((epoch, key), []) if st or un]
            if reasons:
                found.append((Grade.UNAUTHORIZED_COMMIT, seq))
            elif stale:
                found.append((Grade.STALE_COMMIT, seq))
            epochs = run.key_epochs.setdefault(key, set())
            commits = run.step_commits.setdefault(step, set()) if step is not None else set()
            new_for_key = bool(epochs) and epoch not in epochs
            unstable = epoch not in {e for e, _ in commits} and any(k != key for _, k in commits)
            if new_for_key or unstable:
                found.append((Grade.DOUBLE_COMMIT, seq))
            epochs.add(epoch)
            commits.add((epoch, key))
        self.truth += [(grade, wk, s) for grade, s in found]


# The files a simulation writes.


