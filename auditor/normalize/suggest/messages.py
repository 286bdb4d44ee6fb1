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
from ..sample import Sample, as_int
from ..words import RELEASE, TRYING, Said, say

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
    sinks: int = 0        # lines giving a destination (sink)
    seqs: int = 0         # lines giving a seq
    first_of_epoch: int = 0  # lines that are the first of their (key, epoch), in seq or in file order
    first_by_seq: int = 0    # ... in seq order (in file order when no line gives a seq)
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
    return any(bare == i or (len(i) >= 3 and i in word and not bare.isalpha()) for i in ids)


def messages(sample: Sample, kind_path: str, paths: dict[str, str], epochs: list[str] | None = None) -> list[Message]:
    """The messages of the kind field ``kind_path``, in the order first seen; ``paths`` says where
    the other fields are (``workflow_key``, ``epoch``, ``seq``, ``worker``, ``effect_key``...)."""
    key_p, seq_p = paths.get("workflow_key"), paths.get("seq")
    epoch_of = epoch_getter(epochs if epochs is not None else [paths["epoch"]] if "epoch" in paths else [])
    id_paths = [paths[f] for f in ("workflow_key", "worker", "effect_key", "sink", "step_id") if f in paths]
    own_ids = {paths[f] for f in ("workflow_key", "worker", "effect_key") if f in paths}  # a word-like step is a word
    firsts, strict = _firsts(sample, key_p, epoch_of, seq_p)
    found: dict[tuple, Message] = {}
    seen: dict[str, tuple] = {}
    for i, line in enumerate(sample.lines):
        v = line.leaves.get(kind_path)
        if not isinstance(v, str) or not v.strip():
            continue
        ids = [str(x) for p in id_paths if (x := line.leaves.get(p)) not in (None, "")
               and (p in own_ids or not str(x).isalpha())]
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
        m.epoched += epoch_of is not None and epoch_of(line) is not None
        m.effects += _given(line.leaves.get(paths.get("effect_key")))
        m.sinks += _given(line.leaves.get(paths.get("sink")))
        m.seqs += _given(line.leaves.get(seq_p))
        m.first_of_epoch += i in firsts
        m.first_by_seq += i in strict
    for m in found.values():
        decide(m, epoch_of is not None)
    return list(found.values())


def _given(v: Any) -> bool:
    return v is not None and not (isinstance(v, str) and not v.strip())


def _firsts(sample: Sample, key_p: str | None, epoch_of, seq_p: str | None) -> tuple[set[int], set[int]]:
    """The lines that are the first of their (key, epoch) in seq order: acquisitions, in a log
    whose owners start by acquiring."""
    if key_p is None or epoch_of is None:
        return set(), set()
    by_seq: dict[tuple[str, int], tuple[int, int]] = {}
    by_line: dict[tuple[str, int], int] = {}
    for i, line in enumerate(sample.lines):
        key, epoch = line.leaves.get(key_p), epoch_of(line)
        if not _given(key) or epoch is None:
            continue
        k = (str(key), epoch)
        by_line.setdefault(k, i)
        seq = as_int(line.leaves.get(seq_p)) if seq_p else None
        if seq is not None and (k not in by_seq or (seq, i) < by_seq[k]):
            by_seq[k] = (seq, i)
    # the first in seq order, and the first in file order (an acquisition logged without a seq)
    strict = {i for _order, i in by_seq.values()} if by_seq else set(by_line.values())
    return strict | set(by_line.values()), strict


def epoch_getter(paths: list[str]):
    """The epoch of a line: the first of ``paths`` it gives, as an integer (None without)."""
    if not paths:
        return None

    def get(line) -> int | None:
        for p in paths:
            n = as_int(line.leaves.get(p))
            if n is not None:
                return n
        return None
    return get


_DECIDE_EFFECT = "decide: effect_attempted or effect_committed"


def decide(m: Message, epochs_known: bool = True) -> None:
    """Give ``m`` a kind, declare it irrelevant, or leave it to decide, with why and how sure.
    Never dangerous: an acquisition needs its lines to open new epochs, a commit needs its lines to
    name an effect key, and words of a renewal, release, checkpoint or bare completion are never
    either (SPEC section 2, revision 3.1)."""
    said = say(" ".join(w for w in m.template if w is not None))
    if said.kind is None:
        _undecided(m, said, epochs_known)
        return
    base = KIND_ALIASES[said.kind][0] if said.kind in KIND_ALIASES else said.kind
    if (said.kind.startswith("heartbeat") and epochs_known and m.keyed and m.epoched == 0 and m.effects == 0
            and m.sinks == 0):
        _no_owner(m, said)  # "failed to renew lease X" from the election library: no owner's epoch
        return
    if m.keyed == 0:
        m.why = f"its words say {said.kind}, but no line of it gives a workflow key"
        return
    effects = m.effects >= 0.9 * m.lines
    if said.kind == "effect_committed" and said.never and m.effects == 0 and m.sinks == 0 and m.epoched == m.lines:
        m.kind, m.confidence = "progress", "medium"  # "step charge completed": no line names an effect
        m.why = (f'its words say a completion ("{said.never}"), and none of its {m.lines:,} lines gives an effect key '
                 "or a destination: progress (never a commit)")
        return
    if base in EFFECT_KINDS and not effects:
        m.why = f"its words say {said.kind}, but only {m.effects:,} of {m.lines:,} lines give an effect key"
        if said.kind == "effect_committed":
            m.why += "; a commit without an effect key would invent one"
        return
    if base == "progress" and effects:
        m.why = (f'its words say {said.kind} ("{said.never or "progress"}"), but its lines give an effect key: '
                 f"{_DECIDE_EFFECT} or progress")
        return
    if base == "lease_acquired" and epochs_known and m.first_of_epoch < 0.9 * m.lines:
        m.why = (f"its words say lease_acquired, but only {m.first_of_epoch:,} of {m.lines:,} lines open a new "
                 "epoch of their key; a wrong acquisition would invent an epoch")
        return
    m.kind = said.kind
    checks = [m.keyed == m.lines, not (said.never and said.kind == "effect_committed")]
    if base not in EPOCH_OPTIONAL_KINDS and base != "outcome_verified":
        checks.append(m.epoched == m.lines)
    if base in EFFECT_KINDS:
        checks.append(m.effects == m.lines)
    m.confidence = "high" if all(checks) else "medium" if sum(checks) * 2 >= len(checks) else "low"
    m.why = _why(m, said.kind, base)


def _owned(m: Message) -> str | None:
    """What its lines carry of an owner's evidence (an epoch, a seq, an effect key, a destination):
    such a message is never ignored, whatever its key (SPEC section 2: never dangerous)."""
    for n, what in ((m.epoched, "an epoch"), (m.effects, "an effect key"), (m.sinks, "a destination"),
                    (m.seqs, "a seq")):
        if n:
            return f"{n:,} of its {m.lines:,} lines give {what}"
    return None


def _undecided(m: Message, said: Said, epochs_known: bool) -> None:
    owned = _owned(m)
    if m.keyed == 0 and (owned or said.effect):
        m.why = (f"no line of it gives a workflow key, but {owned or 'its words name an effect'}: "
                 "decide (ignoring it could hide a finding)")
    elif m.keyed == 0:
        m.ignore, m.confidence = True, "high"
        m.why = "no line of it gives a workflow key, and no word of it says it is evidence"
    elif (said.never is not None and epochs_known and m.epoched == 0 and m.effects == 0 and m.sinks == 0
          and (said.never in TRYING or said.never in RELEASE)):
        _no_owner(m, said)
    elif said.never is not None and m.keyed:
        m.why = f'its words say "{said.never}", never an acquisition or a commit; {m.keyed:,} of its lines give a key'
    elif said.effect and m.keyed:
        m.why = f"its words name an effect but not whether it happened: {_DECIDE_EFFECT}"
    elif (m.keyed == m.lines and epochs_known and m.first_by_seq == m.lines and m.lines >= 2
          and m.effects == 0 and m.sinks == 0 and not said.effect):  # an effect's words never acquire
        m.kind, m.confidence = "lease_acquired", "medium"
        m.why = f"no word says which kind, but each of its {m.lines:,} lines opens a new epoch of its key"
    else:
        m.why = f"{m.keyed:,} of its lines give a workflow key, but no word of it says which kind"


def _no_owner(m: Message, said: Said) -> None:
    """A renewal, an attempt to acquire, a loss or a release whose lines give no epoch: no owner
    can be placed by it, so it can be no evidence (an [ignore] entry, listed with its count)."""
    m.ignore, m.confidence = True, "medium"
    m.why = (f'its words say "{said.never}" (never an acquisition or a commit) and none of its {m.lines:,} lines '
             "gives an epoch: no owner's evidence")


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
