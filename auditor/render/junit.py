"""The JUnit XML report, for CI dashboards that show test cases.

One test case per workflow key (``classname`` ``split-brain-audit``); each incident at or above
``--fail-on`` is a ``<failure>`` of its key's case, its witness sentence as the message and its
facts and responses as the text. One more case, ``evidence``, fails when more lines were lost
than ``--allow-quarantined`` accepts (the ``incomplete`` verdict), listing the first lost lines.
Deterministic: no run time, no host name. Control characters from the log are shown as escapes
(XML 1.0 cannot carry them).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import defaultdict

from ..core.model import Incident, Verdict
from ..explain.result import AuditResult
from . import visible
from .words import actions, incident_facts, lost_head, lost_items, plural

SUITE = "split-brain-audit"
MAX_LOST = 20


def render_junit(result: AuditResult) -> str:
    """The whole document as text (UTF-8 declared), ending in a newline."""
    failing = defaultdict(list)
    for inc in result.incidents:
        if inc.severity.at_least(result.fail_on):
            failing[inc.workflow_key].append(inc)
    lost = result.verdict is Verdict.INCOMPLETE
    cases = len(result.workflows) + 1
    failures = sum(len(v) for v in failing.values()) + lost
    attrs = {"name": SUITE, "tests": str(cases), "failures": str(failures), "errors": "0"}
    root = ET.Element("testsuites", attrs)
    suite = ET.SubElement(root, "testsuite", {**attrs, "skipped": "0"})
    props = ET.SubElement(suite, "properties")
    for name, value in (("verdict", result.verdict.value), ("fail_on", result.fail_on.value),
                        ("lost", str(result.lost)), ("allow_quarantined", str(result.allow_quarantined)),
                        *((("allow_unplaced", str(result.allow_unplaced)),)
                          if result.unplaced_lost or result.allow_unplaced else ())):
        ET.SubElement(props, "property", {"name": name, "value": value})

    evidence = ET.SubElement(suite, "testcase", {"classname": SUITE, "name": "evidence"})
    if lost:
        ET.SubElement(evidence, "failure", {"type": "incomplete", "message": _text(
            f"{plural(result.lost, 'line')} lost, {_beyond(result)}: a pass cannot be claimed")}).text = _text(
            "\n".join([lost_head(result), *lost_items(result, MAX_LOST)]))
    for wf in result.workflows:
        case = ET.SubElement(suite, "testcase", {"classname": SUITE, "name": _text(wf.workflow_key)})
        for inc in failing.get(wf.workflow_key, ()):
            ET.SubElement(case, "failure", {"type": inc.severity.value,
                                            "message": _text(inc.witness)}).text = _details(inc)
    ET.indent(root, "  ")
    return ET.tostring(root, encoding="unicode", xml_declaration=False).join(
        ('<?xml version="1.0" encoding="UTF-8"?>\n', "\n"))


def _text(value: object) -> str:
    return visible(value, keep_layout=True)


def _details(inc: Incident) -> str:
    lines = [f"incident {inc.id}: {inc.severity.value}",
             f"displaced epoch {inc.displaced.epoch} ({inc.displaced.worker}), "
             f"current epoch {inc.current.epoch} ({inc.current.worker})", *incident_facts(inc)]
    lines += [f"do: {n}. {r}" for n, r in enumerate(actions(inc), 1)]
    return _text("\n".join(lines))


def _beyond(result: "AuditResult") -> str:
    """Which allowance lost evidence went past (SPEC revision 3.1: two of them)."""
    over = []
    if result.lost_lines > result.allow_quarantined:
        over.append(f"more than --allow-quarantined {result.allow_quarantined}")
    if result.unplaced_lost > result.allow_unplaced:
        over.append(f"{plural(result.unplaced_lost, 'unplaced event')}, more than --allow-unplaced "
                    f"{result.allow_unplaced}")
    return " and ".join(over)
