"""What an incident tells the operator to do, and the witness sentence, as whole values."""

from __future__ import annotations

from auditor.core.model import Grade
from auditor.rules import RESPONSES

from ..conftest import history


def test_a_worker_heartbeating_after_its_stale_commit_is_told_to_stop(audit_events):
    result = audit_events(history("1 acq 17 alpha", "2 acq 18 beta", "3 com 17 alpha X", "4 prog 17 alpha"))
    [incident] = result.incidents
    assert incident.response == RESPONSES[Grade.STALE_COMMIT]
    assert incident.responses == (RESPONSES[Grade.STALE_COMMIT], RESPONSES[Grade.STALE_ACTIVITY])
    assert incident.to_dict()["responses"] == list(incident.responses)


def test_each_distinct_action_once_most_urgent_first(audit_events):
    result = audit_events(history("1 acq 1 a", "2 acq 2 b", "3 prog 1 a", "4 att 1 a X", "5 prog 1 a",
                                  "6 com 2 b X"))
    [incident] = result.incidents
    assert incident.responses == (RESPONSES[Grade.STALE_ATTEMPT], RESPONSES[Grade.STALE_ACTIVITY])


def test_witness_of_a_stale_commit_that_is_also_the_double_commit(audit_events):
    result = audit_events(history("1 acq 17 alpha", "2 acq 18 beta", "3 com 18 beta X", "4 com 17 alpha X"))
    assert [i.witness for i in result.incidents] == [
        "epoch 18 (beta) was acquired at seq 2; epoch 17 (alpha) then committed X at seq 4: a displaced "
        "owner changed the outside world. Epoch 18 had already committed X: the effect happened twice."]


def test_witness_names_every_earlier_epoch(audit_events):
    result = audit_events(history("1 acq 1 a", "2 com 1 a X", "3 acq 2 b", "4 com 2 b X", "5 acq 3 c",
                                  "6 com 3 c X"))
    assert [i.witness for i in result.incidents] == [
        "epoch 2 (b) was acquired at seq 3. Epoch 2 (b) committed X again at seq 4 after epoch 1 had: "
        "the effect happened twice. Epoch 3 (c) committed X again at seq 6 after epochs 1 and 2 had: the effect happened twice."]


def test_html_row_of_a_double_commit_by_the_current_owner_has_no_arrow():
    import contextlib

    from auditor import audit
    from auditor.render.html import render_html

    from ..conftest import ROOT

    with contextlib.chdir(ROOT):
        page = render_html(audit("fixtures/seed_split_brain.jsonl"))
    assert '<td class="owner">18\u00a0(beta), the current owner</td>' in page
    assert "18\u00a0(beta) &rarr; 18\u00a0(beta)" not in page
