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

from ...core.fields import DECISIONS, FIELDS, HEARTBEATS, REPORTERS, SINK_RESULTS, name_key
from ...core.instants import epoch_seconds, instant
from ..vocabulary import DEFAULT
from ..sample import Sample

#: Names teams give each field, best first (``name_key`` form; a dotted name is a whole path, a
#: plain one also matches a nested member's last name: ``labels.job``). The field's own name and
#: built-in aliases are read without an entry and come first.
NAMES: dict[str, tuple[str, ...]] = {
    "kind": ("event.action", "msg", "message", "event", "action", "event.type", "event_type", "type", "body"),
    "workflow_key": ("workflow", "workflow_id", "job_key", "task_id", "task", "lease.key", "lease_key",
                     "lease.name", "run", "key"),
    "epoch": ("lease.token", "fencing_token", "token", "fence", "fence_token", "lease_token", "lease.epoch",
              "term", "generation", "owner_epoch", "lease_epoch"),
    "seq": ("event.sequence", "sequence", "revision", "rev", "mod_revision", "seq_no", "seqno", "offset",
            "log_offset", "lsn", "version", "index"),
    "ts": ("@timestamp", "timestamp", "time", "t", "datetime", "otel.time", "event.created", "date"),
    "worker": ("host.name", "worker_id", "hostname", "host", "instance", "instance_id", "pod", "node",
               "owner", "holder", "agent.name", "service.instance.id"),
    "effect_key": ("effect.key", "effect_id", "idem", "idempotency", "idempotency_key", "dedupe_key",
                   "dedup_key", "request_key", "operation_id"),
    "sink": ("effect.sink", "destination", "target", "downstream"),
    "sink_result": ("effect.result", "result", "outcome"),
    "reporter": ("reported_by", "source"),
    "step_id": ("step", "stage"),
    "lease_until": ("lease.until", "lease.expires_at", "lease_expires", "expires"),
    "authority_id": ("mandate_id", "mandate", "grant_id"),
}
#: The order fields are placed in: the key first (seq's shape is read per key), then epoch, seq, ts
#: and kind, every other field in the registry's order (core/fields.py), event_id last.
_FIRST, _LAST = ("workflow_key", "epoch", "seq", "ts", "kind"), ("event_id",)
ORDER = (*_FIRST, *(f for f in FIELDS if f not in _FIRST + _LAST), *_LAST)

_INTEGER = re.compile(r"[+-]?[0-9]+")
_CLOSED = {"sink_result": SINK_RESULTS, "reporter": REPORTERS, "heartbeat": HEARTBEATS, "decision": DECISIONS}


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
    if _INTEGER.fullmatch(text):
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
                n = int(str(v).strip())
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
    if f in ("ts", "lease_until", "expires_at"):
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
    """One ``FieldChoice`` per canonical field found, in ``ORDER``; a path serves one field."""
    used: set[str] = set()
    out: list[FieldChoice] = []
    for f in ORDER:
        ranked = sorted((r, p) for p, st in stats.items()
                        if p not in used and (r := _rank(f, p)) is not None and _fits(f, st))
        if f == "seq":
            ranked = [(r, p) for r, p in ranked if _ordered(sample, p, where_key(out)) >= 0.8]
        if not ranked:
            continue
        rank, path = ranked[0]
        used.add(path)
        st = stats[path]
        choice = FieldChoice(f, evidence=_evidence(f, st, len(sample.lines), sample, out))
        if rank < 1 and "." not in path:
            choice.as_is = path
        else:
            choice.path = path
            sure = rank < 4 or (f == "seq" and _ordered(sample, path, where_key(out)) >= 0.95)
            choice.confidence = "high" if sure and st.lines >= 0.25 * len(sample.lines) else "medium"
        out.append(choice)
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
        if v is None or shape_of(v) != "int":
            continue
        key = line.leaves.get(key_path) if key_path else None
        n = int(str(v).strip())
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
