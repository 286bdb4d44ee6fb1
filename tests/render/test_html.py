"""The HTML incident report as a page (``render/html/__init__.py`` and its templates): its DOM,
self-contained and deterministic, hostile strings as text, every fixture, the committed example
reports, the incomplete banner, and a real Chromium opening it. Its context, timelines and lease
section have files of their own (test_html_context.py, test_html_timeline.py, test_html_lease.py)."""

from __future__ import annotations

import contextlib
import importlib.util
import re
import time

import pytest

from auditor import audit
from auditor.core.model import Grade
from auditor.render import html as report_html
from auditor.render.html import build_context, render_html
from auditor.rules.grades import spec

from ..conftest import FIXTURES, ROOT, audited, run_cli
from .render_kit import HOSTILE_KEY, SEED_KEY, dom, ids, open_page

# The page.


def test_seed_dom(seed, seed_html):
    root = dom(seed_html)
    found = ids(root)
    assert len(found) == len(set(found)), "duplicate element ids"
    for f in seed.findings:
        row = next(n for n in root.find_all("tr") if n.attrs.get("id") == f.id)
        assert f.grade.value in row.text() and str(f.seq) in row.text()
    (card,) = root.find_all("article", "card")
    assert card.attrs["id"] == seed.incidents[0].id
    assert [p.text() for p in card.find_all("p", "witness")] == [seed.incidents[0].witness]
    assert [li.text() for li in card.find_all("div", "response")[0].find_all("li")] == list(seed.incidents[0].responses)
    assert root.find_all("title")[0].text() == "FAIL: Split-brain audit: seed_split_brain.jsonl"
    accounting = root.find_all("div", "accounting")[0].text()
    assert "16 lines read = 16 events + 0 duplicates + 0 quarantined; ordering authoritative." in accounting
    svgs = root.find_all("svg", "tl")
    assert len(svgs) == 2  # the incident's key and the clean handover
    assert len(svgs[0].find_all("g", "mark")) == 7
    assert [t.text() for t in svgs[1].find_all("g", "rule")[0].find_all("text")] == ["clean handover seq 11"]
    index_rows = root.find_all("table", "workflows")[0].find_all("tbody")[0].find_all("tr")
    assert [r.attrs["id"] for r in index_rows] == [
        report_html._key_anchor("w", k) for k in (SEED_KEY, "checkout/sync/cart-881", "reports/index/2026-07-26")]


def test_report_is_self_contained(seed_html):
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!#|data:)""", seed_html)
    assert "<link rel=\"stylesheet\"" not in seed_html and "@import" not in seed_html
    assert "url(" not in seed_html
    assert set(re.findall(r"https?://[^\s\"'<>]+", seed_html)) == {"http://www.w3.org/2000/svg"}
    assert "{{" not in seed_html and "{%" not in seed_html


def test_render_is_deterministic(seed, seed_html):
    assert render_html(seed) == seed_html
    with contextlib.chdir(ROOT):
        again = audit("fixtures/seed_split_brain.jsonl")
    assert render_html(again) == seed_html
    assert 10_000 < len(seed_html.encode()) < 60_000


def test_hostile_strings_are_text(hostile):
    text = render_html(hostile)
    assert HOSTILE_KEY not in text and "<img" not in text and "<iframe" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    root = dom(text)
    scripts = root.find_all("script")
    assert len(scripts) == 1 and "data-filter" in scripts[0].text()  # ours, nothing else
    assert not [n for n in root.iter() for a in n.attrs if a.startswith("on")]
    (card,) = root.find_all("article", "card")
    assert card.find_all("code", "key")[0].text() == HOSTILE_KEY
    assert hostile.incidents[0].witness in card.find_all("p", "witness")[0].text()
    marks = root.find_all("g", "mark")
    assert any("<iframe src=javascript:alert(5)>" in m.find_all("title")[0].text() for m in marks)
    rows = root.find_all("table", "quarantine")[0].find_all("tbody")[0].find_all("tr")
    assert [[c.text() for c in r.find_all("td")] for r in rows] == [
        ["tests/data/html_escaping.jsonl", "5", "line is not valid JSON; write one JSON object per line"],
        ["tests/data/html_escaping.jsonl", "6", '"seq" is "x", expected an integer in int64 range']]


FIXTURE_LOGS = sorted(p for p in FIXTURES.glob("*.jsonl"))


@pytest.mark.parametrize("log", FIXTURE_LOGS, ids=[p.stem for p in FIXTURE_LOGS])
def test_every_fixture_renders_every_finding(log):
    done = audited(log)
    result = done.result
    root = dom(done.html)
    found = set(ids(root))
    assert {f.id for f in result.findings} <= found
    assert {i.id for i in result.incidents} <= found
    assert len(root.find_all("article", "card")) == len(result.incidents)
    assert root.find_all("div", "verdict-badge")[0].text() == result.verdict.upper()
    diag_tables = root.find_all("table", "diagnostics")
    rows = len(diag_tables[0].find_all("tbody")[0].find_all("tr")) if diag_tables else 0
    assert rows == len(result.diagnostics)


def test_ten_thousand_findings_stay_usable(many):
    result, text, seconds = many
    assert len(result.findings) == 10_000 and len(result.incidents) == 2_500
    size = len(text.encode())
    assert size < 20_000_000, f"report is {size:,} bytes"
    assert seconds < 60
    root = dom(text)
    assert {f.id for f in result.findings} <= set(ids(root))
    assert len(root.find_all("article", "card")) == report_html.MAX_CARDS
    assert len(root.find_all("svg", "tl")) == report_html.MAX_TIMELINES
    notes = [n.text() for n in root.find_all("section", "summary")[0].find_all("p", "note")]
    assert notes == [
        "Showing the 50 most severe of 2,500 incidents as cards; the other 2,450 are listed with "
        "their findings in the table of findings.",
        "Timelines are drawn for 25 of 2,500 affected workflow keys (those of the most severe "
        "incidents); the other 2,475 keys are in the workflow index without a timeline."]
    # The first key has 406 events: its timeline keeps the incident and says what it left out.
    first = build_context(result).cards[0]
    assert first.workflow_key == "tenant-0/export/run-00000"
    tl = first.timeline
    assert (tl.shown, tl.total) == (report_html.MAX_MARKS, 406)
    assert tl.note == ("Timeline capped: 60 of 406 events drawn (every takeover and stale event "
                       "first, then their neighbours); 346 left out (seqs 2\u2013347), marked \u2026 on the axis.")
    assert {m.seq for m in tl.marks} >= {1, 402, 403, 404, 405, 406}
    assert [g.title for g in tl.gaps] == ["346 events left out, seq 2 to 347"]


# The committed example reports.


def _regenerate_module():
    spec = importlib.util.spec_from_file_location("reports_regenerate", ROOT / "reports" / "regenerate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", ["seed_split_brain.html", "payments_unfenced_200.html",
                                  "seed_split_brain.md", "seed_split_brain.junit.xml", "authority_refund.html",
                                  "w1_w2_pause_expired_lease.html", "lease_timing_35s_vs_90s.html"])
def test_committed_reports_match_the_code(name):
    regen = _regenerate_module()
    committed = ROOT / "reports" / name
    assert committed.exists(), f"reports/{name} is missing; run: python reports/regenerate.py"
    fresh = regen.EXAMPLES[name]()
    assert committed.read_bytes() == fresh.encode(), (
        f"reports/{name} differs from what the code renders now; run: python reports/regenerate.py "
        "and commit the result")


# A real browser.


@pytest.mark.slow
def test_chromium_opens_the_seed_report(browser, seed_html, tmp_path):
    path = tmp_path / "seed.html"
    path.write_text(seed_html, encoding="utf-8")
    page, problems = open_page(browser, path)
    box = page.locator("svg.tl").first.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 80
    use = page.locator("svg.tl g.mark use").first.bounding_box()
    assert use is not None and use["width"] > 0 and use["height"] > 0
    assert page.locator("p.witness").inner_text().startswith("epoch 18 (beta) was acquired at seq 5")
    assert page.locator("div.verdict-badge").inner_text() == "FAIL"
    shot = tmp_path / "seed_report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000

    # The filter box appears with the script and filters the workflow index.
    box_input = page.locator("#workflows input[type=search]")
    assert box_input.is_visible()
    box_input.fill("reports/index")
    assert page.locator("#workflows-table tbody tr:visible").count() == 1
    box_input.fill("")
    assert page.locator("#workflows-table tbody tr:visible").count() == 3

    page.emulate_media(media="print")
    assert not page.locator("nav.toc").is_visible()
    assert page.locator("svg.tl").first.bounding_box()["width"] > 0
    assert problems == []
    page.close()


@pytest.mark.slow
def test_chromium_reads_the_report_without_script(browser, seed_html, tmp_path):
    path = tmp_path / "seed.html"
    path.write_text(seed_html, encoding="utf-8")
    page, problems = open_page(browser, path, java_script_enabled=False)
    assert page.locator("p.witness").is_visible()
    assert page.locator("svg.tl").first.bounding_box()["width"] > 300
    assert not page.locator("#workflows input[type=search]").is_visible()
    assert page.locator("#findings-table tbody tr[id]").count() == 4
    assert problems == []
    page.close()


@pytest.mark.slow
def test_chromium_runs_nothing_from_the_data(browser, hostile, tmp_path):
    path = tmp_path / "hostile.html"
    path.write_text(render_html(hostile), encoding="utf-8")
    page, problems = open_page(browser, path)
    page.wait_for_timeout(200)
    assert page.locator("article.card code.key").inner_text() == HOSTILE_KEY
    assert page.evaluate("document.querySelectorAll('script').length") == 1
    assert page.evaluate("document.querySelectorAll('img, iframe').length") == 0
    assert problems == []
    page.close()


@pytest.mark.slow
def test_chromium_opens_ten_thousand_findings(browser, many, tmp_path):
    _, text, _ = many
    path = tmp_path / "many.html"
    path.write_text(text, encoding="utf-8")
    started = time.perf_counter()
    page, problems = open_page(browser, path)
    assert time.perf_counter() - started < 60
    assert page.locator("#findings-table tbody tr[id]").count() == 10_000
    page.locator("#findings input[type=search]").fill("run-02499")
    assert page.locator("#findings-table tbody:visible").count() == 1
    assert page.locator("svg.tl").first.bounding_box()["width"] > 300
    assert problems == []
    page.close()


def test_grades_in_the_report_follow_the_model(seed):
    """The report's grade colours and selectors come from rules.grades (tests/test_grades.py)."""
    html = render_html(seed)
    for g in Grade:
        assert f"--{g.value}: {spec(g).colour};" in html and f".g-{g.value} {{" in html


def test_html_banner_says_incomplete_and_lists_the_lost_line_before_the_grades(lossy, tmp_path):
    html = tmp_path / "r.html"
    assert run_cli("audit", str(lossy), "--html", str(html), "-q").returncode == 3
    page = html.read_text()
    assert '<header class="top verdict-incomplete">\n<div class="verdict-badge">INCOMPLETE</div>' in page
    assert page.index('<table class="quarantine">') < page.index('<ol class="grades">')
    # A rejected effect never happened: a neutral label, not the warning colour of "unverified".
    assert '<td class="sink-rejected">rejected</td><td class="v-na">n/a (rejected)</td>' in page

