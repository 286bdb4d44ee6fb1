"""One registry per grade (rules.grades): every grade is in it, everything else is read from it.

A grade declared only in the registry, for the length of a test, reaches every renderer (the
terminal summary, the Markdown summary, JUnit, the JSON document and the HTML report, its colour
and selectors included) without any other edit.
"""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET

from rich.console import Console

from auditor import audit
from auditor.core.model import GRADE_RANK, Grade, build_finding, build_incident
from auditor.render.html import render_html
from auditor.render.json import render_json
from auditor.render.junit import render_junit
from auditor.render.markdown import render_markdown
from auditor.render.terminal import summary_lines
from auditor.rules import MEANINGS, RESPONSES
from auditor.rules.grades import GRADES, GradeSpec, extended, ordered, spec

from ..conftest import FIXTURES


def test_every_grade_is_declared_once_in_order():
    assert [s.grade for s in ordered()] == [g.value for g in Grade]
    assert [GRADE_RANK[g] for g in Grade] == list(range(len(Grade)))
    for g in Grade:
        s = spec(g)
        assert (MEANINGS[g], RESPONSES[g]) == (s.meaning, s.response)
        assert s.colour.startswith("#") and len(s.colour) == 7 and s.terminal and s.witness


class ExtraGrade(str):
    """A grade the registry alone declares: ranked by its place there, as ``Grade`` is."""

    @property
    def value(self) -> str:
        return str(self)

    @property
    def rank(self) -> int:
        return list(GRADES).index(self)

    def at_least(self, other: str) -> bool:
        return self.rank >= list(GRADES).index(other)


FORGED = GradeSpec("forged_receipt", "a receipt no sink wrote", "Check who can write receipts.",
                   "a receipt no sink wrote was believed", "#123456", "bold green")


def test_a_grade_added_to_the_registry_reaches_every_renderer():
    with audit([FIXTURES / "seed_split_brain.jsonl"]) as result, extended(FORGED, after="stale_commit"):
        grade = ExtraGrade("forged_receipt")
        f = result.findings[2]
        forged = build_finding(**{**{n: getattr(f, n) for n in f.__slots__}, "grade": grade, "id": "f-forged"})
        i = result.incidents[0]
        incident = build_incident(**{**{n: getattr(i, n) for n in i.__slots__}, "id": "i-forged", "severity": grade,
                                     "grades": {"forged_receipt": 1}, "finding_ids": ("f-forged",),
                                     "response": FORGED.response, "responses": (FORGED.response,)})
        result.findings.append(forged)
        result.incidents.append(incident)

        console = Console(file=io.StringIO(), width=200, color_system="truecolor", force_terminal=True)
        for line in summary_lines(result):
            console.print(line)
        terminal = console.file.getvalue()
        assert "forged_receipt 1" in terminal and "[forged_receipt]" in terminal
        assert "\x1b[1;32mforged_receipt 1" in terminal  # its terminal style: bold green

        assert "| forged_receipt | 1 |" in render_markdown(result)
        cases = ET.fromstring(render_junit(result)).iter("failure")
        assert "forged_receipt" in [c.get("type") for c in cases]
        doc = json.loads(render_json(result))
        assert doc["summary"]["findings"] == {"stale_activity": 1, "stale_attempt": 1, "stale_commit": 1,
                                              "forged_receipt": 1, "double_commit": 1}

        html = render_html(result)
        assert "--forged_receipt: #123456;" in html
        for selector in (".g-forged_receipt {", ".badge.g-forged_receipt {", ".card.sev-forged_receipt {",
                         ".sev-forged_receipt .response {"):
            assert selector in html
        assert 'class="card sev-forged_receipt"' in html and "a receipt no sink wrote" in html
    assert "forged_receipt" not in GRADES  # declared for the test only
