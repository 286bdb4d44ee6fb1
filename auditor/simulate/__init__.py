"""The preemption simulator: evidence whose truth is known, for the acceptance test and the benchmark.

``simulate`` runs the world of ``world.py`` with one injected preemption per run and returns the
events with their ground truth and the sinks' ledger; ``run_cli`` is the body of
``auditor simulate``; ``generate_log`` (``scale.py``) stamps simulated runs out to millions of
events for the scale benchmark and the larger report examples.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.model import Grade
from .scale import GeneratedLog, generate_log
from .world import DANGEROUS, Mandates, World
from .parts import CHARGE_CENTS, Injection, LeaseTiming, Mode, SimulateError, expected_json, open_text

__all__ = ["simulate", "Simulation", "run_cli", "generate_log", "GeneratedLog", "Mode", "Mandates", "Injection",
           "DANGEROUS", "CHARGE_CENTS", "SimulateError", "LeaseTiming"]


@dataclass(frozen=True)
class Simulation:
    """One simulated log and its ground truth.

    ``events`` are canonical event dicts in authoritative (``seq``) order. ``truth`` is every
    ``(grade, workflow_key, seq)`` the auditor must report, sorted by workflow key then seq.
    ``injected`` names the preemption of each workflow key (one per run).
    ``charges_per_run`` is what the bank applied per workflow key, in cents; the counters are the
    destinations' own ledger: ``double_applies`` (an effect applied again for a step already
    applied), ``stale_commits`` (applied under an epoch lower than the store's), ``rejected_attempts``
    (refusals by the gateway), ``replays`` (a stable key answered with the original receipt).
    """

    mode: Mode
    seed: int
    runs: int
    events: list[dict[str, Any]]
    truth: list[tuple[str, str, int]]
    injected: dict[str, str]
    charges_per_run: dict[str, int]
    double_applies: int
    stale_commits: int
    rejected_attempts: int
    replays: int
    stale_checkpoints_accepted: int
    mandates: Mandates = Mandates.NONE
    unauthorized_applies: int = 0  # effects a destination applied under no valid mandate
    mandate_refusals: int = 0  # effects the gateway refused for their mandate
    lease: LeaseTiming | None = None
    revoked_live: int = 0  # lease timing: takeovers of an owner that was still running

    @property
    def injections(self) -> dict[str, int]:
        """How many runs got each injection, every dangerous point listed."""
        counts = Counter(self.injected.values())
        return {i.value: counts[i.value] for i in DANGEROUS}

    def truth_counts(self) -> dict[str, int]:
        counts = Counter(g for g, _, _ in self.truth)
        return {g.value: counts[g.value] for g in Grade if counts[g.value]}

    def write(self, path: str | Path) -> None:
        """Write the events as JSONL (gzip when the path ends in ``.gz``), one per line, seq order."""
        with open_text(path) as out:
            out.writelines(json.dumps(ev) + "\n" for ev in self.events)

    def write_expected(self, path: str | Path) -> None:
        """Write the truth in the ``--expect`` format ``{"findings": [[grade, key, seq], ...]}``."""
        Path(path).write_text(expected_json(self.truth))


def simulate(runs: int = 200, seed: int = 0, mode: str = "fenced",
             lease: LeaseTiming | None = None, mandates: str = "none") -> Simulation:
    """Simulate ``runs`` runs, each with one injected preemption, in one gateway ``mode``.

    With ``lease``, nothing is injected: leases are granted and extended by heartbeats, and the
    coordinator reclaims a job whose lease ran out, so a lease too short for its heartbeat rhythm
    revokes workers that are still running (``revoked_live``) and a safe one does not.

    Deterministic (no wall clock, one seeded ``random.Random``): the same arguments give the same
    events and truth. The injections are spread evenly over the four dangerous points (counts
    differ by at most one), in a seeded order. Raises ``SimulateError`` for an unknown mode or
    fewer than one run. Holds the whole log in memory; for millions of events use ``generate_log``.
    """
    mode = _mode(mode)
    if runs < 1:
        raise SimulateError(f"runs is {runs}, expected at least 1")
    injections: list[Injection | None] = [DANGEROUS[i % len(DANGEROUS)] for i in range(runs)]
    random.Random(f"{seed}/injections").shuffle(injections)
    try:
        mandates = Mandates(mandates)
    except ValueError:
        raise SimulateError(f"mandates {mandates!r} is not one of {', '.join(m.value for m in Mandates)}") from None
    if lease is not None:
        injections = [None] * runs
    world = World(seed, [(mode, inj) for inj in injections], lease=lease, mandates=mandates)
    world.run()
    return Simulation(
        mode=mode,
        seed=seed,
        runs=runs,
        events=world.events,
        truth=[(g.value, wk, s) for g, wk, s in world.truth],
        injected={r.workflow_key: r.injection.value for r in world.runs if r.injection},
        charges_per_run={r.workflow_key: r.cents for r in world.runs},
        double_applies=world.double_applies,
        stale_commits=world.stale_commits,
        rejected_attempts=world.rejections,
        replays=world.replays,
        stale_checkpoints_accepted=world.stale_checkpoints_accepted,
        mandates=mandates,
        unauthorized_applies=world.unauthorized_applies,
        mandate_refusals=world.mandate_refusals,
        lease=lease,
        revoked_live=sum(r.revoked_live for r in world.runs),
    )


def run_cli(runs: int, seed: int, mode: str, out: Path, expected: Path | None = None,
            lease: LeaseTiming | None = None, mandates: str = "none") -> str:
    """The body of ``auditor simulate``: simulate, write the log (and the expected findings in the
    ``--expect`` format), and return the summary to print. Raises ``SimulateError`` for bad options
    (the CLI turns it into ``typer.BadParameter``) and ``OSError`` when a file cannot be written."""
    sim = simulate(runs, seed, mode, lease, mandates)
    sim.write(out)
    if expected is not None:
        sim.write_expected(expected)
    per_run = Counter(sim.charges_per_run.values())
    charged = ", ".join(f"{_dollars(c)} x{n}" for c, n in sorted(per_run.items()))
    lines = [
        f"simulated {sim.runs} runs, mode {sim.mode}, seed {sim.seed}: {len(sim.events)} events -> {out}",
        ("injected interleavings: " + ", ".join(f"{k} {v}" for k, v in sim.injections.items())
         if lease is None else
         f"leases: {lease.lease_ms / 1000:g} s, heartbeat every {lease.heartbeat_ms / 1000:g} s "
         f"+ up to {lease.jitter_ms / 1000:g} s of delay, {lease.miss_share:.0%} of heartbeats lost; "
         f"workers revoked while still running: {sim.revoked_live}"),
        f"bank: net charge per run {charged}",
        f"sinks: double applies {sim.double_applies}, stale commits {sim.stale_commits}, "
        f"rejected attempts {sim.rejected_attempts}, replays of a stable key {sim.replays}",
        f"checkpoint store: stale checkpoints accepted {sim.stale_checkpoints_accepted}",
        *([f"mandates ({sim.mandates}): effects applied without a valid mandate {sim.unauthorized_applies}, "
           f"refused by the gateway's authority check {sim.mandate_refusals}"]
          if sim.mandates is not Mandates.NONE else []),
        "ground truth: " + (", ".join(f"{g} {n}" for g, n in sim.truth_counts().items()) or "no findings")
        + (f" -> {expected}" if expected is not None else ""),
    ]
    return "\n".join(lines)


def _dollars(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"


def _mode(mode: str) -> Mode:
    try:
        return Mode(mode)
    except ValueError:
        raise SimulateError(
            f"mode is {mode!r}, expected one of {', '.join(m.value for m in Mode)}") from None
