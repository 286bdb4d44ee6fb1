"""The HTML incident report: its data (the context), its DOM, and a real Chromium opening it."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import json
import re
import os
import shutil
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from auditor import audit
from auditor.core.model import Grade
from auditor.render import html as report_html
from auditor.rules.grades import spec
from auditor.render.html import build_context, render_html

from ..conftest import FIXTURES, ROOT, vocabulary_of

DATA = Path(__file__).resolve().parent.parent / "data"
SEED_KEY = "ledger/export/2026-07-26"
HOSTILE_KEY = "<script>alert(1)</script>"


# A tiny DOM, enough to assert on ids, classes and text without a browser.


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: "Node | None") -> None:
        self.tag, self.attrs, self.parent, self.children = tag, attrs, parent, []

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def iter(self):
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.iter()

    def find_all(self, tag: str | None = None, cls: str | None = None) -> list["Node"]:
        return [n for n in self.iter() if (tag is None or n.tag == tag)
                and (cls is None or cls in (n.attrs.get("class") or "").split())]


class _Builder(HTMLParser):
    VOID = {"meta", "link", "br", "img", "input", "col", "hr", "source", "wbr"}
    SVG_EMPTY = {"rect", "line", "circle", "path", "use"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#root", {}, None)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.cur)
        self.cur.children.append(node)
        if tag not in self.VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, dict(attrs), self.cur))

    def handle_endtag(self, tag):
        node = self.cur
        while node is not None and node.tag != tag:
            node = node.parent
        assert node is not None and node.parent is not None, f"stray </{tag}>"
        self.cur = node.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def dom(text: str) -> Node:
    b = _Builder()
    b.feed(text)
    b.close()
    assert b.cur is b.root, f"unclosed <{b.cur.tag}>"
    return b.root


def ids(root: Node) -> list[str]:
    return [n.attrs["id"] for n in root.iter() if n.attrs.get("id")]


# Inputs.


@pytest.fixture(scope="module")
def seed():
    with contextlib.chdir(ROOT):
        return audit("fixtures/seed_split_brain.jsonl")


@pytest.fixture(scope="module")
def seed_html(seed):
    return render_html(seed)


@pytest.fixture(scope="module")
def lease_timing():
    """Seed 000's 35 s vs 90 s leases: one group at risk, one safe."""
    with contextlib.chdir(ROOT):
        return audit("fixtures/lease_timing_35s_vs_90s.jsonl")


@pytest.fixture(scope="module")
def w1_w2():
    """Seed 000's pause test: W1 paused, its lease expired, W2 reclaimed, W1 woke and called the tool."""
    with contextlib.chdir(ROOT):
        return audit("fixtures/w1_w2_pause_expired_lease.jsonl")


@pytest.fixture(scope="module")
def hostile():
    with contextlib.chdir(ROOT):
        return audit("tests/data/html_escaping.jsonl")


def write_many_findings(path: Path, keys: int, long_key_events: int) -> Path:
    """``keys`` workflow keys shaped like the seed's unsafe takeover (4 findings each); the first key
    has ``long_key_events`` progress events before the takeover, so its timeline must be capped."""
    seq = 0
    with path.open("w") as out:
        for k in range(keys):
            key = f"tenant-{k % 7}/export/run-{k:05d}"

            def emit(kind, epoch, worker, **extra):
                nonlocal seq
                seq += 1
                out.write(json.dumps({"seq": seq, "workflow_key": key, "kind": kind, "epoch": epoch,
                                      "worker": worker,
                                      "reporter": "sink" if kind == "effect_committed" else "worker",
                                      **extra}) + "\n")

            emit("lease_acquired", 1, "alpha")
            for _ in range(long_key_events if k == 0 else 1):
                emit("progress", 1, "alpha")
            emit("lease_acquired", 2, "beta")
            emit("progress", 1, "alpha")
            emit("effect_attempted", 1, "alpha", effect_key=f"out:{k}")
            emit("effect_committed", 1, "alpha", effect_key=f"out:{k}")
            emit("effect_committed", 2, "beta", effect_key=f"out:{k}")
    return path


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    """A log with 10,000 findings in 2,500 incidents, audited and rendered once per module."""
    log = write_many_findings(tmp_path_factory.mktemp("many") / "many.jsonl", 2500, 400)
    result = audit(log)
    started = time.perf_counter()
    text = render_html(result)
    return result, text, time.perf_counter() - started


# The context: the data the page is drawn from, asserted as whole values.


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
    result = audit(log, vocabulary=vocabulary_of(log))
    root = dom(render_html(result))
    found = set(ids(root))
    assert {f.id for f in result.findings} <= found
    assert {i.id for i in result.incidents} <= found
    assert len(root.find_all("article", "card")) == len(result.incidents)
    assert root.find_all("div", "verdict-badge")[0].text() == result.verdict.upper()
    diag_tables = root.find_all("table", "diagnostics")
    rows = len(diag_tables[0].find_all("tbody")[0].find_all("tr")) if diag_tables else 0
    assert rows == len(result.diagnostics)


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


def test_result_without_timeline_facts_renders_without_timelines(seed):
    bare = dataclasses.replace(seed, timelines={})
    ctx = build_context(bare)
    assert [c.timeline for c in ctx.cards] == [None]
    assert ctx.notes == ["Timelines are left out: this result carries no timeline facts."]
    assert ctx.clean_timelines == []
    assert all(f.id in render_html(bare) for f in seed.findings)


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


BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    executable = shutil.which("chromium")
    if executable is None:
        why = ("chromium is not on PATH: the HTML report tests need a real browser; install "
               "Debian's package with 'apt-get install -y chromium' (.ci/run does)")
        if os.environ.get("CI"):  # in CI a missing browser is a failure, never a silent skip
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=BROWSER_ARGS)
        yield b
        b.close()


def _open(browser, path: Path, **kw):
    page = browser.new_page(viewport={"width": 1280, "height": 900}, **kw)
    problems: list[str] = []
    def on_console(m):
        if m.type in ("error", "warning"):
            problems.append(f"console {m.type}: {m.text}")

    def on_request(r):
        if not r.url.startswith(("file:", "data:")):
            problems.append(f"request: {r.url}")

    page.on("console", on_console)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("request", on_request)
    page.goto(path.resolve().as_uri())
    return page, problems


@pytest.mark.slow
def test_chromium_opens_the_seed_report(browser, seed_html, tmp_path):
    path = tmp_path / "seed.html"
    path.write_text(seed_html, encoding="utf-8")
    page, problems = _open(browser, path)
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
    page, problems = _open(browser, path, java_script_enabled=False)
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
    page, problems = _open(browser, path)
    page.wait_for_timeout(200)
    assert page.locator("article.card code.key").inner_text() == HOSTILE_KEY
    assert page.evaluate("document.querySelectorAll('script').length") == 1
    assert page.evaluate("document.querySelectorAll('img, iframe').length") == 0
    assert problems == []
    page.close()


@pytest.mark.slow
def test_chromium_draws_the_lease_chart_with_the_threshold_line(browser, lease_timing, tmp_path):
    path = tmp_path / "lease.html"
    path.write_text(render_html(lease_timing), encoding="utf-8")
    page, problems = _open(browser, path)
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


@pytest.mark.slow
def test_chromium_opens_ten_thousand_findings(browser, many, tmp_path):
    _, text, _ = many
    path = tmp_path / "many.html"
    path.write_text(text, encoding="utf-8")
    started = time.perf_counter()
    page, problems = _open(browser, path)
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
    page, problems = _open(browser, path)
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
