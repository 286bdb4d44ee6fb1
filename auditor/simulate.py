"""The preemption simulator: a generator of evidence whose truth is known.

A deterministic discrete-event simulation of a lease store (the coordinator, which also owns the
authoritative sequence), ephemeral workers, a tool gateway in front of two destinations (a bank and
a mailer) and a checkpoint store. Each run is one workflow key: `plan` (a model call), `charge`
($50 at the bank) and `receipt` (an email), a checkpoint after each step. The first owner of every
run is preempted at one dangerous point of the protocol (`Injection`), a new owner is granted
epoch + 1 and resumes from the last accepted checkpoint, and the displaced owner may wake up and
carry on. Every event lands in one log in the order the store records it (`seq`); `ts` is the
simulated time at the source, so late arrivals have a `ts` that disagrees with `seq`.

The ground truth is bookkept while the simulation runs, from what the lease store, gateway and
destinations knew at the moment each event was recorded, never by running the auditor: that keeps
the acceptance test (the auditor finds exactly the truth) from being circular. `generate_log`
stamps simulated runs out at scale for the benchmark and the larger report examples.
"""

from __future__ import annotations

import gzip
import heapq
import io
import json
import random
from collections import Counter
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import IO, Any

from .model import Grade, Kind, Reporter, SinkResult


class SimulateError(ValueError):
    """A simulation option is out of range or unknown."""


class Mode(StrEnum):
    """How the tool gateway and the destinations protect an effect."""

    FENCED = "fenced"  # stable key per (run_id, step_id); the gateway checks the epoch
    UNFENCED = "unfenced"  # no epoch check, no idempotency key: every request is applied
    KEY_INCLUDES_EPOCH = "key-includes-epoch"  # epoch checked, but the key changes with it


class Injection(StrEnum):
    """Where the first owner of a run is preempted."""

    COMMIT_BEFORE_CHECKPOINT = "commit_before_checkpoint"  # effect recorded, checkpoint never written
    SLOW_MODEL_CALL = "slow_model_call"  # the lease expires while a model call is in flight
    LATE_ACK = "late_ack"  # a request sent before the new grant is answered after it
    LATE_CHECKPOINT = "late_checkpoint"  # a checkpoint of the old epoch lands after the new grant
    CRASH = "crash"  # the owner dies before any effect: a clean handover (scale logs only)


DANGEROUS: tuple[Injection, ...] = tuple(i for i in Injection if i is not Injection.CRASH)
STEPS = ("plan", "charge", "receipt")
SINKS = {"charge": "bank", "receipt": "mailer"}
CHARGE_CENTS = 5000
TTL_MS = 10_000
WORKERS = tuple(f"worker-{i:02d}" for i in range(1, 13))
T0 = datetime(2026, 9, 6, 2, 0, tzinfo=UTC)
_EPOCH_STRIDE = 64  # epochs of one run stay below base + this (generate_log chains runs on a key)


def _ts(ms: int) -> str:
    return f"{T0 + timedelta(milliseconds=ms):%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


@dataclass(slots=True)
class _Run:
    index: int
    run_id: str
    workflow_key: str
    mode: Mode
    injection: Injection | None
    first_epoch: int
    epoch: int = 0  # the lease store's current epoch: the highest granted
    holder: str | None = None
    checkpoint: int = -1  # index in STEPS of the last accepted checkpoint
    applied: Counter = field(default_factory=Counter)  # effect key -> times applied at the sink
    applied_steps: set = field(default_factory=set)
    key_epochs: dict = field(default_factory=dict)  # effect key -> epochs that committed it
    step_commits: dict = field(default_factory=dict)  # step_id -> {(epoch, effect key)}
    pending: dict = field(default_factory=dict)  # (epoch, effect key) -> [(attempt seq, stale)]
    cents: int = 0


_Command = tuple  # ("sleep", ms) or ("call", fn, *args): fn(process, *args) resumes it later
_Process = Generator[_Command, Any, None]


class _World:
    """The kernel (a time-ordered queue of callbacks) and every actor's state."""

    def __init__(self, seed: int | str, specs: list[tuple[Mode, Injection | None]],
                 verify_share: float = 0.25, drop_share: float = 0.0) -> None:
        self.rng = random.Random(seed)
        self.drop_share = drop_share  # requests lost on the way: attempts nobody ever answers
        self.now = 0
        self._queue: list[tuple[int, int, Callable[..., None], tuple]] = []
        self._order = 0
        self.seq = 0
        self.events: list[dict[str, Any]] = []
        self.sent: list[int] = []  # per event, the simulated time at its source (ms)
        self.truth: list[tuple[Grade, str, int]] = []
        self.runs = [
            _Run(i, f"run-{i:04d}", f"payments/run-{i:04d}", mode, inj, self.rng.randint(1, 40))
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
            self._after(start, self._acquire, run)
            if self.rng.random() < verify_share:
                self._after(start + 150_000, self._verify, run)

    def run(self) -> None:
        while self._queue:
            self.now, _, fn, args = heapq.heappop(self._queue)
            fn(*args)
        for run in self.runs:  # an attempt no destination ever answered stays a stale_attempt
            for attempts in run.pending.values():
                self.truth += [(Grade.STALE_ATTEMPT, run.workflow_key, s) for s, st in attempts if st]
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

    def _acquire(self, run: _Run) -> None:
        first = run.holder is None
        run.epoch = run.first_epoch if first else run.epoch + 1
        run.holder = self.rng.choice([w for w in WORKERS if w != run.holder])
        attrs = None if first else {"reason": "lease expired"}
        self._record(run, self.now, Kind.LEASE_ACQUIRED, run.epoch, run.holder,
                     Reporter.COORDINATOR, attrs=attrs)
        self._after(self.rng.randint(200, 1_000), self._resume, self._worker(run, run.holder, run.epoch))

    def _lose_lease(self, run: _Run, epoch: int) -> None:
        """The holder stops renewing now; the store grants epoch + 1 when the lease runs out."""
        left = self.rng.randint(TTL_MS // 2, TTL_MS)  # what was left of the last renewal
        self._after(left + self.rng.randint(100, 1_500), self._expire, run, epoch)

    def _expire(self, run: _Run, epoch: int) -> None:
        if run.epoch == epoch:
            self._acquire(run)

    # A worker: one owner epoch of one run, with the failpoints of its injection.

    def _worker(self, run: _Run, worker: str, epoch: int) -> _Process:
        rng = self.rng
        inject = run.injection if epoch == run.first_epoch else None
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
                else:
                    yield ("sleep", rng.randint(800, 4_000))
                self._checkpoint(run, worker, epoch, i, self._net(), {})
                continue
            key = self._effect_key(run, step, epoch)
            sent = self.now
            yield ("sleep", self._net())  # the outbox write: the attempt is durable before the call
            attrs = {"amount_cents": CHARGE_CENTS} if step == "charge" else None
            self._record(run, sent, Kind.EFFECT_ATTEMPTED, epoch, worker, Reporter.WORKER,
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

    @staticmethod
    def _effect_key(run: _Run, step: str, epoch: int) -> str:
        key = f"{'payment' if step == 'charge' else 'email'}:{run.run_id}:{step}"
        return f"{key}:e{epoch}" if run.mode is Mode.KEY_INCLUDES_EPOCH else key

    # The checkpoint store and the tool gateway.

    def _checkpoint(self, run: _Run, worker: str, epoch: int, index: int, delay: int,
                    attrs: dict[str, Any]) -> None:
        self._after(delay, self._land_checkpoint, run, worker, epoch, index, self.now, attrs)

    def _land_checkpoint(self, run: _Run, worker: str, epoch: int, index: int, sent: int,
                         attrs: dict[str, Any]) -> None:
        stale = epoch < run.epoch
        accepted = not stale or run.mode is Mode.UNFENCED
        if accepted:
            run.checkpoint = index  # an accepted stale write clobbers the newer snapshot
            self.stale_checkpoints_accepted += stale
        attrs = {"checkpoint": STEPS[index], **attrs, "write": "accepted" if accepted else "refused"}
        self._record(run, sent, Kind.PROGRESS, epoch, worker, Reporter.WORKER, STEPS[index], attrs=attrs)

    def _gateway(self, proc: _Process, run: _Run, worker: str, epoch: int, step: str, key: str,
                 delay: int) -> None:
        if self.drop_share and self.rng.random() < self.drop_share:
            self._after(30_000, self._resume, proc, "timeout")
            return
        self._after(delay + self.rng.randint(20, 300), self._arrive, proc, run, worker, epoch, step, key)

    def _arrive(self, proc: _Process, run: _Run, worker: str, epoch: int, step: str, key: str) -> None:
        """The gateway and its destination; the request names its worker and epoch in headers."""
        sink, fenced = SINKS[step], run.mode is not Mode.UNFENCED
        if fenced and epoch < run.epoch:
            verdict = "rejected"
            self.rejections += 1
            self._record(run, self.now, Kind.EFFECT_ATTEMPTED, epoch, worker, Reporter.SINK, step,
                         key, sink, SinkResult.REJECTED, {"reason": "stale epoch"})
        elif fenced and run.applied[key]:
            verdict = "replayed"  # the destination answers with the original receipt
            self.replays += 1
        else:
            verdict = "committed"
            self.stale_commits += epoch < run.epoch
            self.double_applies += step in run.applied_steps
            run.applied[key] += 1
            run.applied_steps.add(step)
            attrs = None
            if step == "charge":
                run.cents += CHARGE_CENTS
                attrs = {"amount_cents": CHARGE_CENTS}
            self._record(run, self.now, Kind.EFFECT_COMMITTED, epoch, worker, Reporter.SINK,
                         step, key, sink, attrs=attrs)
        self._after(self._net(), self._resume, proc, verdict)

    def _verify(self, run: _Run) -> None:
        for key in sorted(k for k in run.applied if k.startswith("payment:")):
            self._record(run, self.now, Kind.OUTCOME_VERIFIED, None, "reconciler", Reporter.VERIFIER,
                         "charge", key, "bank", attrs={"times_applied": run.applied[key]})

    # The authoritative log, and the truth bookkept as each event is recorded.

    def _record(self, run: _Run, sent: int, kind: Kind, epoch: int | None, worker: str,
                reporter: Reporter, step: str | None = None, key: str | None = None,
                sink: str | None = None, sink_result: SinkResult | None = None,
                attrs: dict[str, Any] | None = None) -> None:
        self.seq += 1
        seq, wk = self.seq, run.workflow_key
        ev: dict[str, Any] = {"seq": seq, "ts": _ts(sent), "workflow_key": wk, "kind": kind.value}
        for name, value in (("epoch", epoch), ("worker", worker), ("step_id", step),
                            ("effect_key", key), ("sink", sink), ("sink_result", sink_result),
                            ("reporter", reporter), ("attrs", attrs)):
            if value is not None:
                ev[name] = value.value if isinstance(value, StrEnum) else value
        self.events.append(ev)
        self.sent.append(sent)
        if kind in (Kind.LEASE_ACQUIRED, Kind.OUTCOME_VERIFIED):
            return
        stale = epoch < run.epoch
        found: list[tuple[Grade, int]] = []
        if kind is Kind.PROGRESS:
            if stale:
                found.append((Grade.STALE_ACTIVITY, seq))
        elif kind is Kind.EFFECT_ATTEMPTED and sink_result is None:
            run.pending.setdefault((epoch, key), []).append((seq, stale))
        elif kind is Kind.EFFECT_ATTEMPTED:  # a rejection: the receipt of every open attempt
            receipts = [s for s, st in run.pending.pop((epoch, key), []) if st]
            found += [(Grade.REJECTED_ATTEMPT, s) for s in receipts]
            if stale and not receipts:  # sent before the takeover, refused after it
                found.append((Grade.REJECTED_ATTEMPT, seq))
        else:
            found += [(Grade.STALE_ATTEMPT, s) for s, st in run.pending.pop((epoch, key), []) if st]
            if stale:
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
        with _open_text(path) as out:
            out.writelines(json.dumps(ev) + "\n" for ev in self.events)

    def write_expected(self, path: str | Path) -> None:
        """Write the truth in the ``--expect`` format ``{"findings": [[grade, key, seq], ...]}``."""
        Path(path).write_text(_expected_json(self.truth))


def simulate(runs: int = 200, seed: int = 0, mode: str = "fenced") -> Simulation:
    """Simulate ``runs`` runs, each with one injected preemption, in one gateway ``mode``.

    Deterministic: the same arguments give the same events and truth. The injections are spread
    evenly over the four dangerous points (counts differ by at most one), in a seeded order.
    """
    mode = _mode(mode)
    if runs < 1:
        raise SimulateError(f"runs is {runs}, expected at least 1")
    injections = [DANGEROUS[i % len(DANGEROUS)] for i in range(runs)]
    random.Random(f"{seed}/injections").shuffle(injections)
    world = _World(seed, [(mode, inj) for inj in injections])
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
    )


def run_cli(runs: int, seed: int, mode: str, out: Path, expected: Path | None = None) -> str:
    """Simulate, write the log (and the expected findings), and return the summary to print."""
    sim = simulate(runs, seed, mode)
    sim.write(out)
    if expected is not None:
        sim.write_expected(expected)
    cents = sorted(set(sim.charges_per_run.values()))
    lines = [
        f"simulated {sim.runs} runs, mode {sim.mode}, seed {sim.seed}: {len(sim.events)} events -> {out}",
        "injected interleavings: " + ", ".join(f"{k} {v}" for k, v in sim.injections.items()),
        f"bank: net charge per run {', '.join(_dollars(c) for c in cents)}; "
        f"double applies {sim.double_applies}, stale commits {sim.stale_commits}, "
        f"replays {sim.replays}",
        f"gateway: rejected attempts {sim.rejected_attempts}; "
        f"stale checkpoints accepted {sim.stale_checkpoints_accepted}",
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


def _open_text(path: str | Path) -> IO[str]:
    if str(path).endswith(".gz"):  # mtime 0: the same simulation gives the same bytes
        return io.TextIOWrapper(gzip.GzipFile(str(path), "wb", mtime=0), encoding="utf-8")
    return open(path, "w", encoding="utf-8")


def _expected_json(triples: Iterable[tuple[str, str, int]]) -> str:
    rows = ",\n".join("  " + json.dumps(list(t)) for t in triples)
    return '{"findings": [\n' + rows + "\n]}\n" if rows else '{"findings": []}\n'


# The scale generator: simulated runs stamped out many times.

_SCALE_MODES = ((Mode.FENCED, 0.8), (Mode.UNFENCED, 0.1), (Mode.KEY_INCLUDES_EPOCH, 0.1))
_SCALE_INJECTIONS = ((None, 0.6), (Injection.CRASH, 0.1)) + tuple((i, 0.075) for i in DANGEROUS)


@dataclass(frozen=True)
class GeneratedLog:
    """What ``generate_log`` wrote: exact counts, and the findings the auditor must report by grade."""

    path: Path
    events: int
    workflows: int
    runs: int
    findings: dict[str, int]


@dataclass(frozen=True, slots=True)
class _Chunk:
    """One simulated batch of concurrent runs, as line templates to be stamped out again and again.

    ``lines`` are ``(run index, %-format, epoch or 0, source ms)`` in seq order; the format takes
    ``seq``, ``ts``, ``wk``, ``run`` and ``epoch``. ``truth`` is ``(grade, line index)``.
    """

    runs: int
    lines: list[tuple[int, str, int, int]]
    truth: list[tuple[str, int]]
    span_ms: int
    sizes: list[int]  # lines per run


def generate_log(path: str | Path, events: int, seed: int = 0, workflows: int | None = None,
                 disorder: float = 0.01, expected_path: str | Path | None = None) -> GeneratedLog:
    """Write a large, realistic JSONL log of exactly ``events`` events, quickly.

    A few batches of concurrent runs are simulated (modes and injections mixed: mostly fenced and
    clean, some crashes, every dangerous interleaving, some requests lost) and stamped out with new
    workflow keys, seqs, epochs and times until ``events`` is reached; a clean filler workflow pads
    the last few events. With ``workflows``, runs are spread over that many keys, one after another
    on a key with higher epochs. ``disorder`` is the share of lines swapped with their neighbour in
    the file (``seq`` stays authoritative, so findings do not change). The ground truth comes from
    the simulation, so it is counted without auditing; ``expected_path`` also writes every triple.
    """
    if events < 1:
        raise SimulateError(f"events is {events}, expected at least 1")
    if workflows is not None and workflows < 1:
        raise SimulateError(f"workflows is {workflows}, expected at least 1")
    if not 0 <= disorder <= 1:
        raise SimulateError(f"disorder is {disorder}, expected a share between 0 and 1")
    rng = random.Random(f"{seed}/scale")
    per_chunk = min(128, workflows or 128)
    # about a thousand distinct simulated runs, however few run at once
    chunks = [_chunk(f"{seed}/chunk/{c}", per_chunk) for c in range(max(8, 1024 // per_chunk))]
    counts: Counter[str] = Counter()
    triples: list[tuple[str, str, int]] | None = [] if expected_path is not None else None
    written = instances = runs = 0
    keys: set[str] = set()
    stamp = _Stamper(rng, disorder)
    base_ms = 0
    with _open_text(path) as out:
        while written < events:
            chunk = rng.choice(chunks)
            keep = _fit(chunk, events - written)
            if not keep:
                break
            lines, truth = _select(chunk, keep)
            ids = []
            for r in range(chunk.runs):
                n = instances + r
                if workflows is None:
                    ids.append((f"payments/run-{n:07d}", f"run-{n:07d}", 0))
                else:
                    w, j = n % workflows, n // workflows
                    ids.append((f"payments/wf-{w:06d}", f"wf-{w:06d}-r{j}", j * _EPOCH_STRIDE))
            keys.update(ids[r][0] for r in keep)
            runs += len(keep)
            seq0 = written
            stamp.write(out, lines, ids, seq0, base_ms)
            for grade, i in truth:
                counts[grade] += 1
                if triples is not None:
                    triples.append((grade, ids[lines[i][0]][0], seq0 + i + 1))
            written += len(lines)
            instances += chunk.runs
            base_ms += chunk.span_ms + 1_000
        filler = events - written
        if filler:
            stamp.write(out, _filler(filler), [("payments/filler", "filler", 0)], written, base_ms)
            written += filler
            keys.add("payments/filler")
        stamp.flush(out)
    if expected_path is not None:
        triples.sort(key=lambda t: (t[1], t[2]))
        Path(expected_path).write_text(_expected_json(triples))
    return GeneratedLog(Path(path), written, len(keys), runs,
                        {g.value: counts[g.value] for g in Grade if counts[g.value]})


def _chunk(seed: str, runs: int) -> _Chunk:
    rng = random.Random(seed)
    modes, mode_w = zip(*_SCALE_MODES)
    injs, inj_w = zip(*_SCALE_INJECTIONS)
    specs = list(zip(rng.choices(modes, mode_w, k=runs), rng.choices(injs, inj_w, k=runs)))
    world = _World(seed, specs, drop_share=0.02)
    world.run()
    index = {r.workflow_key: r for r in world.runs}
    at = {(ev["workflow_key"], ev["seq"]): i for i, ev in enumerate(world.events)}
    lines = []
    for ev, sent in zip(world.events, world.sent):
        run = index[ev["workflow_key"]]
        epoch = ev.get("epoch", 0)
        if epoch >= _EPOCH_STRIDE:
            raise AssertionError(f"epoch {epoch} of {run.run_id} leaves its stride")
        lines.append((run.index, _line_format(ev, run.run_id), epoch, sent))
    truth = [(g.value, at[(wk, s)]) for g, wk, s in world.truth]
    sizes = Counter(r for r, _, _, _ in lines)
    return _Chunk(runs, lines, truth, max(world.sent), [sizes[r] for r in range(runs)])


def _line_format(ev: dict[str, Any], run_id: str) -> str:
    """The event as a %-format line: seq, ts, key, run id and epoch become placeholders."""

    def lit(value: Any) -> str:
        return json.dumps(value, separators=(",", ":")).replace("%", "%%")

    parts = ['"seq":%(seq)d', '"ts":"%(ts)s"', '"workflow_key":"%(wk)s"', f'"kind":{lit(ev["kind"])}']
    if "epoch" in ev:
        parts.append('"epoch":%(epoch)d')
    for name in ("worker", "step_id", "effect_key", "sink", "sink_result", "reporter", "attrs"):
        if name not in ev:
            continue
        text = lit(ev[name])
        if name == "step_id":
            text = lit(f"{run_id}/{ev[name]}")
        if name in ("step_id", "effect_key"):
            text = text.replace(run_id, "%(run)s")
            if "epoch" in ev:
                text = text.replace(f':e{ev["epoch"]}"', ':e%(epoch)d"')
        parts.append(f'"{name}":{text}')
    return "{" + ",".join(parts) + "}\n"


def _fit(chunk: _Chunk, room: int) -> set[int] | None:
    """The runs of ``chunk`` to stamp when only ``room`` events are left: all, or the first few."""
    if len(chunk.lines) <= room:
        return set(range(chunk.runs))
    keep, used = set(), 0
    for r in range(chunk.runs):
        if used + chunk.sizes[r] > room:
            break
        keep.add(r)
        used += chunk.sizes[r]
    return keep or None


def _select(chunk: _Chunk, keep: set[int]) -> tuple[list[tuple[int, str, int, int]], list[tuple[str, int]]]:
    if len(keep) == chunk.runs:
        return chunk.lines, chunk.truth
    new_index, lines = {}, []
    for i, line in enumerate(chunk.lines):
        if line[0] in keep:
            new_index[i] = len(lines)
            lines.append(line)
    return lines, [(g, new_index[i]) for g, i in chunk.truth if i in new_index]


def _filler(n: int) -> list[tuple[int, str, int, int]]:
    """One clean workflow: an acquisition, then heartbeats of the same owner."""
    head = _line_format({"kind": "lease_acquired", "epoch": 1, "worker": "worker-01",
                         "reporter": "coordinator"}, "filler")
    beat = _line_format({"kind": "progress", "epoch": 1, "worker": "worker-01", "reporter": "worker",
                         "attrs": {"heartbeat": True}}, "filler")
    return [(0, head, 1, 0)] + [(0, beat, 1, 1_000 * i) for i in range(1, n)]


class _Stamper:
    """Formats template lines with their new identity and writes them in big, slightly shuffled batches."""

    BATCH = 250_000

    def __init__(self, rng: random.Random, disorder: float) -> None:
        self.rng = rng
        self.disorder = disorder
        self.buf: list[str] = []
        # ts = day + time of day + millis, from tables: formatting a datetime per line is the slow part
        self._days: dict[int, str] = {}
        self._clock = [f"T{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}." for s in range(86_400)]
        self._millis = [f"{m:03d}Z" for m in range(1000)]

    def write(self, out: IO[str], lines: list[tuple[int, str, int, int]],
              ids: list[tuple[str, str, int]], seq0: int, base_ms: int) -> None:
        buf, clock, millis = self.buf, self._clock, self._millis
        values = [{"wk": wk, "run": rid} for wk, rid, _ in ids]
        offsets = [off for _, _, off in ids]
        start = int((T0 - T0.replace(hour=0, minute=0)).total_seconds() * 1000) + base_ms
        day_of = self._day
        for i, (r, fmt, epoch, ms) in enumerate(lines, seq0 + 1):
            t = start + ms
            sec, frac = divmod(t, 1000)
            day, sec = divmod(sec, 86_400)
            v = values[r]
            v["seq"] = i
            v["ts"] = day_of(day) + clock[sec] + millis[frac]
            v["epoch"] = epoch + offsets[r]
            buf.append(fmt % v)
        if len(buf) >= self.BATCH:
            self.flush(out)

    def _day(self, day: int) -> str:
        text = self._days.get(day)
        if text is None:
            text = self._days[day] = f"{T0.date() + timedelta(days=day):%Y-%m-%d}"
        return text

    def flush(self, out: IO[str]) -> None:
        buf, rng = self.buf, self.rng
        if len(buf) > 1:
            for _ in range(round(self.disorder * len(buf))):
                i = rng.randrange(len(buf) - 1)
                buf[i], buf[i + 1] = buf[i + 1], buf[i]
        out.write("".join(buf))
        buf.clear()
