"""Issue 45: the HTML report's first screen, read in a real Chromium as an on-call engineer opens it
at 02:00: every recommended action visible, the first incident above the fold at 1400x900, the
marks' details in words (not only in tooltips), file:line values whole, the ignored lines below
the incidents, counts with their nouns, no empty lease chart, and grade colours told apart."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from auditor import audit
from auditor.render.html import render_html

from ..conftest import FIXTURES

NOISY = FIXTURES / "noisy_three_irrelevant_lines_per_evidence_line.jsonl"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def seed():
    with audit(str(FIXTURES / "seed_split_brain.jsonl")) as result:
        yield result


def _page(browser, result, tmp_path: Path, name: str, width: int = 1400):
    path = tmp_path / f"{name}.html"
    path.write_text(render_html(result), encoding="utf-8")
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(path.resolve().as_uri())
    return page


def test_every_recommended_action_is_on_the_card_without_hovering(browser, seed, tmp_path):
    (incident,) = seed.incidents
    assert len(incident.responses) == 4  # the terminal and the Markdown show these four
    page = _page(browser, seed, tmp_path, "seed")
    items = page.locator("article.card .response li")
    assert items.all_inner_texts() == list(incident.responses)
    assert "Stop or quarantine the old worker; verify it emits nothing more." in items.all_inner_texts()
    for i in range(items.count()):
        assert items.nth(i).is_visible()
    page.emulate_media(media="print")
    assert items.nth(3).is_visible()
    page.close()


def test_the_first_incident_is_above_the_fold_at_1400_by_900(browser, seed, tmp_path):
    page = _page(browser, seed, tmp_path, "seed")
    card = page.locator("article.card").first.bounding_box()
    witness = page.locator("article.card p.witness").first.bounding_box()
    assert card["y"] < 900 and witness["y"] + witness["height"] <= 900, (card, witness)
    # The grades without findings are named on one line, not drawn as cards of zeros.
    assert page.locator("ol.grades li").all_inner_texts()[0].split()[:2] == ["1", "double_commit"]
    assert page.locator("ol.grades li").count() == 4
    assert page.locator("p.grades-zero").inner_text() == (
        "No findings of unauthorized_commit, unauthorized_attempt, compensated, rejected_attempt.")
    page.screenshot(path=str(tmp_path / "first_screen.png"))
    page.close()


def test_the_marks_with_findings_are_described_in_words(browser, seed, tmp_path):
    page = _page(browser, seed, tmp_path, "seed")
    notes = page.locator("figure.timeline ol.mark-notes li")
    texts = notes.all_inner_texts()
    by_seq = {f.seq: f for f in seed.findings}
    assert [t.split(" \u00b7 ")[0].strip() for t in texts] == ["seq 6", "seq 7", "seq 8", "seq 9"]
    for text, seq in zip(texts, (6, 7, 8, 9)):
        assert by_seq[seq].id in text and by_seq[seq].grade.value in text
    assert "effect key release-index/2026-07-26" in texts[2] and "reported by sink" in texts[2]
    page.emulate_media(media="print")
    assert all(notes.nth(i).is_visible() for i in range(notes.count()))
    # The clean handover's timeline has no finding: nothing listed, the tooltip only.
    assert page.locator("#clean ol.mark-notes").count() == 0
    page.close()


#: Each line box of a fact's parts, and of the file name after a location's last "/".
_LINES = """Array.from(document.querySelectorAll('.fact dd .nobr, .fact dd .where')).map(e => {
  const node = e.classList.contains('where') ? e.lastChild : e;
  const range = document.createRange(); range.selectNodeContents(node);
  return [node.textContent, new Set(Array.from(range.getClientRects()).map(r => Math.round(r.top))).size];
})"""


@pytest.mark.parametrize("width", [1400, 1000, 760])
def test_file_line_values_are_never_broken_mid_word(browser, seed, tmp_path, width):
    page = _page(browser, seed, tmp_path, "seed", width)
    lines = dict(page.evaluate(_LINES))
    assert {"seed_split_brain.jsonl:6", "seed_split_brain.jsonl:8", "2026-07-26T02:06:00Z", "seq 6"} <= set(lines)
    assert set(lines.values()) == {1}, lines
    page.close()


def test_a_name_wider_than_its_column_stays_inside_it(browser, tmp_path):
    """A file name too long for any line may break (nothing else fits), but never runs over the
    response box beside it."""
    long = tmp_path / ("payments_" + "unfenced_" * 12 + "200.jsonl")
    long.write_text((FIXTURES / "seed_split_brain.jsonl").read_text())
    with audit(str(long)) as result:
        page = _page(browser, result, tmp_path, "long", 1000)
    over = page.evaluate("Array.from(document.querySelectorAll('.fact dd')).filter(d => d.scrollWidth > "
                         "d.clientWidth + 1 || d.getBoundingClientRect().right > "
                         "d.closest('.facts').getBoundingClientRect().right + 1).map(d => d.textContent)")
    assert over == []
    page.close()


def test_the_ignored_lines_come_after_the_incidents(browser, tmp_path):
    with audit(str(NOISY), vocabulary=NOISY.with_name(NOISY.stem + ".map.toml")) as result:
        assert result.input.ignored == 48 and len(result.incidents) == 1
        page = _page(browser, result, tmp_path, "noisy")
    card = page.locator("article.card").first.bounding_box()
    table = page.locator("table.ignored").bounding_box()
    assert table["y"] > card["y"] + card["height"]
    assert card["y"] < 900
    assert page.locator("p.ignored-ref a[href='#ignored']").is_visible()
    page.close()


def test_counts_take_the_noun_of_their_number(browser, seed, tmp_path):
    page = _page(browser, seed, tmp_path, "seed")
    stats = page.locator("p.stats span").all_inner_texts()
    assert stats == ["3 workflows", "5 acquisitions", "2 handovers", "1 clean handover", "1 incident",
                     "0 diagnostics"]
    page.close()


def test_two_heartbeat_lines_draw_no_empty_lease_chart(browser, tmp_path):
    log = tmp_path / "two_heartbeats.jsonl"
    log.write_text("".join(json.dumps({"seq": i, "workflow_key": "job-1", "kind": "progress", "epoch": 1,
                                       "worker": "w1", "heartbeat": "ok", "ts": ts}) + "\n"
                           for i, ts in ((1, "2026-07-23T21:00:00Z"), (2, "2026-07-23T21:00:30Z"))))
    with audit(str(log)) as result:
        assert len(result.lease_health.groups) == 1
        page = _page(browser, result, tmp_path, "two")
    assert page.locator("#lease-health table.lease-groups").is_visible()
    assert page.locator("figure.lh-chart").count() == 0
    assert page.locator(".lh-no-chart").inner_text() == (
        "No chart: 1 heartbeat gap and no takeover; the timing rule needs 3 gaps or more "
        "(heartbeat=ok or lost lines of one owner) to say anything.")
    page.close()


def test_a_log_with_enough_heartbeats_keeps_its_chart(browser, tmp_path):
    with audit(str(FIXTURES / "lease_timing_35s_vs_90s.jsonl")) as result:
        page = _page(browser, result, tmp_path, "lease")
    assert page.locator("figure.lh-chart").count() >= 1 and page.locator(".lh-no-chart").count() == 0
    page.close()


def _lab(rgb: tuple[float, float, float]) -> tuple[float, float, float]:
    """sRGB (0-255) to CIE L*a*b* (D65)."""
    lin = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in (v / 255 for v in rgb)]
    r, g, b = lin
    xyz = ((0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b,
           (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883)
    fx, fy, fz = (t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in xyz)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def test_the_legend_colours_are_told_apart(browser, seed, tmp_path):
    """Nine swatches (eight grades and "in time"): every two differ by a CIE76 distance of 25 or
    more (the reds and oranges were 15 apart: stale_attempt and unauthorized_attempt)."""
    page = _page(browser, seed, tmp_path, "seed")
    found = page.evaluate("Array.from(document.querySelectorAll('.legend span .swatch'))"
                          ".map(e => [e.parentElement.innerText.trim(), getComputedStyle(e).backgroundColor])")
    page.close()
    assert len(found) == 9
    colours = {name: _lab(tuple(float(v) for v in rgb[rgb.index("(") + 1:-1].split(","))) for name, rgb in found}
    distances = {(a, b): sum((x - y) ** 2 for x, y in zip(colours[a], colours[b])) ** 0.5
                 for a, b in itertools.combinations(colours, 2)}
    closest = min(distances, key=distances.get)
    assert distances[closest] >= 25, (closest, distances[closest])
