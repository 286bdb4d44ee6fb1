"""The first incidents a spooled list keeps beside its lines (``stream.Incidents``): exactly
``sorted(incidents, key=order)[:n]`` in both orders reports rank them in, however the incidents
arrive, with the less severe ones of a batch never ranked once ``KEPT`` are held."""

from __future__ import annotations

import random

import pytest

from auditor import audit
from auditor.core.model import GRADE_RANK
from auditor.explain.incidents import severity, urgency
from auditor.explain.stream import KEPT, Incidents
from auditor.simulate.scale import generate_log


@pytest.fixture(scope="module")
def incidents(tmp_path_factory):
    log = tmp_path_factory.mktemp("first") / "log.jsonl"
    generate_log(log, 30_000, seed=5)
    with audit([log]) as result:
        found = list(result.incidents)
    return found


@pytest.mark.parametrize("batch", [1, 7, 250, 100_000])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_first_incidents_are_the_sorted_ones(incidents, batch, seed):
    grades = {GRADE_RANK[i.severity] for i in incidents}
    assert len(incidents) > 3 * KEPT and len(grades) >= 3  # more than kept, of several grades
    rng = random.Random(seed)
    given = incidents + rng.sample(incidents, len(incidents) // 3)  # ties: the same incident twice
    rng.shuffle(given)
    spooled = Incidents()
    for start in range(0, len(given), batch):
        spooled.add(given[start:start + batch])
    assert len(spooled) == len(given)
    for order in (severity, urgency):
        for n in (1, 50, KEPT):
            got, want = spooled.first(order, n), sorted(given, key=order)[:n]
            assert [id(i) for i in got] == [id(i) for i in want]  # the same objects, ties in arrival order
    assert spooled.first(severity, KEPT + 1) is None  # more than kept: the caller reads them all
