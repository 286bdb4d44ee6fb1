"""Finding and incident ids are computed by DuckDB as detection's rows are read (``detect.sql``'s
``read_findings``), not in Python per finding (issue 48): they must be the ids ``rules.ids``
defines, which the live detector and the span processor compute in Python. Checked here on every
fixture and on keys DuckDB and Python could spell differently (non-ASCII, the separator itself),
with each grade whose id the SQL resolves: an attempt's (rejected or stale), a double commit's
(its lowest epoch's incident) and a compensated one (authorize's, from the double commit's).
In an audit's result the incident ids are explain's (it groups the findings again and copies a
finding whose id differs), so a wrong incident id from the SQL is seen only where detection hands
the findings over (``test_detection_hands_the_ids_over``); the finding ids are seen in both.
"""

from __future__ import annotations

import json

import pytest

from auditor import audit
from auditor.core.model import Grade
from auditor.rules import authority_incident_id, displaced_epoch, finding_id, incident_id

from ..conftest import audited, ev
from ..explain.test_fixtures import CASES, _log_of


def _check(findings) -> None:
    """Assert every finding's ids are those of ``rules.ids``."""
    for f in findings:
        assert f.id == finding_id(f.workflow_key, f.grade, f.place), f
        if f.anchor is None:  # unauthorized findings group by their mandate (authority_incident_id)
            assert f.incident_id == incident_id(f.workflow_key, displaced_epoch(f.grade, f.epoch, f.epochs)), f
        else:
            assert f.incident_id == authority_incident_id(f.workflow_key, f.anchor), f


@pytest.mark.parametrize("expected", CASES, ids=lambda p: p.name.removesuffix(".expected.json"))
def test_fixture_ids_are_the_rules_ids(expected):
    _check(audited(_log_of(expected)).result.findings)


# Keys whose bytes DuckDB and Python must hash alike: non-ASCII, the id's own separator (\x1f).
KEYS = ["payments/wf-1", "café/заказ-7", "a\x1fb", "支付/流程"]


def _log(tmp_path, key):
    events = [ev("1 acq 1 w1", key), ev("2 com 1 w1 refund", key),
              ev("3 acq 2 w2", key), ev("4 com 2 w2 refund", key),          # a double commit, under epoch 2
              ev("5 att 1 w1 charge", key), ev("6 rej 1 w1 charge", key),   # a rejected attempt
              ev("7 att 1 w1 mail", key),                                    # a stale attempt, unresolved
              ev("8 com 1 w1 invoice", key),                                 # a stale commit
              ev("9 prog 1 w1", key)]                                        # stale activity
    path = tmp_path / "log.jsonl"
    path.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in events), encoding="utf-8")
    return path


@pytest.mark.parametrize("key", KEYS, ids=["ascii", "latin-cyrillic", "separator", "cjk"])
def test_ids_of_each_grade_and_any_key(tmp_path, key):
    with audit([_log(tmp_path, key)]) as result:
        findings = list(result.findings)
        grades = {f.grade for f in findings}
        assert {Grade.REJECTED_ATTEMPT, Grade.STALE_ATTEMPT, Grade.STALE_COMMIT, Grade.DOUBLE_COMMIT,
                Grade.STALE_ACTIVITY} <= grades, grades
        _check(findings)
        double = next(f for f in findings if f.grade is Grade.DOUBLE_COMMIT)
        assert double.epoch == 2 and double.incident_id == incident_id(key, 1)  # refund's first committer
        assert {i.id for i in result.incidents} == {f.incident_id for f in findings}


def test_compensated_double_commit_keeps_the_rules_ids():
    """Compensation (authorize) replaces a double commit after the ids were read: its finding id
    is the compensated grade's, its incident the double commit's."""
    from ..conftest import FIXTURES

    findings = audited(FIXTURES / "compensated_double_charge.jsonl").result.findings
    assert any(f.grade is Grade.COMPENSATED for f in findings)
    _check(findings)


@pytest.mark.parametrize("key", KEYS[1:3], ids=["latin-cyrillic", "separator"])
def test_detection_hands_the_ids_over(tmp_path, key):
    """Explain would mend a wrong incident id (it groups findings again, and copies a finding into
    its incident), so the rows' own ids are checked where detection hands them over: a finding
    that carried another id would cost explain a copy, unseen in any document."""
    import auditor.detect.batch as batch
    from auditor import ingest_paths
    from auditor.store import Store

    with Store(None) as store:
        ingest_paths([_log(tmp_path, key)], store, "auto", None)
        detection = batch.detect(store)
        try:
            findings = [f for _, keyed in detection.batches() for kf in keyed for f in kf.findings]
        finally:
            detection.close()
    assert {f.grade for f in findings} >= {Grade.DOUBLE_COMMIT, Grade.REJECTED_ATTEMPT, Grade.STALE_ATTEMPT}
    _check(findings)
