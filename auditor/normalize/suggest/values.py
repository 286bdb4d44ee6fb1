"""What the values of a member say it is, along each workflow key (``auditor map``, SPEC section 2
revision 3.1): ``seq`` increases along each key's lines and is unique per key; an ``epoch`` is
constant through one owner's run and steps up at acquisitions (each key's values, in the order
they first appear, increase); an ``effect_key`` is a string that several lines of one key share
(attempt and commit) and that belongs to one key; a ``worker`` is constant per epoch; a
``reporter`` names coordinator, sink, worker or verifier.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ...core.fields import REPORTERS
from ..sample import Sample, as_int


@dataclass
class Along:
    """One integer member read along each key, in file order."""

    lines: int = 0          # lines giving the key and an integer here
    pairs: int = 0          # consecutive lines of one key
    up: int = 0             # ... whose value increases
    repeats: int = 0        # lines whose (key, value) was seen before
    keys_moving: int = 0    # keys with two values or more
    keys_rising: int = 0    # ... whose values, in the order they first appear, increase
    distinct: int = 0

    @property
    def increasing(self) -> float:
        return self.up / self.pairs if self.pairs else 0.0

    @property
    def unique(self) -> float:
        return 1 - self.repeats / self.lines if self.lines else 0.0


def along(sample: Sample, path: str, key_path: str | None) -> Along:
    out = Along()
    last: dict[Any, int] = {}
    seen: dict[Any, list[int]] = defaultdict(list)
    pairs: set[tuple[Any, int]] = set()
    values: set[int] = set()
    for line in sample.lines:
        n = as_int(line.leaves.get(path))
        if n is None:
            continue
        key = line.leaves.get(key_path) if key_path else None
        if key_path and key in (None, ""):
            continue
        key = str(key)
        out.lines += 1
        values.add(n)
        if key in last:
            out.pairs += 1
            out.up += n > last[key]
        last[key] = n
        if (key, n) in pairs:
            out.repeats += 1
        else:
            pairs.add((key, n))
            seen[key].append(n)
    out.distinct = len(values)
    for firsts in seen.values():
        if len(firsts) >= 2:
            out.keys_moving += 1
            out.keys_rising += all(a < b for a, b in zip(firsts, firsts[1:]))
    return out


def seq_like(a: Along) -> bool:
    """Unique per key and increasing along most of each key's lines (late lines are allowed)."""
    return a.lines >= 2 and a.unique >= 0.99 and a.increasing >= 0.8


def epoch_like(a: Along) -> bool:
    """Repeats within a key (one owner's run), and where a key's value changes it steps up."""
    return (a.lines >= 2 and a.distinct >= 2 and a.repeats >= 0.3 * a.lines and a.keys_moving >= 1
            and a.keys_rising >= 0.9 * a.keys_moving)


@dataclass
class Shared:
    """One text member: how its values recur and which keys they belong to."""

    lines: int = 0
    distinct: int = 0
    recurring: int = 0      # distinct values given on two lines or more
    one_key: int = 0        # distinct values seen under one workflow key only
    with_effect: int = 0    # lines that also give ``effect_path``


def shared(sample: Sample, path: str, key_path: str | None, effect_path: str | None = None) -> Shared:
    counts: dict[str, int] = {}
    keys: dict[str, set] = defaultdict(set)
    out = Shared()
    for line in sample.lines:
        v = line.leaves.get(path)
        if not isinstance(v, str) or not v.strip():
            continue
        out.lines += 1
        counts[v] = counts.get(v, 0) + 1
        if key_path:
            k = line.leaves.get(key_path)
            if len(keys[v]) < 2 and k not in (None, ""):
                keys[v].add(str(k))
        if effect_path and line.leaves.get(effect_path) not in (None, ""):
            out.with_effect += 1
    out.distinct = len(counts)
    out.recurring = sum(1 for c in counts.values() if c >= 2)
    out.one_key = sum(1 for v in counts if len(keys[v]) <= 1)
    return out


def effect_key_like(s: Shared, key_lines: int) -> bool:
    """Attempt and commit lines share it, it belongs to one key, and it is no constant."""
    return (s.distinct >= 2 and s.recurring >= 0.6 * s.distinct and s.one_key >= 0.8 * s.distinct
            and s.lines < 0.95 * key_lines)


def sink_like(s: Shared) -> bool:
    """Given on effect lines only, a few destinations shared by many lines."""
    return s.lines >= 2 and s.with_effect >= 0.95 * s.lines and s.distinct <= max(2, s.lines // 4)


def reporter_like(values: dict[str, int], lines: int) -> bool:
    """Its values name who reported: coordinator, sink, worker, verifier (at least two of them)."""
    named = {v.strip().lower() for v in values if v.strip().lower() in REPORTERS}
    return len(named) >= 2 and sum(c for v, c in values.items() if v.strip().lower() in REPORTERS) >= 0.9 * lines
