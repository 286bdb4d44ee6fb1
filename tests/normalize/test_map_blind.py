"""``auditor map`` on shapes an independent blind test found dangerous (issue 43), each written
from the logger's side: the audit with the unedited suggestion never passes (exit 0) over a truth
with a finding at or above ``stale_attempt``. A message whose lines carry an owner's evidence is
never ignored; a past tense of an effect's verb is never an attempt; an effect's words never
become an acquisition by structure; a hint never proposes ``progress`` where words may say an
effect."""

from __future__ import annotations

import json

import pytest

from auditor import audit
from auditor.normalize.suggest import suggest
from auditor.normalize.suggest.writer import render
from auditor.normalize.words import hint, say


def _round_trip(tmp_path, rows):
    log = tmp_path / "service.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    found = suggest([log])
    vocab = tmp_path / "suggested.toml"
    vocab.write_text(render(found))
    return found, log, vocab


def _notifier_rows():
    """A campaign worker logs its side with the job and its token; the push gateway logs only its
    answer, with its copy of the token (``fence``), the revision and the dedupe key, no job."""
    rows, rev = [], 100
    def line(**kw):
        nonlocal rev
        rev += 1
        rows.append({"time": f"2026-12-07T01:00:{rev - 100:02d}Z", "level": "info", "rev": rev, **kw})
    for job, token, worker in (("campaign-1/batch-1", 3, "w-a"), ("campaign-2/batch-1", 1, "w-b")):
        line(msg="took ownership of batch", job_id=job, token=token, worker=worker)
        line(msg="checkpoint saved", job_id=job, token=token, worker=worker)
    # w-a is paused; w-c takes campaign-1 over with token 4; both push, the gateway answers both
    line(msg="took ownership of batch", job_id="campaign-1/batch-1", token=4, worker="w-c")
    for token in (4, 3):
        line(msg="apns returned 200", fence=token, collapse_key="campaign-1:batch-1:push")
    line(msg="apns returned 200", fence=1, collapse_key="campaign-2:batch-1:push")
    return rows


def test_gateway_lines_carrying_the_token_are_never_ignored_though_they_give_no_key(tmp_path):
    found, log, vocab = _round_trip(tmp_path, _notifier_rows())
    ignored = {v for m in found.ignore for v in m.values}
    assert "apns returned 200" not in ignored
    assert "apns returned 200" not in {v for m in found.kinds for v in m.values if m.kind == "progress"}
    with audit([log], vocabulary=vocab) as result:
        assert result.verdict.exit_code != 0  # the stale push (token 3 after 4) cannot pass


def _payout_rows():
    """A payout job whose first line is a renewal; a paused worker (epoch 4) sends after epoch 5
    took over: the payout is sent twice."""
    rows, rev = [], 2000
    def line(msg, epoch, worker, **kw):
        nonlocal rev
        rev += 1
        rows.append({"level": "info", "msg": msg, "time": f"2026-12-07T01:00:{rev - 2000:02d}Z",
                     "job_id": "payouts/eu/2026-12-06", "lease_epoch": epoch, "rev": rev, "worker": worker, **kw})
    line("lease renewed", 4, "w-a", ttl_s=15)
    line("checkpoint saved", 4, "w-a")
    line("sending payout", 4, "w-a", payout_id="po-1", bank="sepa")
    line("payout sent", 4, "w-a", payout_id="po-1", bank="sepa")
    line("lease acquired", 5, "w-b")
    line("sending payout", 5, "w-b", payout_id="po-2", bank="sepa")
    line("payout sent", 5, "w-b", payout_id="po-2", bank="sepa")
    line("sending payout", 4, "w-a", payout_id="po-2", bank="sepa")
    line("payout sent", 4, "w-a", payout_id="po-2", bank="sepa")
    return rows


def test_a_sent_payout_is_never_suggested_as_an_attempt_so_the_double_commit_is_kept(tmp_path):
    found, log, vocab = _round_trip(tmp_path, _payout_rows())
    placed = {v: m.kind for m in found.kinds for v in m.values}
    assert placed.get("payout sent") != "effect_attempted"
    with audit([log], vocabulary=vocab) as result:
        assert result.verdict.exit_code != 0
        if result.verdict.exit_code == 1:  # placed as a commit: the stale commit is found
            assert ("stale_commit", 2009) in {(f.grade.value, f.seq) for f in result.findings}


@pytest.mark.parametrize("text", [
    "payout sent", "webhook delivered", "ledger entry posted", "payment captured", "report written",
    "file uploaded", "card charged", "migration applied", "invoice created", "bulk index acknowledged",
    "notification pushed", "apns returned 200", "partition loaded"])
def test_a_past_tense_of_an_effect_is_a_commit_or_to_decide_never_an_attempt(text):
    said = say(text)
    assert said.kind in ("effect_committed", None), said
    assert said.effect
    assert hint(text) != '"progress"'


def test_an_effects_words_never_become_an_acquisition_by_the_shape_of_their_lines(tmp_path):
    """Each "delivering webhook" line opens a new epoch of its key (an acquisition's shape), and
    no member of it reads as an effect key: its words still say an effect, so it is to decide."""
    rows = []
    for i, hook in enumerate(("evt-1", "evt-2", "evt-3")):
        for epoch in (1, 2):
            rows.append({"msg": "delivering webhook", "job": f"hooks/{hook}", "token": epoch + 2 * i,
                         "rev": len(rows) + 1, "worker": f"w{epoch}"})
            rows.append({"msg": "progress", "job": f"hooks/{hook}", "token": epoch + 2 * i,
                         "rev": len(rows) + 1, "worker": f"w{epoch}"})
    found, _log, _vocab = _round_trip(tmp_path, rows)
    placed = {v: m.kind for m in found.kinds for v in m.values}
    assert placed.get("delivering webhook") != "lease_acquired"
    assert "delivering webhook" not in {v for m in found.ignore for v in m.values}


@pytest.mark.parametrize("text", ["took ownership of batch", "took ownership of shard 7", "assumed ownership"])
def test_taking_ownership_says_an_acquisition_never_progress(text):
    assert say(text).kind == "lease_acquired"


@pytest.mark.parametrize("text", ["bulk index acknowledged", "Invoice created", "apns returned 200",
                                  "device gateway answered 409", "webhook delivering", "loading partition"])
def test_a_hint_never_proposes_progress_alone_where_words_may_say_an_effect(text):
    assert hint(text) != '"progress"'
    assert "effect_" in hint(text)


def test_a_shard_or_an_order_is_the_workflow_key_but_a_kafka_partition_number_is_not(tmp_path):
    """The key named ``shard`` (ids), beside Kafka's integer ``partition``: the shard is the key,
    so the stale commit of the paused owner of shard-3 is found."""
    rows, rev = [], 500
    def line(msg, shard, token, worker, **kw):
        nonlocal rev
        rev += 1
        rows.append({"event": msg, "shard": shard, "partition": rev % 3, "fence_token": token, "rev": rev,
                     "worker": worker, **kw})
    line("shard claimed", "acme/shard-3", 4, "w-a")
    line("shard claimed", "acme/shard-9", 2, "w-b")
    line("shard claimed", "acme/shard-3", 5, "w-c")
    line("invoice posted", "acme/shard-3", 5, "w-c", idempotency_key="inv-1")
    line("invoice posted", "acme/shard-3", 4, "w-a", idempotency_key="inv-1")
    line("invoice posted", "acme/shard-9", 2, "w-b", idempotency_key="inv-2")
    found, log, vocab = _round_trip(tmp_path, rows)
    assert '\nshard = "workflow_key"' in render(found)
    assert 'partition = "workflow_key"' not in render(found)
    with audit([log], vocabulary=vocab) as result:
        assert result.verdict.exit_code == 1
        assert ("stale_commit", "acme/shard-3") in {(f.grade.value, f.workflow_key) for f in result.findings}
