"""The HTML report's timelines (``render/html/timeline.py`` over ``timeline_parts.py`` and
``timeline_shapes.py``): marks, lanes, rules, bands and the axis, as data and in Chromium."""

from __future__ import annotations

import dataclasses

import pytest

from auditor import audit
from auditor.render import html as report_html
from auditor.render.html import build_context, render_html

from ..conftest import FIXTURES
from .render_kit import open_page

def test_seed_timeline_layout(seed):
    (card,) = build_context(seed).cards
    tl = card.timeline
    assert tl is not None and tl.note is None and (tl.shown, tl.total) == (7, 7)
    assert [(m.seq, m.symbol, m.css) for m in tl.marks] == [
        (1, "s-acquired", "ok"), (3, "s-progress", "ok"), (5, "s-acquired", "ok"),
        (6, "s-progress", "g-stale_activity"), (7, "s-attempted", "g-stale_attempt"),
        (8, "s-committed", "g-stale_commit"), (9, "s-committed", "g-double_commit")]
    assert [(lane.label, lane.worker, lane.role) for lane in tl.lanes] == [
        ("epoch 17", "alpha", "displaced"), ("epoch 18", "beta", "current")]
    lane17, lane18 = (lane.y for lane in tl.lanes)
    x = {m.seq: m.x + report_html.MARK / 2 for m in tl.marks}
    assert [(r.label, r.css, r.x) for r in tl.rules] == [("takeover seq 5", "takeover", x[5])]
    (join,) = tl.joins
    assert (join.x1, join.y1, join.x2, join.y2) == (x[8], lane17, x[9], lane18)
    (band,) = tl.bands
    assert (band.x, band.css) == (x[5], "g-stale_commit")
    assert band.x + band.w == x[8] + report_html.MARK / 2
    assert [t.label for t in tl.ticks] == ["1", "3", "5", "6", "7", "8", "9"]
    assert tl.gaps == []
    assert all(0 < m.x < tl.width and 0 < m.y < tl.height for m in tl.marks)
    mark8 = next(m for m in tl.marks if m.seq == 8)
    assert mark8.title.splitlines() == [
        "seq 8 \u00b7 effect_committed", "epoch 17 (alpha)",
        "effect key release-index/2026-07-26 \u00b7 sink release-index \u00b7 reported by sink",
        "ts 2026-07-26T02:08:00Z",
        f"stale_commit ({seq_finding(seed, 8).id}): the fence failed or did not exist: correctness incident"]


def seq_finding(result, seq):
    return next(f for f in result.findings if f.seq == seq)


def test_seed_clean_handover_is_drawn_as_such(seed):
    (tl,) = build_context(seed).clean_timelines
    assert tl.workflow_key == "reports/index/2026-07-26" and tl.clean
    assert [(r.label, r.css) for r in tl.rules] == [("clean handover seq 11", "clean")]
    assert [(m.seq, m.css) for m in tl.marks] == [(2, "ok"), (10, "ok"), (11, "ok"), (12, "ok")]
    assert tl.bands == [] and tl.joins == []


def test_result_without_timeline_facts_renders_without_timelines(seed):
    bare = dataclasses.replace(seed, timelines={})
    ctx = build_context(bare)
    assert [c.timeline for c in ctx.cards] == [None]
    assert ctx.notes == ["Timelines are left out: this result carries no timeline facts."]
    assert ctx.clean_timelines == []
    assert all(f.id in render_html(bare) for f in seed.findings)


def test_axis_is_spaced_by_seq_and_long_runs_without_events_are_shortened(tmp_path):
    from ..conftest import history, write_jsonl

    log = write_jsonl(tmp_path / "sparse.jsonl", history("1 acq 1 a", "2 acq 2 b", "3 prog 1 a", "50 prog 1 a"))
    with audit(log) as result:
        (card,) = build_context(result).cards
    x = {m.seq: m.x for m in card.timeline.marks}
    assert x[2] - x[1] == x[3] - x[2]  # one step per seq
    assert x[50] - x[3] == 3 * (x[2] - x[1])  # 46 seqs without an event drawn as three steps
    assert [g.title for g in card.timeline.gaps] == ["seqs 4 to 49 hold no event of this key (axis shortened)"]


@pytest.mark.slow
def test_chromium_draws_a_mandates_lifetime(browser, tmp_path):
    """SPEC section 8 on the timeline: the grant, the expiry before the refund, the lifetime band."""
    with audit([FIXTURES / "authority_expired_refund.jsonl"]) as result:
        html = render_html(result)
    path = tmp_path / "refund.html"
    path.write_text(html, encoding="utf-8")
    page, problems = open_page(browser, path)
    tl = page.locator("figure.timeline").first
    labels = tl.locator("g.rule text").all_text_contents()
    assert "mandate-7 granted seq 1" in labels
    assert "mandate-7 expired 2026-07-26T14:00:00Z" in labels
    band = tl.locator("rect.band.mandate-life").first.bounding_box()
    assert band is not None and band["width"] > 20 and band["height"] >= 3
    granted = tl.locator("g.rule.mandate line").first.bounding_box()
    expired = tl.locator("g.rule.mandate-end line").first.bounding_box()
    assert granted["x"] < expired["x"]  # the lifetime runs from the grant to the expiry
    assert abs(band["x"] + band["width"] - expired["x"]) < 4
    assert page.locator("p.witness").first.inner_text().startswith("mandate-7 expired at 2026-07-26T14:00:00Z")
    assert problems == []

