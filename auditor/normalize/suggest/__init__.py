"""``auditor map``: a vocabulary suggested from a sample of a log (SPEC section 2, "A suggested
vocabulary"). It never audits: it reads the first lines (``sample``), finds the member that gives
each canonical field (``fields``), gives each message of the kind field a kind, an ``[ignore]``
entry or a question (``messages``), checks that the vocabulary it would write loads and what it
makes of the sample, and ``writer`` writes it as a commented TOML file to read, correct and pass
to ``--map``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ...core.limits import Limits
from ..reference import Ignored, Rejected, normalize
from ..sample import SAMPLE_LINES, Sample, read_sample
from ..vocabulary import Vocabulary, VocabularyError
from .fields import FieldChoice, PathStats, choose_fields, left_behind, path_stats
from .messages import Message, messages

__all__ = ["suggest", "Suggestion", "MAX_KINDS", "SAMPLE_LINES"]

#: At most this many [kinds] and [kind_patterns] entries, and as many [ignore] entries (SPEC: 200).
MAX_KINDS = 200


@dataclass
class Check:
    """What the suggested vocabulary makes of the sample's lines."""

    events: int = 0
    ignored: int = 0
    quarantined: int = 0
    reasons: Counter = field(default_factory=Counter)
    first: dict[str, tuple[str, int]] = field(default_factory=dict)
    keys: set = field(default_factory=set)          # workflow keys of the events
    acquired: set = field(default_factory=set)      # ... with an acquisition
    seqd: set = field(default_factory=set)          # ... with a seq on some event
    noseq: Counter = field(default_factory=Counter)  # events without a seq, per key

    @property
    def unordered(self) -> set:
        """The keys the audit would order by observation: no event of theirs gives a seq."""
        return self.keys - self.seqd

    @property
    def unplaced(self) -> int:
        """Events without a seq in a key ordered by seq: the audit cannot place them."""
        return sum(n for k, n in self.noseq.items() if k in self.seqd)

    @property
    def without_acquisition(self) -> int:
        return len(self.keys - self.acquired)


@dataclass
class Suggestion:
    sample: Sample
    stats: dict[str, PathStats]
    fields: list[FieldChoice]
    kind_path: str | None
    kinds: list[Message]        # mapped onto a kind (exact values and patterns)
    ignore: list[Message]       # declared irrelevant
    undecided: list[Message]    # left to decide (comments)
    beyond: list[Message]       # past the 200 entries: counted in a comment
    vocabulary: Vocabulary
    check: Check
    refused: list[tuple[FieldChoice, str]] = field(default_factory=list)  # field entries the file would refuse
    known: list[Message] = field(default_factory=list)  # values that are kind names already: no entry
    left: list[tuple[str, str]] = field(default_factory=list)  # (attrs path, field) that look like order/ownership

    @property
    def undecided_lines(self) -> int:
        """Lines of the messages left to decide (they quarantine as unknown kinds)."""
        return sum(m.lines for m in self.undecided) + sum(m.lines for m in self.beyond)


def suggest(paths: Iterable[str | os.PathLike], lines: int = SAMPLE_LINES, fmt: str = "auto",
            limits: Limits | None = None, progress: Callable[[int], None] | None = None) -> Suggestion:
    """The vocabulary that would audit the first ``lines`` lines of ``paths``, with its evidence.
    Blocking; raises ``InputError`` when the input cannot be read. ``progress`` is called with
    the number of lines just read."""
    sample = read_sample(paths, lines, fmt, limits, progress)
    stats = path_stats(sample)
    chosen = choose_fields(sample, stats)
    where = {c.field: c.path or c.as_is for c in reversed(chosen)}  # the first epoch path
    epochs = [c.path or c.as_is for c in chosen if c.field == "epoch"]
    kind_path = where.get("kind")
    found = messages(sample, kind_path, where, epochs) if kind_path else []
    known = [m for m in found if m.kind is not None and m.exact and _known(m)]
    kinds = [m for m in found if m.kind is not None and m not in known]
    ignore = [m for m in found if m.ignore]
    undecided = [m for m in found if m.kind is None and not m.ignore]
    beyond = []
    for group in (kinds, ignore):
        if len(group) > MAX_KINDS:
            kept = set(map(id, sorted(group, key=lambda m: -m.lines)[:MAX_KINDS]))
            beyond += [m for m in group if id(m) not in kept]
            group[:] = [m for m in group if id(m) in kept]
    refused: list[tuple[FieldChoice, str]] = []
    vocabulary = _settle(chosen, kinds, ignore, undecided, refused)
    return Suggestion(sample, stats, chosen, kind_path, kinds, ignore, undecided, beyond, vocabulary,
                      check(sample, vocabulary, kind_path), refused, known, left_behind(sample, stats, chosen))


def _known(m: Message) -> bool:
    """A message that is a kind name the auditor knows, meaning what its words say: no entry."""
    from ..vocabulary import DEFAULT

    meaning = DEFAULT.kind_of(m.entry())
    return meaning is not None and meaning == DEFAULT.kind_of(m.kind)


def build(chosen: list[FieldChoice], kinds: list[Message], ignore: list[Message]) -> Vocabulary:
    return Vocabulary.build([(c.path, c.field) for c in chosen if c.path],
                            [(m.entry(), m.kind) for m in kinds if m.exact],
                            kind_patterns=[(m.entry(), m.kind) for m in kinds if not m.exact],
                            ignore_kinds=[m.entry() for m in ignore if m.exact],
                            ignore_patterns=[m.entry() for m in ignore if not m.exact])


def _settle(chosen: list[FieldChoice], kinds: list[Message], ignore: list[Message],
            undecided: list[Message], refused: list[tuple[FieldChoice, str]]) -> Vocabulary:
    """The vocabulary of the entries that load and read each of their own values as meant; an
    entry that does not (it overlaps another, or the file would refuse it) becomes a question."""
    for _ in range(len(kinds) + len(ignore) + len(chosen) + 1):
        try:
            vocabulary = build(chosen, kinds, ignore)
        except VocabularyError as e:
            why = f"the file would refuse it ({str(e).split(': ', 1)[-1]})"
            bad_field = next((c for c in chosen if c.path and c.path in str(e)), None)
            if bad_field is not None:
                chosen.remove(bad_field)
                refused.append((bad_field, why))
            elif kinds or ignore:
                _to_decide(_refused(kinds, ignore, str(e)), kinds, ignore, undecided, why)
            else:
                raise
            continue
        wrong = next(((m, v) for m in kinds + ignore for v in m.values if not _reads_as(vocabulary, m, v)), None)
        if wrong is None:
            return vocabulary
        m, v = wrong
        found = vocabulary.classify(v)
        what = "ambiguous" if found.ambiguous else "ignored" if found.ignored else (
            found.meaning[0] if found.meaning else "unknown")
        _to_decide(m, kinds, ignore, undecided, f'with the other entries its value "{v[:60]}" reads as {what}')
    return build(chosen, [], [])


def _reads_as(vocabulary: Vocabulary, m: Message, value: str) -> bool:
    found = vocabulary.classify(value)
    if m.ignore:
        return found.ignored is not None
    return found.meaning is not None and found.meaning == vocabulary.classify(m.kind).meaning


def _refused(kinds: list[Message], ignore: list[Message], error: str) -> Message:
    """The entry a refusal names (its message quotes it), else the last one added."""
    for m in kinds + ignore:
        if m.entry() in error:
            return m
    return (kinds + ignore)[-1]


def _to_decide(m: Message, kinds: list[Message], ignore: list[Message], undecided: list[Message], why: str) -> None:
    for group in (kinds, ignore):
        if m in group:
            group.remove(m)
    m.why = f"{m.why}; not written: {why}" if m.why else f"not written: {why}"
    m.kind, m.ignore = None, False
    undecided.append(m)


def check(sample: Sample, vocabulary: Vocabulary, kind_path: str | None = None) -> Check:
    """Each line of the sample through the normalizer with ``vocabulary``: events, ignored lines,
    and the quarantine reasons with the first line of each. A line whose only member that can
    give the kind is ``kind_path`` (or its container), holding a value an [ignore] entry matches,
    is ignored without the normalizer: that is what it would say (the store's SQL reasons alike)."""
    from ...core.fields import name_key

    out = Check()
    relevant = {n for n, (f, _prio) in vocabulary.fields.items() if f == "kind"} | set(vocabulary.containers)
    head = name_key(kind_path.split(".", 1)[0]) if kind_path else None
    ignored: dict[str, bool] = {}
    for line in sample.lines:
        v = line.leaves.get(kind_path) if kind_path else None
        if isinstance(v, str) and v.strip():
            known = ignored.get(v)
            if known is None:
                known = ignored[v] = vocabulary.classify(v).ignored is not None
            if known and [name_key(str(n)) for n, _ in line.members if name_key(str(n)) in relevant] == [head]:
                out.ignored += 1
                continue
        try:
            event = normalize(line.members, vocabulary)
            out.events += 1
            key = event.get("workflow_key")
            out.keys.add(key)
            if event.get("kind") == "lease_acquired":
                out.acquired.add(key)
            if event.get("seq") is None:
                out.noseq[key] += 1
            else:
                out.seqd.add(key)
        except Ignored:
            out.ignored += 1
        except Rejected as e:
            out.quarantined += 1
            reason = str(e)
            out.reasons[reason] += 1
            out.first.setdefault(reason, (line.file, line.line))
    return out
