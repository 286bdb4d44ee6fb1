"""SPEC section 8 (authority and compensation): one table of histories, run through both engines.

Each rule and each reason has a history, with controls: a key without the authority vocabulary is
never affected, a revalidated takeover is clean. Whole finding lists are compared, batch and live.
"""

from __future__ import annotations

import pytest

from auditor import audit
from auditor.core.model import Grade

from ..conftest import ev, write_jsonl
from ..helpers import engine_findings as findings


def grant(seq: int, aid: str = "mandate-7", expires: str | None = None, **kw) -> dict:
    d = {"seq": seq, "workflow_key": "k", "kind": "authority_granted", "authority_id": aid, **kw}
    if expires:
        d["expires_at"] = expires
    return d


def revoke(seq: int, aid: str = "mandate-7") -> dict:
    return {"seq": seq, "workflow_key": "k", "kind": "authority_revoked", "authority_id": aid}


def revalidated(seq: int, epoch: int, decision: str) -> dict:
    return {"seq": seq, "workflow_key": "k", "kind": "revalidated", "epoch": epoch, "decision": decision}


def resumed(seq: int, epoch: int) -> dict:
    return {"seq": seq, "workflow_key": "k", "kind": "resumed", "epoch": epoch}


def at(spec: str, ts: str | None = None, **kw) -> dict:
    d = ev(spec, **kw)
    if ts:
        d["ts"] = ts
    return d


def compensation(seq: int, key: str = "x") -> dict:
    return {"seq": seq, "workflow_key": "k", "kind": "effect_compensated", "effect_key": key}


# (name, history, [(grade, seq, reasons, incident anchor)])
RULES = [
    ("control: a key without the authority vocabulary is never affected",
     ["1 acq 1 a", "2 com 1 a x", "3 acq 2 b", "4 com 2 b y"], []),
    ("control: a revalidated takeover is clean",
     [grant(1), "2 acq 1 a", at("3 com 1 a x", authority_id="mandate-7"), "4 acq 2 b",
      revalidated(5, 2, "continue"), at("6 com 2 b y", authority_id="mandate-7")], []),
    ("revoked: an effect under a revoked mandate",
     [grant(1), "2 acq 1 a", revoke(3), at("4 com 1 a x", authority_id="mandate-7")],
     [("unauthorized_commit", 4, ["revoked"], "mandate-7")]),
    ("a later grant of the same id restores it",
     [grant(1), "2 acq 1 a", revoke(3), grant(4), at("5 com 1 a x", authority_id="mandate-7")], []),
    ("expired: the mandate's expires_at is before the effect's ts (seed 004's refund)",
     [grant(1, expires="2026-07-26T14:00:00Z"), "2 acq 1 a",
      at("3 com 1 a refund:inv-9", "2026-07-26T14:05:00Z", authority_id="mandate-7")],
     [("unauthorized_commit", 3, ["expired"], "mandate-7")]),
    ("expired: an attempt in time is authorized",
     [grant(1, expires="2026-07-26T14:00:00Z"), "2 acq 1 a",
      at("3 att 1 a refund:inv-9", "2026-07-26T13:59:00Z", authority_id="mandate-7")], []),
    ("unrevalidated_resume: an acquisition after the first is a resume point",
     [grant(1), "2 acq 1 a", "3 acq 2 b", "4 att 2 b x"],
     [("unauthorized_attempt", 4, ["unrevalidated_resume"], "resume@3")]),
    ("unrevalidated_resume: a resumed event",
     [grant(1), "2 acq 1 a", resumed(3, 1), "4 com 1 a x"],
     [("unauthorized_commit", 4, ["unrevalidated_resume"], "resume@3")]),
    ("a revalidation by a displaced epoch does not count",
     [grant(1), "2 acq 1 a", "3 acq 2 b", revalidated(4, 1, "continue"), "5 com 2 b x"],
     [("unauthorized_commit", 5, ["unrevalidated_resume"], "resume@3")]),
    ("failed_revalidation is terminal: continue without a new grant is a diagnostic, not authority",
     [grant(1), "2 acq 1 a", revalidated(3, 1, "pause"), revalidated(4, 1, "continue"), "5 com 1 a x"],
     [("unauthorized_commit", 5, ["failed_revalidation"], "mandate-7" if False else "revalidation@3")]),
    ("a new grant after a failed revalidation restores authority",
     [grant(1), "2 acq 1 a", revalidated(3, 1, "terminate"), grant(4, "mandate-8"), "5 com 1 a x"], []),
    ("an unauthorized attempt the sink rejected is a rejected_attempt: the mandate check held",
     [grant(1), "2 acq 1 a", revoke(3), at("4 rej 1 a x", authority_id="mandate-7")],
     [("rejected_attempt", 4, ["revoked"], "mandate-7")]),
    ("stale and unauthorized: one finding at the more severe grade, with both reasons",
     [grant(1), "2 acq 1 a", "3 acq 2 b", "4 com 1 a x"],
     [("unauthorized_commit", 4, ["stale", "unrevalidated_resume"], "resume@3")]),
    ("a stale attempt resolved by a commit, unauthorized too",
     [grant(1), "2 acq 1 a", "3 acq 2 b", "4 att 1 a x", "5 com 1 a x"],
     [("unauthorized_attempt", 4, ["stale", "unrevalidated_resume"], "resume@3"),
      ("unauthorized_commit", 5, ["stale", "unrevalidated_resume"], "resume@3")]),
    ("an unauthorized attempt the sink then rejected: one rejected_attempt, the refusal its receipt",
     [grant(1), "2 acq 1 a", revoke(3), at("4 att 1 a x", authority_id="mandate-7"),
      at("5 rej 1 a x", authority_id="mandate-7")],
     [("rejected_attempt", 4, ["revoked"], "mandate-7")]),
    ("an unauthorized attempt then committed: unauthorized_attempt and unauthorized_commit",
     [grant(1), "2 acq 1 a", revoke(3), at("4 att 1 a x", authority_id="mandate-7"),
      at("5 com 1 a x", authority_id="mandate-7")],
     [("unauthorized_attempt", 4, ["revoked"], "mandate-7"), ("unauthorized_commit", 5, ["revoked"], "mandate-7")]),
    ("an unauthorized attempt never answered",
     [grant(1), "2 acq 1 a", resumed(3, 1), "4 att 1 a x", "5 prog 1 a"],
     [("unauthorized_attempt", 4, ["unrevalidated_resume"], "resume@3")]),
    ("unauthorized attempts sharing a seq (an ordering conflict) are one finding, as every finding",
     [grant(1), "2 acq 1 a", resumed(3, 1), at("4 att 1 a x", event_id="e4x"), at("4 att 1 a y", event_id="e4y")],
     [("unauthorized_attempt", 4, ["unrevalidated_resume"], "resume@3")]),
    ("a refusal and an unanswered attempt sharing a seq: one finding of each grade",
     [grant(1), "2 acq 1 a", resumed(3, 1), at("4 rej 1 a x", event_id="e4a"), at("4 att 1 a x", event_id="e4b")],
     [("rejected_attempt", 4, ["unrevalidated_resume"], "resume@3"),
      ("unauthorized_attempt", 4, ["unrevalidated_resume"], "resume@3")]),
    ("compensated: a double commit followed by a compensation record",
     ["1 acq 1 a", "2 com 1 a x", "3 acq 2 b", "4 com 2 b x", compensation(5)],
     [("compensated", 4, [], None)]),
    ("a compensation before the double commit compensates nothing",
     ["1 acq 1 a", "2 com 1 a x", compensation(3), "4 acq 2 b", "5 com 2 b x"],
     [("double_commit", 5, [], None)]),
    ("one compensation per double commit, the earliest first",
     ["1 acq 1 a", "2 com 1 a x", "3 acq 2 b", "4 com 2 b x", "5 acq 3 c", "6 com 3 c x", compensation(7)],
     [("compensated", 4, [], None), ("double_commit", 6, [], None)]),
]


def summary(found) -> list[tuple]:
    return [(f.grade.value, f.seq, list(f.reasons), f.anchor) for f in found]


@pytest.mark.parametrize("engine", ["batch", "live"])
@pytest.mark.parametrize("specs, expected", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_authority_rule(engine, specs, expected, tmp_path):
    assert summary(findings(engine, specs, tmp_path)) == expected


@pytest.mark.parametrize("specs", [r[1] for r in RULES], ids=[r[0] for r in RULES])
def test_engines_agree_field_by_field(specs, tmp_path):
    batch = findings("batch", specs, tmp_path)
    assert [f.to_dict() for f in findings("live", specs, tmp_path)] == [f.to_dict() for f in batch]


def test_grade_order_of_revision_2():
    assert [g.value for g in Grade] == [
        "stale_activity", "rejected_attempt", "compensated", "stale_attempt", "unauthorized_attempt",
        "stale_commit", "unauthorized_commit", "double_commit"]


def test_seed_004_refund_incident_says_which_mandate_and_since_when(tmp_path):
    path = write_jsonl(tmp_path / "refund.jsonl", [
        grant(1, expires="2026-07-26T14:00:00Z"), at("2 acq 1 w1", "2026-07-26T13:50:00Z"),
        at("3 acq 2 w2", "2026-07-26T14:04:00Z"), revalidated(4, 2, "continue"),
        at("5 com 2 w2 refund:inv-9", "2026-07-26T14:05:00Z", authority_id="mandate-7", reporter="sink")])
    with audit(path) as result:
        assert result.input.quarantined == 0
        assert result.verdict.value == "fail"
        [incident] = result.incidents
        [finding] = result.findings
    assert (finding.grade, finding.reasons, finding.since_ts) == (
        Grade.UNAUTHORIZED_COMMIT, ("expired",), "2026-07-26T14:00:00Z")
    assert incident.witness == ("mandate-7 expired at 2026-07-26T14:00:00Z; epoch 2 (w2) then committed "
                                "refund:inv-9 at 2026-07-26T14:05:00Z: it took effect without a valid mandate.")
    assert incident.response.startswith("Hand the run to a human")
    assert incident.confidence.value == "high"  # the sink reported it


def test_an_expiry_reported_by_the_worker_is_medium_confidence(tmp_path):
    path = write_jsonl(tmp_path / "refund.jsonl", [
        grant(1, expires="2026-07-26T14:00:00Z"), at("2 acq 1 w1", "2026-07-26T13:50:00Z"),
        at("3 com 1 w1 refund:inv-9", "2026-07-26T14:05:00Z", authority_id="mandate-7")])
    with audit(path) as result:
        assert [(i.severity.value, i.confidence.value) for i in result.incidents] == [
            ("unauthorized_commit", "medium")]


def test_diagnostics_ungranted_and_retry(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [
        grant(1), ev("2 acq 1 a"), at("3 att 1 a x", authority_id="mandate-9"), revalidated(4, 1, "pause"),
        revalidated(5, 1, "continue")])
    with audit(path) as result:
        assert result.input.quarantined == 0
        kinds = [(d.kind.value, d.seq) for d in result.diagnostics]
        details = [d.detail for d in result.diagnostics]
    assert kinds == [("ungranted_authority", 3), ("revalidation_retry", 5)]
    assert details[1] == ("revalidated continue at seq 5 after the revalidation at seq 4 said pause: a failed "
                          "revalidation is terminal; only a new authority_granted restores authority")


# The batch audit casts in DuckDB, the live detector parses in Python: outside the one shape both
# read alike (vocabulary.INSTANT_SHAPE), text is not a time in either ("... UTC", ISO 8601 basic
# format, week dates); a lower-case t or z is RFC 3339, read by both.
@pytest.mark.parametrize("ts", ["2026-07-26T14:05:00 UTC", "20260726T140500Z", "2026-07-26t14:05:00Z",
                                "2026-07-26 14:05:00z", "2026-W30-7", "2026-07-26T24:00:00Z", "1785074700"])
def test_engines_read_a_ts_alike_for_the_expiry(ts, tmp_path):
    specs = [grant(1, expires="2026-07-26T14:00:00Z"), "2 acq 1 a",
             at("3 com 1 a refund:inv-9", ts, authority_id="mandate-7")]
    batch = findings("batch", specs, tmp_path)
    assert [f.to_dict() for f in findings("live", specs, tmp_path)] == [f.to_dict() for f in batch]
    read = ts in ("2026-07-26t14:05:00Z", "2026-07-26 14:05:00z", "1785074700")  # 14:05 UTC, past the expiry
    assert any("expired" in f.reasons for f in batch) == read
