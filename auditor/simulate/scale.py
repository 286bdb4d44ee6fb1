"""The scale generator: simulated runs stamped out to millions of events.

A few batches of concurrent runs are simulated once (modes and injections mixed) and turned into
line templates whose workflow key, run id, seq, epoch and time are placeholders; stamping them out
again and again writes ten million events in about a minute, and the ground truth of every copy is
the simulation's, so it is known without auditing.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

from ..core.model import Grade
from .world import DANGEROUS, World
from .parts import EPOCH_STRIDE, T0, Injection, Mode, SimulateError, expected_json, open_text


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
    with open_text(path) as out:
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
                    ids.append((f"payments/wf-{w:06d}", f"wf-{w:06d}-r{j}", j * EPOCH_STRIDE))
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
        Path(expected_path).write_text(expected_json(triples))
    return GeneratedLog(Path(path), written, len(keys), runs,
                        {g.value: counts[g.value] for g in Grade if counts[g.value]})


def _chunk(seed: str, runs: int) -> _Chunk:
    rng = random.Random(seed)
    modes, mode_w = zip(*_SCALE_MODES)
    injs, inj_w = zip(*_SCALE_INJECTIONS)
    specs = list(zip(rng.choices(modes, mode_w, k=runs), rng.choices(injs, inj_w, k=runs)))
    world = World(seed, specs, drop_share=0.02)
    world.run()
    index = {r.workflow_key: r for r in world.runs}
    at = {(ev["workflow_key"], ev["seq"]): i for i, ev in enumerate(world.events)}
    lines = []
    for ev, sent in zip(world.events, world.sent):
        run = index[ev["workflow_key"]]
        epoch = ev.get("epoch", 0)
        if epoch >= EPOCH_STRIDE:
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
