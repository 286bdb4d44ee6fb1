"""The HTML report's lease health section (``render/html/lease.py``, ``lease_chart.py``): its
table, its charts and their lines, as data, in the page and in Chromium."""

from __future__ import annotations

import pytest

from auditor.render.html import build_context, render_html

from .render_kit import dom, open_page

def test_lease_health_context(lease_timing):
    lease = build_context(lease_timing).lease
    assert lease.head == "Lease health (rule L > R*H+J, R = 1; grouped by tool, model): 1 of 2 groups at risk"
    assert [(r.cells, r.at_risk) for r in lease.rows] == [
        (("AT RISK", "35 s", "50 s", "30 s", "20 s", "2", "0", "0", "0", "-", "tool=browser, model=m-large"), True),
        (("safe", "90 s", "50 s", "30 s", "20 s", "2", "0", "0", "0", "-", "tool=search, model=m-small"), False)]
    risky, safe = lease.groups
    assert [(line.css, line.label, line.x) for line in risky.chart.lines] == [
        ("h", "H 30 s", 215.6), ("threshold", "R\u00b7H+J 50 s", 330.0), ("lease-risk", "L 35 s", 244.2)]
    assert [(line.css, line.label, line.x) for line in safe.chart.lines] == [
        ("h", "H 30 s", 129.8), ("threshold", "R\u00b7H+J 50 s", 187.0), ("lease-safe", "L 90 s", 301.4)]
    # Six gaps: four of 30 s stacked in one column, two of 50 s on the threshold.
    assert sorted((d.x, d.y) for d in risky.chart.dots) == [(215.6, 49.0), (215.6, 56.0), (215.6, 63.0),
                                                            (215.6, 70.0), (330.0, 63.0), (330.0, 70.0)]
    # Revision 3: one late_extension for the group, not one per extension.
    assert [d.kind for d in risky.diagnostics] == ["lease_timing_risk", "late_extension"]
    assert (risky.diagnostics_more, safe.diagnostics, risky.takeovers) == (0, [], [])


def test_w1_w2_report_shows_the_expired_lease_the_heartbeat_age_and_the_stale_call(w1_w2):
    root = dom(render_html(w1_w2))
    (section,) = [n for n in root.find_all("section") if n.attrs.get("id") == "lease-health"]
    (row,) = section.find_all("table", "lh-takeovers")[0].find_all("tbody")[0].find_all("tr")
    assert [c.text() for c in row.find_all("td")] == [
        "8f1b2c7e", "5", "42\u00a0(W1) \u2192 43\u00a0(W2)", "2026-07-23T21:15:30Z", "expired 15 s before",
        "105 s before the takeover", "yes"]
    assert row.attrs["class"] == "lh-expired"
    (chart,) = build_context(w1_w2).lease.groups
    assert [(t.x, t.title) for t in chart.chart.takeovers] == [
        (344.3, "takeover: the owner's last heartbeat was 105 s old")]
    assert chart.chart.summary == (
        "Too few heartbeat gaps to judge (2; the rule needs 3): the shortest lease (90 s) against R\u00b7H+J = "
        "140 s so far. Yet 1 lease expired and was taken over, the owner's last heartbeat then up to 105 s old "
        "(the triangles): heartbeats that never came are not among the gaps.")
    assert len(section.find_all("path", "lh-takeover")) == 1
    (note,) = section.find_all("ul", "lh-diagnostics")[0].find_all("li")
    assert note.text() == (
        "effect_after_lease_expiry 8f1b2c7e seq 8: epoch 42 (W1) attempted ext-791 51 s after its own lease "
        "expired (at 2026-07-23T21:15:30Z; by ts, so confidence medium); a worker that cannot confirm its lease "
        "must start no new external action: check the lease before each effect, and fence the sink")
    # The stale tool call itself is the incident's finding: the fence held.
    (card,) = root.find_all("article", "card")
    assert card.find_all("p", "witness")[0].text() == (
        "epoch 43 (W2) was acquired at seq 5; epoch 42 (W1) then attempted ext-791 at seq 8: the sink rejected "
        "it at seq 9: the fence held.")


def test_no_lease_section_without_lease_evidence(seed, seed_html):
    assert build_context(seed).lease is None
    assert 'id="lease-health"' not in seed_html


@pytest.mark.slow
def test_chromium_draws_the_lease_chart_with_the_threshold_line(browser, lease_timing, tmp_path):
    path = tmp_path / "lease.html"
    path.write_text(render_html(lease_timing), encoding="utf-8")
    page, problems = open_page(browser, path)
    page.locator("nav.toc a[href='#lease-health']").click()
    risky = page.locator("#lease-health article.lh-group.at-risk")
    assert risky.count() == 1 and risky.locator("span.lh-badge").inner_text() == "AT RISK"
    chart = risky.locator("figure.lh-chart svg").bounding_box()
    assert chart is not None and chart["width"] > 500 and chart["height"] > 80
    assert risky.locator("circle.lh-dot").count() == 6
    # The R*H+J line is drawn, labelled, and stroked; the 35 s lease stands left of it.
    threshold = risky.locator("g.lh-line.threshold line")
    line = threshold.bounding_box()
    assert line is not None and line["height"] > 30
    assert risky.locator("g.lh-line.threshold text").text_content() == "R\u00b7H+J 50 s"
    assert threshold.evaluate("e => getComputedStyle(e).stroke") not in ("none", "")
    assert threshold.evaluate("e => getComputedStyle(e).strokeDasharray") != "none"
    lease = risky.locator("g.lh-line.lease-risk line").bounding_box()
    assert lease["x"] < line["x"]
    # The two 50 s gaps sit on the threshold line: the jitter J is what pushes past it.
    xs = [risky.locator("circle.lh-dot").nth(i).bounding_box() for i in range(6)]
    on_line = [b for b in xs if abs(b["x"] + b["width"] / 2 - (line["x"] + line["width"] / 2)) < 1.5]
    assert len(on_line) == 2
    safe = page.locator("#lease-health article.lh-group:not(.at-risk)")
    assert (safe.locator("g.lh-line.lease-safe line").bounding_box()["x"]
            > safe.locator("g.lh-line.threshold line").bounding_box()["x"])
    assert problems == []
    page.close()

