"""SPEC revision 3.1 on the Spark engine: the allowances apart (``allow_unplaced``)."""

from __future__ import annotations

import json

import pytest

from auditor import Verdict, audit
from auditor.render.json import render_json

from ..conftest import FIXTURES

pytest.importorskip("pyspark", reason="the spark extra is not installed")
pytestmark = pytest.mark.slow

UNPLACED = FIXTURES / "unplaced_displaced_commit_needs_allow_unplaced.jsonl"


def _same(spark_result, local) -> None:
    a, b = json.loads(render_json(spark_result)), json.loads(render_json(local))
    assert a.pop("engine") == "spark"
    b.pop("engine")
    assert a == b


@pytest.mark.parametrize("options, verdict", [
    ({"allow_quarantined": 5}, Verdict.INCOMPLETE), ({"allow_unplaced": 1}, Verdict.PASS)])
def test_spark_keeps_the_allowances_apart(spark_session, options, verdict):
    from auditor.spark import audit as spark_audit

    got = spark_audit([UNPLACED], spark=spark_session, **options)
    assert got.verdict is verdict
    with audit([UNPLACED], **options) as local:
        _same(got, local)


# The revision 3.1 fixtures themselves are in test_spark.py's every-fixture sweep (SWEPT; one Spark audit
# per fixture, compared with the single-node document and HTML): not audited twice here.
