"""The HTML report's context (``render/html/context.py``): the data the page is drawn from,
asserted as whole values."""

from __future__ import annotations

import dataclasses

from auditor import audit
from auditor.render.html import build_context

from ..conftest import FIXTURES
from .render_kit import SEED_KEY

def test_seed_context_header(seed):
    ctx = build_context(seed)
    assert (ctx.verdict, ctx.fail_on, ctx.failing, ctx.total_findings) == ("fail", "stale_attempt", 3, 4)
    assert [(g.grade, g.count) for g in ctx.grade_counts] == [
        ("stale_activity", 1), ("rejected_attempt", 0), ("compensated", 0), ("stale_attempt", 1),
        ("unauthorized_attempt", 0), ("stale_commit", 1), ("unauthorized_commit", 0), ("double_commit", 1)]
    assert dataclasses.astuple(ctx.input) == (
        ["fixtures/seed_split_brain.jsonl"], "16", "16", "0", "0", "", "", "authoritative", [], 0, [], [])
    assert [(s.label, s.value) for s in ctx.stats] == [
        ("workflows", "3"), ("acquisitions", "5"), ("handovers", "2"), ("clean handover", "1"),
        ("incident", "1"), ("diagnostics", "0")]
    assert ctx.notes == []
    assert [(w.workflow_key, w.severity, w.findings) for w in ctx.workflows] == [
        (SEED_KEY, "double_commit", 4), ("checkout/sync/cart-881", "", 0),
        ("reports/index/2026-07-26", "", 0)]


def test_seed_incident_card(seed):
    (card,) = build_context(seed).cards
    (incident,) = seed.incidents
    assert (card.id, card.workflow_key, card.severity) == (incident.id, SEED_KEY, "double_commit")
    assert card.witness == incident.witness
    assert card.witness.startswith("epoch 18 (beta) was acquired at seq 5; epoch 17 (alpha) then "
                                   "committed release-index/2026-07-26 at seq 8")
    assert card.response == incident.response
    assert [(f.label, f.value) for f in card.facts] == [
        ("displaced owner", "epoch 17 (alpha)"),
        ("current owner", "epoch 18 (beta)"),
        ("transition", "seq 5"),
        ("stale window", "seqs 6\u20138, until 3 min after the transition"),
        ("first stale", "seq 6 \u00b7 progress \u00b7 2026-07-26T02:06:00Z \u00b7 fixtures/seed_split_brain.jsonl:6"),
        ("last stale", "seq 8 \u00b7 effect_committed \u00b7 2026-07-26T02:08:00Z \u00b7 fixtures/seed_split_brain.jsonl:8"),
        ("sink", "committed"),
        ("verification", "unverified"),
        ("confidence", "high: findings reported by sink, worker"),
        ("freshness", "last stale event 8 min before the newest event"),
    ]
    assert [dataclasses.astuple(e) for e in card.effects] == [
        ("release-index/2026-07-26", "committed", "unverified", False)]
    assert [(g.grade, g.count) for g in card.grades] == [
        ("double_commit", 1), ("stale_commit", 1), ("stale_attempt", 1), ("stale_activity", 1)]
    assert card.finding_ids == [f.id for f in seed.findings]


def test_rejected_attempt_passes_and_says_the_fence_held():
    result = audit(FIXTURES / "rejected_attempt.jsonl")
    ctx = build_context(result)
    assert ctx.verdict == "pass" and ctx.failing == 0
    assert [(c.workflow_key, c.severity) for c in ctx.cards] == [
        ("payments/capture/inv-7", "rejected_attempt"), ("payments/capture/inv-8", "rejected_attempt")]
    assert {c.meaning for c in ctx.cards} == {"the fence held: near miss"}
    # The rejection is drawn as a refusal, in the colour of the finding it is the receipt of.
    receipts = [[(m.seq, m.css, m.title.splitlines()[-1])
                 for m in c.timeline.marks if m.symbol == "s-rejected"] for c in ctx.cards]
    f3, f4 = (f.id for f in result.findings)
    assert receipts == [
        [(4, "g-rejected_attempt", f"rejection receipt of rejected_attempt ({f3}) at seq 3")],
        [(4, "g-rejected_attempt", f"rejected_attempt ({f4}): the fence held: near miss")]]

