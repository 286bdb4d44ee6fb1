"""The Markdown summary (``render/markdown.py``): the committed snapshot, an incomplete audit,
cells that cannot break a table, hostile keys."""

from __future__ import annotations

from ..conftest import ROOT, run_cli

def test_markdown_matches_the_committed_snapshot(tmp_path):
    md = tmp_path / "summary.md"
    p = run_cli("audit", "fixtures/seed_split_brain.jsonl", "--markdown", str(md), "-q")
    assert p.returncode == 1
    assert md.read_bytes() == (ROOT / "reports" / "seed_split_brain.md").read_bytes()


def test_markdown_of_an_incomplete_audit_opens_with_what_was_lost(lossy, tmp_path):
    md = tmp_path / "summary.md"
    assert run_cli("audit", str(lossy), "--markdown", str(md), "-q").returncode == 3
    assert md.read_text().splitlines()[:7] == [
        "# Split-brain audit: INCOMPLETE",
        "",
        "**INCOMPLETE**: no finding at or above `stale_attempt`, but evidence was lost: a pass "
        "cannot be claimed.",
        "",
        "**Evidence lost**: 1 quarantined line, 0 event_id conflicts (more than --allow-quarantined 0).",
        "",
        f'- {lossy}:10: "epoch" is "seventeen", expected an integer in int64 range'.replace("_", "\\_"),
    ]


def test_markdown_cells_cannot_break_the_table():
    from auditor.render.markdown import code, text

    assert code("a|b`c") == "``a\\|b`c``"
    assert text("[x](http://e) *y* <b>|") == "\\[x\\](http://e) \\*y\\* \\<b\\>\\|"


def test_markdown_renders_as_tables_without_links_even_for_hostile_keys(audit_events):
    from markdown_it import MarkdownIt

    from auditor.render.markdown import render_markdown

    key = "a|b](http://evil.example) *x* <script>`"
    events = [{"seq": s, "workflow_key": key, "kind": k, "epoch": e, "worker": "w"}
              for s, k, e in ((1, "lease_acquired", 1), (2, "lease_acquired", 2), (3, "progress", 1))]
    html = MarkdownIt("commonmark").enable("table").render(render_markdown(audit_events(events)))
    assert html.count("<table>") == 2 and "<a " not in html and "<script>" not in html and "<em>" not in html
    incident_row = html.split("<tbody>")[2].split("</tr>")[0]
    assert incident_row.count("<td") == 10
    assert "<code>a|b](http://evil.example) *x* &lt;script&gt;`</code>" in incident_row

