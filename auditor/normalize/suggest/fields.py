"""Which member of a sampled log gives each canonical field (``auditor map``): by name (the
field's own spellings and aliases, read as they are, else names teams use for it, nested or not)
and by the shape of its values (integers increasing per key for ``seq``, small integers that step
up at acquisitions for ``epoch``, instants for ``ts``, a closed list for the enumerations)."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ...core.fields import FIELDS, REGISTRY, TIME_FIELDS, name_key
from ...core.instants import epoch_seconds, instant
from ..vocabulary import DEFAULT
from ..sample import Sample, as_int
from .values import along, effect_key_like, epoch_like, reporter_like, seq_like, shared, sink_like

#: Names teams give each field, best first (``name_key`` form; a dotted name is a whole path, a
#: plain one also matches a nested member's last name: ``labels.job``). The field's own name and
#: built-in aliases are read without an entry and come first.
NAMES: dict[str, tuple[str, ...]] = {
    "kind": ("event.action", "msg", "message", "event", "action", "event.type", "event_type", "type", "body"),
    "workflow_key": ("workflow", "workflow_id", "job_key", "task_id", "task", "lease.key", "lease_key",
                     "lease.name", "lease_name", "lock_path", "lock", "election", "lease", "shard", "shard_id",
                     "pipeline", "pipeline_id", "order_id", "batch_id", "partition", "order", "run", "key"),
    "epoch": ("lease.token", "fencing_token", "token", "fence", "fence_token", "lease_token", "lease.epoch",
              "term", "generation", "owner_epoch", "lease_epoch", "czxid", "create_revision", "lease_transitions"),
    "seq": ("event.sequence", "sequence", "revision", "rev", "mod_revision", "zxid", "seq_no", "seqno", "offset",
            "log_offset", "lsn", "version", "index"),
    "ts": ("@timestamp", "timestamp", "time", "t", "datetime", "otel.time", "event.created", "date"),
    "worker": ("service.node.name", "worker.id", "worker_id", "holder", "identity", "client_id", "host.name", "hostname", "host", "instance", "instance_id", "pod", "node",
               "owner", "agent.name", "service.instance.id"),
    "effect_key": ("effect.key", "effect_id", "idem", "idempotency", "idempotency_key", "dedupe_key",
                   "dedup_key", "request_key", "operation_id"),
    "sink": ("effect.sink", "destination", "destination.address", "target", "downstream", "peer.service"),
    "sink_result": ("effect.result", "result", "outcome"),
    "reporter": ("reported_by", "role", "component", "event.provider", "provider", "source"),
    "step_id": ("step", "step_name", "stage"),
    "lease_until": ("lease.until", "lease.expires_at", "lease_expires", "expires"),
    "authority_id": ("mandate_id", "mandate", "grant_id"),
}
#: The order fields are placed in: the key first (seq's shape is read per key), then epoch, seq, ts
#: and kind, every other field in the registry's order (core/fields.py), event_id last.
_FIRST, _LAST = ("workflow_key", "epoch", "seq", "ts", "kind"), ("event_id",)
ORDER = (*_FIRST, *(f for f in FIELDS if f not in _FIRST + _LAST), *_LAST)

_INTEGER = re.compile(r"[+-]?[0-9]+")
#: Each enumeration's closed list of values, from the registry: a member holding them is the field.
_CLOSED = {s.name: s.values for s in REGISTRY if s.role == "enum"}


@dataclass
class PathStats:
    """What one member (by its dotted path) holds across the sample."""

    path: str
    lines: int = 0
    shapes: Counter = field(default_factory=Counter)   # int, text, time, number, bool, nested, null
    values: dict[str, int] = field(default_factory=dict)  # up to 64 distinct values as text, with counts
    low: int | None = None
    high: int | None = None

    def share(self, *shapes: str) -> float:
        return sum(self.shapes[s] for s in shapes) / self.lines if self.lines else 0.0

    def examples(self, n: int = 3) -> list[str]:
        return list(self.values)[:n]


@dataclass
class FieldChoice:
    """Where a canonical field comes from: ``path`` (an entry to write), ``as_is`` (a spelling
    read without one), or neither; with the evidence and a confidence."""

    field: str
    path: str | None = None
    as_is: str | None = None
    evidence: str = ""
    confidence: str = "high"


def shape_of(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "number"
    if isinstance(v, (dict, list)):
        return "nested"
    text = str(v).strip()
    if _INTEGER.fullmatch(text) or (text[:2].lower() == "0x" and as_int(text) is not None):
        return "int"
    if text[:1].isdigit() and instant(text) is not None:
        return "time"
    return "text"


def path_stats(sample: Sample) -> dict[str, PathStats]:
    out: dict[str, PathStats] = {}
    shapes: dict[Any, str] = {}  # a log repeats its values: each shape is read once
    for line in sample.lines:
        for path, v in line.leaves.items():
            st = out.get(path)
            if st is None:
                st = out[path] = PathStats(path)
            st.lines += 1
            shape = shapes.get(v) if isinstance(v, str) else None
            if shape is None:
                shape = shape_of(v)
                if isinstance(v, str) and len(shapes) < 100_000:
                    shapes[v] = shape
            st.shapes[shape] += 1
            if shape == "int":
                n = as_int(v) if not isinstance(v, str) or v.strip()[:2].lower() == "0x" else int(v.strip())
                st.low = n if st.low is None else min(st.low, n)
                st.high = n if st.high is None else max(st.high, n)
            text = v if isinstance(v, str) else str(v)
            if text in st.values:
                st.values[text] += 1
            elif len(st.values) < 64:
                st.values[text] = 1
    return out


def _fits(f: str, st: PathStats) -> bool:
    """Whether the values of ``st`` have the shape field ``f`` holds."""
    if f in ("epoch", "seq"):
        return st.share("int") >= 0.95 and (f == "seq" or (st.low or 0) >= 0)
    if f == "ts" or f in TIME_FIELDS:  # the event's time and the registry's instants
        return st.share("time") >= 0.9 or (st.share("number", "int") >= 0.9 and _epochish(st))
    if f in _CLOSED:
        return sum(c for v, c in st.values.items() if v.strip().lower() in _CLOSED[f]) >= 0.9 * st.lines
    if f == "kind":
        return st.share("text") >= 0.9
    return st.share("text", "int") >= 0.9


def _epochish(st: PathStats) -> bool:
    return all(epoch_seconds(v)[1] is not None for v in st.examples(8))


def _rank(f: str, path: str) -> float | None:
    """How well ``path`` names field ``f`` (lower is better), or None."""
    key = ".".join(name_key(p) for p in path.split("."))
    hit = DEFAULT.field_of(key) if "." not in path else None
    if hit is not None and hit[0] == f:
        return hit[1] / 100  # the field's own name, then its aliases: read as they are
    names = NAMES.get(f, ())
    if key in names:
        return 1 + names.index(key)
    last = key.rsplit(".", 1)[-1]
    own = DEFAULT.field_of(last)
    if "." in key and own is not None and own[0] == f:
        return 0.5 + own[1] / 100  # labels.fencing_token: an alias, nested
    if "." in key and last in names:
        return 1.5 + names.index(last)
    return None


def choose_fields(sample: Sample, stats: dict[str, PathStats]) -> list[FieldChoice]:
    """One ``FieldChoice`` per canonical field found, in ``ORDER`` (``epoch`` may come from several
    paths that never meet on one line); a path serves one field. A field is found by name and
    shape, and ``seq``, ``epoch``, ``effect_key``, ``sink`` and ``reporter`` by their values too."""
    used: set[str] = set()
    out: list[FieldChoice] = []
    n = len(sample.lines)
    memo: dict[tuple, Any] = {}  # each member is read along the keys once, whichever field asks
    for f in ORDER:
        ranked = sorted((r, p) for p, st in stats.items()
                        if p not in used and (r := _rank(f, p)) is not None and _fits(f, st)
                        and _by_value(f, sample, stats, p, out, True, memo))
        ranked += sorted((100 - stats[p].lines / max(n, 1), p) for p in stats
                         if p not in used and p not in {q for _r, q in ranked}
                         and _by_value(f, sample, stats, p, out, False, memo))
        if not ranked:
            continue
        rank, path = ranked[0]
        used.add(path)
        out.append(_choice(f, rank, path, sample, stats, out))
        if f == "epoch":  # the sink's copy of the token beside the worker's, never on one line
            for _r, other in ranked[1:]:
                if not any(_meet(sample, other, c.path or c.as_is) for c in out if c.field == "epoch"):
                    used.add(other)
                    out.append(_choice(f, _r, other, sample, stats, out))
    return out


def _choice(f: str, rank: float, path: str, sample: Sample, stats: dict[str, PathStats],
            out: list[FieldChoice]) -> FieldChoice:
    st = stats[path]
    choice = FieldChoice(f, evidence=_evidence(f, st, len(sample.lines), sample, out))
    if rank < 1 and "." not in path:
        choice.as_is = path
        return choice
    choice.path = path
    sure = rank < 4 or (rank >= 99 and f in ("seq", "epoch", "effect_key")) or (
        f == "seq" and _ordered(sample, path, where_key(out)) >= 0.95)
    choice.confidence = "high" if sure and st.lines >= 0.25 * len(sample.lines) else "medium"
    if rank >= 99:
        choice.evidence += "; found by its values, not its name"
    return choice


def _clock(st: PathStats) -> bool:
    """Integers that read as instants (seconds, milliseconds, microseconds or nanoseconds since 1970,
    between the years 2000 and 2100)."""
    if st.low is None or st.high is None:
        return False
    return any(946_684_800 * m <= st.low and st.high <= 4_102_444_800 * m for m in (1, 10**3, 10**6, 10**9))


def _meet(sample: Sample, a: str, b: str) -> bool:
    return any(a in line.leaves and b in line.leaves for line in sample.lines)


#: Names of a workflow key that, holding integers, are something else (a Kafka partition, an order).
_COUNTED = frozenset(("partition", "order", "shard", "batch_id", "order_id"))
_TIME_WORDS = ("time", "timestamp", "ts", "t", "at", "date", "created", "updated", "nanos", "millis")


def _by_value(f: str, sample: Sample, stats: dict[str, PathStats], path: str, chosen: list[FieldChoice],
              named: bool, memo: dict[tuple, Any]) -> bool:
    """Whether the values of ``path`` read as field ``f`` (``named``: the name already says so,
    the values must not contradict it; else the values alone must say it)."""
    st = stats[path]
    key = where_key(chosen)
    last = name_key(path.rsplit(".", 1)[-1])
    if f in ("seq", "epoch"):
        if st.share("int") < 0.95 or (st.low or 0) < 0 or last in _TIME_WORDS or "time" in last:
            return False
        if not named and _clock(st):
            return False  # increasing and unique, but a worker's clock is never the order
        a = memo.get(("along", path, key))
        if a is None:
            a = memo[("along", path, key)] = along(sample, path, key)
        if f == "seq":
            # its name says the order: unique per key is enough (buffered lines come late in the file)
            return seq_like(a) or (named and (a.pairs == 0 or (a.lines >= 2 and a.unique >= 0.99)))
        return (named and not seq_like(a)) or epoch_like(a)
    if f == "workflow_key" and last in _COUNTED:
        return named and st.share("text") >= 0.9  # a Kafka partition or a sort order is a number
    if f == "kind":
        # a constant (ECS event.kind = "event") is never the kind, unless it is a kind's name
        return named and (len(st.values) >= 2 or all(DEFAULT.kind_of(v) is not None for v in st.values))
    if f == "effect_key":
        if st.share("text") < 0.9 or path == key:
            return False
        if named:
            return True
        s = memo.get(("shared", path, key))
        if s is None:
            s = memo[("shared", path, key)] = shared(sample, path, key)
        key_lines = stats[key].lines if key in stats else len(sample.lines)
        return effect_key_like(s, key_lines)
    if f == "sink":
        effect = next((c.path or c.as_is for c in chosen if c.field == "effect_key"), None)
        return named or (effect is not None and st.share("text") >= 0.9 and st.lines <= stats[effect].lines
                         and sink_like(shared(sample, path, key, effect)))
    if f == "reporter":
        return named or reporter_like(st.values, st.lines)
    return named


def left_behind(sample: Sample, stats: dict[str, PathStats], chosen: list[FieldChoice]) -> list[tuple[str, str]]:
    """Integer members left in ``attrs`` whose values look like the authoritative order (unique
    and increasing per key) or an owner epoch (stepping up per key): ``(path, field)``."""
    used = {c.path or c.as_is for c in chosen}
    key = where_key(chosen)
    out = []
    for path, st in sorted(stats.items()):
        last = name_key(path.rsplit(".", 1)[-1])
        if path in used or st.share("int") < 0.95 or last in _TIME_WORDS or "time" in last:
            continue
        a = along(sample, path, key)
        if seq_like(a) and a.pairs:
            out.append((path, "seq"))
        elif epoch_like(a):
            out.append((path, "epoch"))
    return out


def where_key(chosen: list[FieldChoice]) -> str | None:
    """The member the workflow key was found in, if it was."""
    return next((c.path or c.as_is for c in chosen if c.field == "workflow_key"), None)


def _ordered(sample: Sample, path: str, key_path: str | None) -> float:
    """The share of a key's consecutive lines (in file order) whose ``path`` value increases."""
    last: dict[Any, int] = {}
    up = pairs = 0
    for line in sample.lines:
        v = line.leaves.get(path)
        n = as_int(v)
        if n is None:
            continue
        key = line.leaves.get(key_path) if key_path else None
        if key in last:
            pairs += 1
            up += n > last[key]
        last[key] = n
    return up / pairs if pairs else 1.0


def _evidence(f: str, st: PathStats, n: int, sample: Sample, chosen: list[FieldChoice]) -> str:
    said = f"{st.lines:,} of {n:,} lines"
    if f in ("epoch", "seq") and st.low is not None:
        said += f"; integers {st.low}..{st.high}"
        if f == "seq":
            said += f", increasing per key on {_ordered(sample, st.path, where_key(chosen)):.0%} of steps"
        return said
    shown = ", ".join(_short(v) for v in st.examples())
    more = "" if len(st.values) <= 3 else f" ({len(st.values)}{'+' if len(st.values) >= 64 else ''} distinct)"
    return f"{said}; e.g. {shown}{more}"


def _short(v: str) -> str:
    """A value as a comment shows it: quoted, escaped (a newline would end the comment), cut."""
    text = v if len(v) <= 40 else v[:39] + "\u2026"
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")
