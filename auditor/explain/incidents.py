"""Stage 5, explain: group findings into incidents and state them in plain words.

An incident is every finding of one ``(workflow_key, displaced epoch)``; a double commit joins the
incident of its lowest epoch. The incident is data (``model.Incident``); the witness sentence is
the one piece of prose, built here from that data so every renderer shows the same words.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence

from ..detect.batch import KeyFindings, instant
from ..detect.batch.timeline import takeovers
from ..core.model import (GRADE_RANK, Confidence, Finding, Grade, Incident, Kind, Outcome, Owner,
                          build_effect, build_event_ref, build_finding, build_incident, build_owner)
from .result import AuditResult
from .workflows import WorkflowSummary, WorkflowTable
from ..rules.grades import spec
from ..rules import RESPONSES, TWICE, authority_incident_id, confidence, displaced_epoch, incident_id

_VERBS = {Kind.PROGRESS: "reported progress", Kind.EFFECT_ATTEMPTED: "attempted",
          Kind.EFFECT_COMMITTED: "committed"}
# Module constants: on Python 3.11 every Grade.X goes through EnumType.__getattr__, and these
# run once per finding.
_DOUBLE, _PROGRESS = Grade.DOUBLE_COMMIT, Kind.PROGRESS
_REJECTED, _ATTEMPT = Grade.REJECTED_ATTEMPT, Grade.STALE_ATTEMPT
_COMMITTED, _UNKNOWN = Outcome.COMMITTED, Outcome.UNKNOWN
_BY_SEVERITY = (Outcome.COMMITTED, Outcome.UNKNOWN, Outcome.REJECTED)
_VALUE = {g: g.value for g in Grade}


def owner(worker: str | None, epoch: int | None) -> str:
    return f"epoch {epoch} ({worker or 'unknown'})"


def at(f: Finding) -> str:
    """Where a finding's event sits, in words: its seq, or its position when the log gave no seq."""
    return f"seq {f.seq}" if f.seq is not None else f"position {f.position} (no seq)"


def at_pair(seq: int | None, position: int | None) -> str:
    """A ``*_seq`` field and its ``*_position`` in the words of ``at``: never an invented seq."""
    return f"seq {seq}" if seq is not None else f"position {position}"


def witness(transition: Owner | None, transition_seq: int | None, transition_position: int | None,
            findings: list[Finding]) -> str:
    """One sentence: who took over, what the displaced owner then did, and what that means."""
    stale = [f for f in findings if f.grade not in TWICE]
    doubles = [f for f in findings if f.grade in TWICE]
    parts = []
    if transition is not None and (transition_seq is not None or transition_position is not None):
        parts.append(f"{owner(transition.worker, transition.epoch)} was acquired at "
                     f"{at_pair(transition_seq, transition_position)}")
    worst = max(stale, key=lambda f: (GRADE_RANK[f.grade], -f.place), default=None)
    if worst is not None:
        what = _VERBS[worst.kind]
        if worst.effect_key and worst.kind is not _PROGRESS:
            what += f" {worst.effect_key}"
        if worst.grade is _REJECTED:
            tail = (f"the sink rejected it at {at_pair(worst.receipt_seq, worst.receipt_position)}: the fence held"
                    if worst.receipt_place != worst.place else "the sink rejected it: the fence held")
        elif worst.grade is _ATTEMPT:
            tail = ("it was then committed: the fence did not stop it" if worst.outcome is _COMMITTED
                    else spec(worst.grade).witness)
        else:  # the grade's own words (rules.grades)
            tail = spec(worst.grade).witness
        parts.append(f"{owner(worst.worker, worst.epoch)} then {what} at {at(worst)}: {tail}")
    sentence = "; ".join(parts) + "." if parts else ""
    for d in doubles:
        others = [str(e) for e in d.epochs if e != d.epoch]
        earlier = ("epoch " if len(others) == 1 else "epochs ") + " and ".join(
            (", ".join(others[:-1]), others[-1]) if len(others) > 1 else others)
        label = "its step" if d.unstable_effect_key and d.effect_key is None else d.effect_key
        if worst is not None and worst.place == d.place:  # the stale commit above is this second commit
            extra = f" {earlier.capitalize()} had already committed {label}: the effect happened twice"
        else:
            extra = (f" Epoch {d.epoch} ({d.worker or 'unknown'}) committed {label} again at {at(d)} "
                     f"after {earlier} had: the effect happened twice")
        if d.unstable_effect_key:
            extra += f" (unstable effect key: step {d.step_id} used a different key under another epoch)"
        if d.grade is not _DOUBLE:  # compensated
            extra += "; " + spec(d.grade).witness
        sentence = (sentence + extra + ".").strip()
    return sentence


_WHY = {
    "revoked": lambda f: f"{_mandate(f)} was revoked at {at_pair(f.since_seq, f.since_position)}",
    "expired": lambda f: f"{_mandate(f)} expired at {f.since_ts}",
    "failed_revalidation": lambda f: (f"the revalidation at {at_pair(f.since_seq, f.since_position)} did not "
                                      "say continue and no new grant followed"),
    "unrevalidated_resume": lambda f: (f"the run resumed at {at_pair(f.since_seq, f.since_position)} and was "
                                       "not revalidated"),
}


def _mandate(f: Finding) -> str:
    """The mandate a finding names: its authority_id, or the key's unnamed one (SPEC rev 3)."""
    return f.authority_id if f.authority_id is not None else "the key's unnamed mandate"
_UNAUTHORIZED = frozenset({Grade.UNAUTHORIZED_COMMIT, Grade.UNAUTHORIZED_ATTEMPT})


def authority_witness(findings: list[Finding]) -> str:
    """The witness of an unauthorized incident (SPEC section 8): which mandate was missing and
    since when, then what the owner did without it (``mandate-7 expired at 14:00; epoch 2 (w2)
    then committed refund:inv-9 at 14:05``)."""
    worst = max(findings, key=lambda f: (GRADE_RANK[f.grade], -f.place))
    why = [_WHY[r](worst) for r in worst.reasons if r in _WHY]
    what = _VERBS[worst.kind] + (f" {worst.effect_key}" if worst.effect_key else "")
    where = f"at {worst.ts}" if "expired" in worst.reasons and worst.ts else f"at {at(worst)}"
    tail = ("the sink rejected it: the mandate check held" if worst.grade is _REJECTED
            else spec(worst.grade).witness if worst.grade in _UNAUTHORIZED else "")
    stale = " (a displaced owner, too)" if "stale" in worst.reasons else ""
    more = f" ({len(findings)} unauthorized effects in all)" if len(findings) > 1 else ""
    return f"{'; '.join(why)}; {owner(worst.worker, worst.epoch)}{stale} then {what} {where}: {tail}{more}."


def key_incidents(kf: KeyFindings) -> tuple[list[Finding], list[Incident]]:
    """One key's findings with their incident ids filled in, and its incidents, sorted by place."""
    groups: dict[int | str, list[Finding]] = defaultdict(list)
    for f in kf.findings:
        # Unauthorized findings (SPEC section 8) group by their mandate or resume, the others by
        # the displaced epoch.
        groups[f.anchor if f.anchor is not None else displaced_epoch(f.grade, f.epoch, f.epochs)].append(f)
    key = kf.workflow_key
    acquired_at = {(h.workflow_key, h.seq): h.epoch for h in kf.handovers}
    out: list[Incident] = []
    linked: dict[str, str] = {}
    for about, fs in groups.items():
        fs.sort(key=lambda f: (f.place, GRADE_RANK[f.grade]))
        if isinstance(about, str):
            iid, epoch = authority_incident_id(key, about), fs[0].epoch
        else:
            iid, epoch = incident_id(key, about), about
        for f in fs:
            linked[f.id] = iid
        out.append(_incident(kf, acquired_at, iid, key, epoch, fs, kf.observed))
    out.sort(key=lambda i: (i.window_first_place, i.displaced.epoch or 0))
    return [_with_incident(f, linked[f.id]) for f in kf.findings], out


def _with_incident(f: Finding, iid: str) -> Finding:
    """``dataclasses.replace(f, incident_id=iid)``, a few times faster (a big audit has 500k)."""
    if f.incident_id == iid:
        return f
    values = {name: getattr(f, name) for name in f.__slots__}
    values["incident_id"] = iid
    return build_finding(**values)


def _incident(det: KeyFindings, acquired_at: dict[tuple[str, int], int], iid: str, key: str,
              epoch: int, fs: list[Finding], observed: bool) -> Incident:
    severity = max((f.grade for f in fs), key=GRADE_RANK.__getitem__)
    stale = [f for f in fs if f.grade not in TWICE]
    named = next((f for f in fs if f.transition_place is not None), None)
    transition_place = None if named is None else named.transition_place
    transition_seq = None if named is None else named.transition_seq
    transition_position = None if named is None else named.transition_position
    last = fs[-1]
    current = build_owner(last.current_worker, last.current_epoch)
    transition = None
    if transition_place is not None:
        t_epoch = acquired_at.get((key, transition_place))
        if t_epoch is not None:
            transition = build_owner(det.acquirers.get((key, t_epoch)), t_epoch)
    displaced_worker = det.acquirers.get((key, epoch)) or next(
        (f.worker for f in fs if f.epoch == epoch), None)

    window = stale or fs
    first, last_f = window[0], window[-1]
    first_ref = build_event_ref(first.seq, first.position, first.ts, first.kind, first.file, first.line)
    last_ref = first_ref if last_f is first else build_event_ref(last_f.seq, last_f.position, last_f.ts,
                                                                 last_f.kind, last_f.file, last_f.line)
    window_seconds = None
    t_ts = instant(det.transition_ts.get((key, transition_place))) if transition_place is not None else None
    last_ts = instant(det.finding_ts.get(last_f.id))
    if t_ts is not None and last_ts is not None:
        window_seconds = (last_ts - t_ts).total_seconds()
    freshness = None
    if det.newest_ts is not None and last_ts is not None:
        freshness = (det.newest_ts - last_ts).total_seconds()

    effects = []
    for ek in sorted({f.effect_key for f in fs if f.effect_key}):
        of_key = [f for f in fs if f.effect_key == ek]
        outcome = _sink_outcome(f.outcome for f in of_key)
        last_place = max(f.place for f in of_key)
        v_place, v_position = det.verifications.get((key, ek), (None, None))
        verified = v_place is not None and v_place > last_place
        effects.append(build_effect(ek, outcome, verified, v_place if verified and not observed else None,
                                    v_position if verified else None))
    sink = _sink_outcome(e.sink_outcome for e in effects) if effects else None
    verification = ("n/a" if not effects else
                    "verified" if all(e.verified for e in effects) else "unverified")

    trust = confidence(fs, observed=observed, capped=bool(det.capped) and any(f.id in det.capped for f in fs))

    grades: dict[str, int] = {}
    for f in fs:
        grades[_VALUE[f.grade]] = grades.get(_VALUE[f.grade], 0) + 1
    return build_incident(
        id=iid, workflow_key=key, severity=severity,
        displaced=build_owner(displaced_worker, epoch), current=current,
        transition_seq=transition_seq, transition_position=transition_position,
        first_stale=first_ref if stale else None, last_stale=last_ref if stale else None,
        window_first_seq=first.seq, window_first_position=first.position,
        window_last_seq=last_f.seq, window_last_position=last_f.position,
        window_seconds=window_seconds,
        effect_keys=tuple(e.effect_key for e in effects), effects=tuple(effects),
        sink_outcome=sink, verification=verification, freshness_seconds=freshness,
        confidence=trust, response=RESPONSES[severity],
        witness=(authority_witness(fs) if fs[0].anchor is not None
                 else witness(transition, transition_seq, transition_position, fs)),
        grades=grades,
        finding_ids=tuple(f.id for f in fs), responses=responses(f.grade for f in fs))


def responses(grades: Iterable[Grade]) -> tuple[str, ...]:
    """Each distinct action the grades call for, most urgent (most severe grade) first: a stale
    commit by a worker still heartbeating needs both "freeze" and "stop the old worker"."""
    kinds = frozenset(grades)
    out = _RESPONSES_OF.get(kinds)
    if out is None:  # one tuple per set of grades, shared by every incident with that set
        out = _RESPONSES_OF[kinds] = tuple(
            RESPONSES[g] for g in sorted(kinds, key=GRADE_RANK.__getitem__, reverse=True))
    return out


_RESPONSES_OF: dict[frozenset[Grade], tuple[str, ...]] = {}


def _sink_outcome(outcomes: Iterable[Outcome | None]) -> Outcome:
    seen = {o for o in outcomes if o is not None}
    for o in _BY_SEVERITY:
        if o in seen:
            return o
    return _UNKNOWN


def key_summary(kf: KeyFindings, findings: list[Finding]) -> WorkflowSummary:
    """The workflow summary of a key with findings: size, handovers (clean when no finding names
    them), worst grade."""
    events, acquisitions, handovers = kf.counts
    named = takeovers(findings)
    return WorkflowSummary(
        workflow_key=kf.workflow_key, events=events, acquisitions=acquisitions, handovers=handovers,
        clean_handovers=sum(1 for h in kf.handovers if h.seq not in named), findings=len(findings),
        severity=max((f.grade for f in findings), key=GRADE_RANK.__getitem__),
        ordering="observed" if kf.observed else "authoritative")


# What a report shows first: the incidents that most need a person, and the timelines drawn.

MAX_CARDS = 50  # incidents shown in full; the rest are listed with their findings
MAX_TIMELINES = 25  # affected workflow keys drawn as timelines
MAX_CLEAN_TIMELINES = 10  # keys with only clean handovers, drawn as the control case
MAX_TIMELINE_EVENTS = 100_000  # events read per drawn key
_CONFIDENCE_ORDER = list(Confidence)


# Both report orders start with the severity: stream.Incidents ranks only a batch's incidents at
# least as severe as the last one it keeps (tests/explain/test_first_incidents.py).

def urgency(i: Incident) -> tuple:
    """Most severe first; among equals, what still needs checking (unverified, surer evidence)."""
    return (-i.severity.rank, i.verification == "verified", _CONFIDENCE_ORDER.index(i.confidence),
            i.workflow_key, i.window_first_place, i.displaced.epoch or 0)


def severity(i: Incident) -> tuple:
    """Most severe first; among equals, in the document's order (the terminal and Markdown)."""
    return (-i.severity.rank, i.workflow_key, i.window_first_place)


def by_urgency(incidents: Iterable[Incident]) -> list[Incident]:
    """Every incident, the most urgent first (``urgency``)."""
    return sorted(incidents, key=urgency)


def top(incidents: Iterable[Incident], n: int, order: Callable[[Incident], tuple]) -> list[Incident]:
    """``sorted(incidents, key=order)[:n]``, from what a spooled list kept of its first ones when
    it can (``stream.Incidents``), without reading every incident back."""
    kept = getattr(incidents, "first", None)
    if kept is not None:
        found = kept(order, n)
        if found is not None:
            return found
    return heapq.nsmallest(n, incidents, key=order)


def timeline_keys(incidents: Sequence[Incident], workflows: WorkflowTable) -> tuple[list[str], list[str]]:
    """The workflow keys a report draws: those of the most urgent incident cards (at most
    ``MAX_TIMELINES``), and the control cases, keys whose handovers were all clean."""
    affected: dict[str, None] = {}
    for inc in top(incidents, MAX_CARDS, urgency):
        affected.setdefault(inc.workflow_key)
    return list(affected)[:MAX_TIMELINES], workflows.clean_keys(MAX_CLEAN_TIMELINES)


def drawn_keys(result: AuditResult) -> list[str]:
    """Every workflow key whose timeline ``result`` must carry for a report (``timeline_keys``)."""
    affected, clean = timeline_keys(result.incidents, result.workflows)
    return affected + clean
