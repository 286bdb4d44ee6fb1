"""SPEC section 3, rule by rule: one table of histories, run against both engines (the batch SQL
detector through the real pipeline, and the live one fed the same events), whole finding lists."""

from __future__ import annotations

import pytest

from ..conftest import ev
from ..helpers import engine_findings


def step(spec: str, step_id: str) -> dict:
    return ev(spec, step_id=step_id)


# (name, history in file order, findings as (grade, seq, outcome, receipt_seq, epochs, unstable))
RULES = [
    ("clean handover is no finding",
     ["1 acq 5 g", "2 com 5 g part-1", "3 acq 6 e", "4 com 6 e part-2"], []),
    ("stale progress",
     ["1 acq 1 a", "2 acq 2 b", "3 prog 1 a"], [("stale_activity", 3, None, None, [], False)]),
    ("evidence below the displacing seq is not stale, whatever the file order",
     ["1 acq 1 a", "3 acq 2 b", "2 prog 1 a", "4 prog 2 b"], []),
    ("evidence before the takeover is not stale even when it arrives late in the file",
     ["1 acq 1 a", "3 acq 2 b", "2 prog 1 a", "4 prog 1 a"], [("stale_activity", 4, None, None, [], False)]),
    ("unresolved stale attempt: outcome unknown",
     ["1 acq 1 a", "2 acq 2 b", "3 att 1 a x"], [("stale_attempt", 3, "unknown", None, [], False)]),
    ("unresolved stale attempt the sink accepted: outcome committed",
     ["1 acq 1 a", "2 acq 2 b", ev("3 att 1 a x", sink_result="accepted")],
     [("stale_attempt", 3, "committed", None, [], False)]),
    ("one rejection resolves every earlier attempt of its triple: one finding per attempt",
     ["1 acq 1 a", "2 acq 2 b", "3 att 1 a x", "4 att 1 a x", "5 rej 1 a x"],
     [("rejected_attempt", 3, "rejected", 5, [], False), ("rejected_attempt", 4, "rejected", 5, [], False)]),
    ("a rejection of another effect key resolves nothing",
     ["1 acq 1 a", "2 acq 2 b", "3 att 1 a x", "4 rej 1 a y"],
     [("stale_attempt", 3, "unknown", None, [], False), ("rejected_attempt", 4, "rejected", 4, [], False)]),
    ("attempt before the takeover, refusal after it: the refusal is the finding",
     ["1 acq 1 a", "2 att 1 a x", "3 acq 2 b", "4 rej 1 a x"],
     [("rejected_attempt", 4, "rejected", 4, [], False)]),
    ("a lone stale rejection is a rejected attempt",
     ["1 acq 1 a", "2 acq 2 b", "3 rej 1 a x"], [("rejected_attempt", 3, "rejected", 3, [], False)]),
    ("stale attempt resolved by a commit stays stale_attempt; the commit is a stale_commit",
     ["1 acq 1 a", "2 acq 2 b", "3 att 1 a x", "4 com 1 a x"],
     [("stale_attempt", 3, "committed", None, [], False), ("stale_commit", 4, "committed", None, [], False)]),
    ("a rejection after a commit resolves only the attempts after that commit",
     ["1 acq 1 a", "2 acq 2 b", "3 att 1 a x", "4 com 1 a x", "5 att 1 a x", "6 rej 1 a x"],
     [("stale_attempt", 3, "committed", None, [], False), ("stale_commit", 4, "committed", None, [], False),
      ("rejected_attempt", 5, "rejected", 6, [], False)]),
    ("a re-run after preemption commits twice: double commit, not stale",
     ["1 acq 1 a", "2 com 1 a x", "3 acq 2 b", "4 com 2 b x"],
     [("double_commit", 4, "committed", None, [1, 2], False)]),
    ("double commit at each commit that adds an epoch, never at the first; a retry adds nothing",
     ["1 acq 1 a", "2 com 1 a x", "3 acq 2 b", "4 com 2 b x", "5 acq 3 c", "6 com 3 c x", "7 com 3 c x"],
     [("double_commit", 4, "committed", None, [1, 2], False),
      ("double_commit", 6, "committed", None, [1, 2, 3], False)]),
    ("same epoch committing twice is an idempotent retry",
     ["1 acq 1 a", "2 com 1 a x", "3 com 1 a x"], []),
    ("a stale commit that also doubles: two findings at one seq",
     ["1 acq 1 a", "2 acq 2 b", "3 com 2 b x", "4 com 1 a x"],
     [("stale_commit", 4, "committed", None, [], False), ("double_commit", 4, "committed", None, [1, 2], False)]),
    ("one step committed under two epochs with different effect keys: unstable effect key",
     ["1 acq 1 a", step("2 com 1 a pay:1", "s"), "3 acq 2 b", step("4 com 2 b pay:2", "s")],
     [("double_commit", 4, "committed", None, [1, 2], True)]),
    ("both double-commit rules at one seq: reported once",
     ["1 acq 1 a", step("2 com 1 a pay:1", "s"), step("3 com 1 a pay:2", "t"), "4 acq 2 b",
      step("5 com 2 b pay:2", "s")],
     [("double_commit", 5, "committed", None, [1, 2], True)]),
    ("the same step and key under two epochs is the plain double commit",
     ["1 acq 1 a", step("2 com 1 a pay", "s"), "3 acq 2 b", step("4 com 2 b pay", "s")],
     [("double_commit", 4, "committed", None, [1, 2], False)]),
    ("staleness follows the highest epoch, not the latest acquisition",
     ["1 acq 5 a", "2 acq 3 b", "3 prog 4 c"], [("stale_activity", 3, None, None, [], False)]),
    ("an equal epoch is not stale",
     ["1 acq 2 a", "2 acq 2 b", "3 prog 2 a"], []),
    ("two takeovers: the displacement is the first higher acquisition",
     ["1 acq 1 a", "2 acq 2 b", "3 acq 3 c", "4 prog 1 a", "5 prog 2 b"],
     [("stale_activity", 4, None, None, [], False), ("stale_activity", 5, None, None, [], False)]),
    ("an ordering conflict: a commit and an unrelated stale rejection share seq 4, each judged on its own",
     ["1 acq 1 a", "2 acq 2 b", "3 att 1 a x", ev("4 com 1 a x", event_id="m"), ev("4 rej 1 a y", event_id="n")],
     [("stale_attempt", 3, "committed", None, [], False), ("rejected_attempt", 4, "rejected", 4, [], False),
      ("stale_commit", 4, "committed", None, [], False)]),
    ("a rejection is a receipt only for attempts of its own triple, even sharing a seq",
     ["1 acq 2 a", "2 acq 0 b", "3 att 1 c y", "4 att 0 b y", "5 com 0 b y", "5 rej 1 c x"],
     [("stale_attempt", 3, "unknown", None, [], False), ("stale_attempt", 4, "committed", None, [], False),
      ("rejected_attempt", 5, "rejected", 5, [], False), ("stale_commit", 5, "committed", None, [], False)]),
    ("two stale progress events at one seq: one finding",
     ["1 acq 1 a", "2 acq 2 b", ev("3 prog 1 a", event_id="m"), ev("3 prog 1 c", event_id="n")],
     [("stale_activity", 3, None, None, [], False)]),
    ("outcome_verified is never a finding",
     ["1 acq 1 a", "2 acq 2 b", "3 ver a x"], []),
]


findings = engine_findings


@pytest.mark.parametrize("engine", ["batch", "live"])
@pytest.mark.parametrize("specs, expected", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_rule(engine, specs, expected, tmp_path):
    found = findings(engine, specs, tmp_path)
    assert [(f.grade.value, f.seq, f.outcome.value if f.outcome else None, f.receipt_seq, list(f.epochs),
             f.unstable_effect_key) for f in found] == expected


@pytest.mark.parametrize("specs", [r[1] for r in RULES], ids=[r[0] for r in RULES])
def test_engines_agree_field_by_field(specs, tmp_path):
    batch = findings("batch", specs, tmp_path)
    assert [f.to_dict() for f in findings("live", specs, tmp_path)] == [f.to_dict() for f in batch]


@pytest.mark.parametrize("key, grade, position, displaced", [
    ("ledger/export/2026-07-26", "stale_commit", 8, 17),
    ("k", "double_commit", None, None),
    ("tenant-β/ünïcode", "rejected_attempt", -3, 0),
])
def test_finding_and_incident_ids_are_stable_ids(key, grade, position, displaced):
    """finding_id and incident_id write stable_id's text out for speed: they must stay the same
    ids, or a rerun, the live detector and older documents would name findings differently."""
    from auditor.core.model import Grade
    from auditor.rules import finding_id, incident_id, stable_id

    assert finding_id(key, Grade(grade), position) == stable_id("f-", key, grade, position)
    assert incident_id(key, displaced) == stable_id("i-", key, displaced)
    assert finding_id("ledger/export/2026-07-26", Grade.STALE_COMMIT, 8) == "f-e92bb6ea709bd1e2"


@pytest.mark.slow
def test_the_finding_builder_makes_the_same_findings_as_the_dataclass():
    """detect builds findings with model.build_finding (the slots' setters, not a frozen
    __init__): every finding of the fixtures comes out equal, field for field, and defaults apply."""
    import dataclasses

    from auditor.core.model import (Finding, Grade, Incident, Kind, build_effect, build_event_ref,
                                    build_finding, build_incident, build_owner, builder)

    from ..conftest import FIXTURES, audited

    seen = 0
    for path in sorted(FIXTURES.glob("*.jsonl")):
        r = audited(path).result  # a log kept with a --map is read with it
        for f in r.findings:
            values = {name: getattr(f, name) for name in f.__slots__}
            built = build_finding(**values)
            assert built == f and hash(built) == hash(f) and repr(built) == repr(f)
            assert build_finding(*values.values()) == f
            seen += 1
        for i in r.incidents:
            values = {name: getattr(i, name) for name in i.__slots__}
            assert build_incident(**values) == i and repr(build_incident(*values.values())) == repr(i)
            assert build_owner(i.current.worker, i.current.epoch) == i.current
            for e in i.effects:
                assert build_effect(e.effect_key, e.sink_outcome, e.verified, e.verified_seq,
                                    e.verified_position) == e
            if i.first_stale is not None:
                s = i.first_stale
                assert build_event_ref(s.seq, s.position, s.ts, s.kind, s.file, s.line) == s
    assert seen > 50
    short = build_finding("f-1", Grade.STALE_ACTIVITY, "k", 5, 5, Kind.PROGRESS, 1, "w", 2, "w2", 3, 3)
    assert short == Finding("f-1", Grade.STALE_ACTIVITY, "k", 5, 5, Kind.PROGRESS, 1, "w", 2, "w2", 3, 3)
    assert (short.epochs, short.reasons, short.incident_id, short.line) == ((), (), "", None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        short.epoch = 3  # still frozen
    with pytest.raises(TypeError):
        build_finding("f-1")  # the required fields are required

    assert build_incident(*(getattr(i, n) for n in Incident.__slots__[:23])).finding_ids == ()  # default_factory

    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        n: int

        def __post_init__(self):
            raise ValueError

    with pytest.raises(TypeError, match="only assigns"):
        builder(Checked)

    @dataclasses.dataclass(frozen=True, slots=True)
    class Inherits(Checked):
        m: int = 0

    @dataclasses.dataclass(frozen=True, slots=True)
    class Keywords:
        n: int = dataclasses.field(kw_only=True)

    for cls in (Inherits, Keywords):
        with pytest.raises(TypeError, match="only assigns"):
            builder(cls)
