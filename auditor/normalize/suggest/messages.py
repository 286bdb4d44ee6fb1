"""What each message of a sampled log most likely means (``auditor map``): values of the kind
field that differ only in ids and numbers are one message (a pattern), and each message is given a
kind by its words (``acquired``, ``refused``, ``committed``...) confirmed by its lines' fields (an
effect key on effect kinds, a new epoch of its key on acquisitions), declared irrelevant when no
line of it names a workflow key and no word says it is evidence, or left to decide."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ...core.fields import EFFECT_KINDS, EPOCH_OPTIONAL_KINDS, KIND_ALIASES, name_key
from ..sample import Sample

#: Words that say which kind a message means, checked in this order (a refusal is said with an
#: attempt's words: "write refused"; a lost heartbeat with a heartbeat's).
WORDS: tuple[tuple[str, frozenset[str]], ...] = tuple((kind, frozenset(words.split())) for kind, words in (
    ("result_rejected", "refused refuse rejected reject rejection fenced denied stale"),
    ("heartbeat_lost", "heartbeat_lost"),
    ("heartbeat_ok", "heartbeat_ok"),
    ("outcome_verified", "verified verify verification confirmed reconciled"),
    ("effect_compensated", "compensated compensation refunded reverted undone"),
    ("authority_revoked", "revoked revoke"),
    ("resumed", "resumed resume resuming replaying replayed"),
    ("revalidated", "revalidated revalidate revalidation"),
    ("effect_committed", "committed commit published completed wrote written charged applied succeeded "
                         "delivered stored saved"),
    ("effect_attempted", "attempted attempt attempting publishing writing sending sent calling requesting "
                         "started starting invoking submitting submitted charging"),
    ("lease_acquired", "acquired acquire claimed claim granted elected takeover obtained"),
    ("progress", "progress exported processed rows done checkpoint working step batch renewed extended "
                 "heartbeat"),
))
_LOST = frozenset("lost missed miss failed timeout expired".split())
_OK = frozenset("ok sent renewed beat alive".split())
_WORD = re.compile(r"[a-z0-9]+")
_REGEX_SPECIAL = set(".^$*+?{}[]\\|()")


@dataclass
class Message:
    """Values of the kind field that differ only in ids and numbers, and what their lines carry."""

    template: tuple[str | None, ...]  # literal words, None where an id or number stands
    lines: int = 0
    first: tuple[str, int] = ("", 0)
    values: dict[str, int] = field(default_factory=dict)  # distinct values as written (up to 200)
    keyed: int = 0        # lines giving a workflow key
    epoched: int = 0      # lines giving an epoch
    effects: int = 0      # lines giving an effect key
    first_of_epoch: int = 0  # lines that are the first of their (key, epoch)
    kind: str | None = None  # a kind or built-in kind alias; None: ignore or undecided
    ignore: bool = False
    confidence: str = ""
    why: str = ""

    @property
    def exact(self) -> bool:
        """One value (up to case): an exact entry, not a pattern."""
        return None not in self.template and len({name_key(v) for v in self.values}) == 1

    def entry(self) -> str:
        if self.exact:
            return max(self.values, key=lambda v: (self.values[v], v))
        words = [r"\S+" if w is None else _escape(w) for w in self.template]
        pattern = "^" + " ".join(words) + "$"
        if all(re.search(pattern, v, re.IGNORECASE) for v in self.values):
            return pattern
        return "^" + r"\s+".join(words) + r"\s*$"


def _escape(word: str) -> str:
    return "".join("\\" + c if c in _REGEX_SPECIAL else c for c in word)


_ID_CHARS = re.compile(r"[0-9/=@]")


def _template(value: str, ids: list[str], seen: dict[str, tuple]) -> tuple[str | None, ...]:
    """The message's words, None where an id or a number stands: digits, a path or key=value
    (whatever the line), or one of the line's own values (its key, worker, effect key, sink)."""
    words = seen.get(value)
    if words is None:
        words = tuple((w, bool(_ID_CHARS.search(w))) for w in value.split())
        if len(seen) < 100_000:
            seen[value] = words
    if not ids:
        return tuple(None if var else w for w, var in words)
    return tuple(None if var or _names(w, ids) else w for w, var in words)


def _names(word: str, ids: list[str]) -> bool:
    bare = word.strip(".,;:()[]{}'\"")
    return any(bare == i or (len(i) >= 3 and i in word) for i in ids)


def messages(sample: Sample, kind_path: str, paths: dict[str, str]) -> list[Message]:
    """The messages of the kind field ``kind_path``, in the order first seen; ``paths`` says where
    the other fields are (``workflow_key``, ``epoch``, ``seq``, ``worker``, ``effect_key``...)."""
    key_p, epoch_p, seq_p = paths.get("workflow_key"), paths.get("epoch"), paths.get("seq")
    id_paths = [paths[f] for f in ("workflow_key", "worker", "effect_key", "sink", "step_id") if f in paths]
    firsts = _firsts(sample, key_p, epoch_p, seq_p)
    found: dict[tuple, Message] = {}
    seen: dict[str, tuple] = {}
    for i, line in enumerate(sample.lines):
        v = line.leaves.get(kind_path)
        if not isinstance(v, str) or not v.strip():
            continue
        ids = [str(line.leaves[p]) for p in id_paths if line.leaves.get(p) not in (None, "")]
        template = _template(v, ids, seen)
        group = tuple(None if w is None else w.lower() for w in template)
        m = found.get(group)
        if m is None:
            m = found[group] = Message(template, first=(line.file, line.line))
        m.lines += 1
        if v in m.values:
            m.values[v] += 1
        elif len(m.values) < 200:
            m.values[v] = 1
        m.keyed += _given(line.leaves.get(key_p))
        m.epoched += _given(line.leaves.get(epoch_p))
        m.effects += _given(line.leaves.get(paths.get("effect_key")))
        m.first_of_epoch += i in firsts
    for m in found.values():
        decide(m)
    return list(found.values())


def _given(v: Any) -> bool:
    return v is not None and not (isinstance(v, str) and not v.strip())


def _firsts(sample: Sample, key_p: str | None, epoch_p: str | None, seq_p: str | None) -> set[int]:
    """The lines that are the first of their (key, epoch) in seq order: acquisitions, in a log
    whose owners start by acquiring."""
    if key_p is None or epoch_p is None:
        return set()
    first: dict[tuple[str, str], tuple[int, int]] = {}
    for i, line in enumerate(sample.lines):
        key, epoch = line.leaves.get(key_p), line.leaves.get(epoch_p)
        if not _given(key) or not _given(epoch):
            continue
        seq = line.leaves.get(seq_p) if seq_p else None
        order = (int(str(seq).strip()) if seq is not None and str(seq).strip().lstrip("+-").isdigit() else i, i)
        k = (str(key), str(epoch).strip())
        if k not in first or order < first[k]:
            first[k] = order
    return {i for _order, i in first.values()}


def words_say(template: tuple[str | None, ...]) -> str | None:
    """The kind the literal words of a message say, or None."""
    words = [t for w in template if w is not None for t in _WORD.findall(w.lower())]
    said = set(words)
    if "heartbeat" in said or "heartbeats" in said:
        if said & _LOST:
            said.add("heartbeat_lost")
        elif said & _OK or len(said) == 1:
            said.add("heartbeat_ok")
    for kind, kind_words in WORDS:
        if said & kind_words:
            return kind
    return None


def decide(m: Message) -> None:
    """Give ``m`` a kind, declare it irrelevant, or leave it to decide, with why and how sure."""
    said = words_say(m.template)
    base = KIND_ALIASES[said][0] if said in KIND_ALIASES else said
    if said is None:
        if m.keyed == 0:
            m.ignore, m.confidence = True, "high"
            m.why = "no line of it gives a workflow key, and no word of it says it is evidence"
        else:
            m.why = f"{m.keyed:,} of its lines give a workflow key, but no word of it says which kind"
        return
    if m.keyed == 0:
        m.why = f'its words say {said}, but no line of it gives a workflow key'
        return
    m.kind = said
    checks = [m.keyed == m.lines]
    if base not in EPOCH_OPTIONAL_KINDS and base != "outcome_verified":
        checks.append(m.epoched == m.lines)
    if base in EFFECT_KINDS:
        checks.append(m.effects == m.lines)
    if base == "lease_acquired":
        checks.append(m.first_of_epoch >= 0.9 * m.lines)
    m.confidence = "high" if all(checks) else "medium" if sum(checks) * 2 >= len(checks) else "low"
    m.why = _why(m, said, base)


def _why(m: Message, said: str, base: str) -> str:
    parts = [f"its words say {said}"]
    if base == "lease_acquired":
        parts.append(f"{m.first_of_epoch:,} of {m.lines:,} lines open a new epoch of their key")
    if base in EFFECT_KINDS:
        parts.append(f"{m.effects:,} of {m.lines:,} give an effect key")
    if m.keyed < m.lines:
        parts.append(f"only {m.keyed:,} give a workflow key")
    if base not in EPOCH_OPTIONAL_KINDS and base != "outcome_verified" and m.epoched < m.lines:
        parts.append(f"only {m.epoched:,} give an epoch")
    return "; ".join(parts)
