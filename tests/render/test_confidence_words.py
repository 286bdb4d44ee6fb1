"""Issue 45: the words behind a confidence level name the reporters the findings came from
("reporter not given" when no line says), and an owner that was not displaced is not described
as "displaced epoch 2 -> current epoch 2". Terminal, Markdown and the HTML context agree."""

from __future__ import annotations

import json

from auditor import audit
from auditor.render.html import build_context
from auditor.render.markdown import render_markdown
from auditor.render.terminal import summary_lines

from ..conftest import FIXTURES, ROOT, history, write_jsonl

HIGH = "order from seq, and no commit reported only by the worker"


def _terminal(result) -> list[str]:
    return [t.plain for t in summary_lines(result)]


def _confidence_fact(result) -> str:
    """The confidence fact of the report's first card (they all say the same on these logs)."""
    facts = {next(f.value for f in card.facts if f.label == "confidence") for card in build_context(result).cards}
    (fact,) = facts
    return fact


def test_the_seed_names_the_sink_and_the_worker():
    with audit(str(FIXTURES / "seed_split_brain.jsonl")) as seed:
        reporters = {f.reporter for f in seed.findings}
        assert reporters == {"sink", "worker"}
        assert _terminal(seed)[-1] == f"confidence: high: {HIGH} (findings reported by sink, worker)."
        md = render_markdown(seed)
        assert f"- confidence: high: {HIGH} (findings reported by sink, worker)\n" in md
        assert f"- **high**: {HIGH} (findings reported by sink, worker)." in md
        assert _confidence_fact(seed) == "high: findings reported by sink, worker"


def test_a_log_without_reporters_says_reporter_not_given():
    """The issue's case: every reporter null, and the sentence claimed sink or coordinator."""
    log = FIXTURES / "compensated_double_charge.jsonl"
    assert all(json.loads(line).get("reporter") is None for line in log.read_text().splitlines() if line.strip())
    with audit(str(log)) as result:
        assert result.incidents and {i.confidence.value for i in result.incidents} == {"high"}
        last = _terminal(result)[-1]
        assert last == f"confidence: high: {HIGH} (reporter not given)."
        assert "sink or the coordinator" not in "\n".join(_terminal(result))
        assert f"- confidence: high: {HIGH} (reporter not given)\n" in render_markdown(result)
        assert _confidence_fact(result) == "high: reporter not given"


def test_some_lines_with_a_reporter_and_some_without(tmp_path):
    events = history("1 acq 1 a", "2 acq 2 b", "3 com 1 a fx", "4 att 1 a fy")
    events[2]["reporter"] = "sink"
    with audit(str(write_jsonl(tmp_path / "mixed.jsonl", events))) as result:
        assert [f.reporter for f in result.findings] == ["sink", None]
        assert _confidence_fact(result) == "high: findings reported by sink; reporter not given on some"


def test_an_unknown_reporter_is_named_as_given_and_escaped(tmp_path):
    events = history("1 acq 1 a", "2 acq 2 b", "3 com 1 a fx")
    events[2]["reporter"] = "\x1b[31mproxy"
    with audit(str(write_jsonl(tmp_path / "odd.jsonl", events))) as result:
        (inc,) = result.incidents
        assert inc.confidence.value == "medium"  # an unknown reporter counts as the worker (SPEC)
        last = _terminal(result)[-1]
        assert last.endswith("(findings reported by \\x1b[31mproxy).") and "\x1b" not in last


def test_an_owner_that_was_not_displaced_is_called_the_current_owner():
    """docs/AUTHORITY.md's example: an unauthorized commit by the current owner, no takeover."""
    with audit(str(ROOT / "docs/examples/refund_after_mandate_expired.jsonl")) as result:
        (inc,) = result.incidents
        assert (inc.displaced.epoch, inc.current.epoch) == (2, 2)
        lines = _terminal(result)
        assert "  [unauthorized_commit] refund/inv-9  epoch 2 (w2), the current owner" in lines
        assert not any("displaced epoch" in line for line in lines)
        assert lines[lines.index("  [unauthorized_commit] refund/inv-9  epoch 2 (w2), the current owner") + 2] \
            .startswith("    at seq 5; effects: refund:inv-9 committed")
        (card,) = build_context(result).cards
        assert [(f.label, f.value) for f in card.facts[:2]] == [
            ("owner", "epoch 2 (w2), the current owner"), ("transition", "not seen")]


def test_a_list_of_the_first_quarantined_lines_says_it_is_the_first_5_of_6(tmp_path):
    """docs/AUTHORITY.md's case: "6 quarantined lines" listed 5 without saying so."""
    log = tmp_path / "six.jsonl"
    log.write_text("".join(f'{{"seq": {100 + i}, "workflow_key": "k", "kind": "progress", "epoch": "x{i}"}}\n'
                           for i in range(1, 7)) + (FIXTURES / "seed_split_brain.jsonl").read_text())
    with audit(str(log)) as result:
        lines = _terminal(result)
        assert lines[1] == ("lost: 6 quarantined lines, 0 event_id conflicts (more than --allow-quarantined 0); "
                            "the first 5 of 6 quarantined lines:")
        assert [line.split(":")[1] for line in lines[2:7]] == ["1", "2", "3", "4", "5"]
        assert lines[7].startswith("input: ")
        md = render_markdown(result)
        assert "(more than --allow-quarantined 0).**" not in md and "of 6 quarantined lines" not in md  # 10 shown
    log.write_text("".join(f'{{"seq": {100 + i}, "workflow_key": "k", "kind": "progress", "epoch": "x{i}"}}\n'
                           for i in range(1, 4)) + (FIXTURES / "seed_split_brain.jsonl").read_text())
    with audit(str(log)) as result:
        assert _terminal(result)[1] == "lost: 3 quarantined lines, 0 event_id conflicts (more than --allow-quarantined 0):"
