"""The JUnit XML (``render/junit.py``): a case per workflow key, a failure per incident, the
evidence case of an incomplete audit; written by the CLI in a real subprocess."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..conftest import FIXTURES, run_cli

SEED = str(FIXTURES / "seed_split_brain.jsonl")

def test_junit_has_a_case_per_workflow_key_and_a_failure_per_incident(tmp_path):
    path = tmp_path / "audit.xml"
    p = run_cli("audit", SEED, "--junit", str(path))
    assert p.returncode == 1, p.stderr
    root = ET.parse(path).getroot()
    suite = root.find("testsuite")
    assert (root.tag, root.attrib) == ("testsuites", {
        "name": "split-brain-audit", "tests": "4", "failures": "1", "errors": "0"})
    assert {p.get("name"): p.get("value") for p in suite.iter("property")} == {
        "verdict": "fail", "fail_on": "stale_attempt", "lost": "0", "allow_quarantined": "0"}
    cases = {c.get("name"): [(f.get("type"), f.get("message")) for f in c.findall("failure")]
             for c in suite.findall("testcase")}
    assert cases == {
        "evidence": [],
        "checkout/sync/cart-881": [],
        "ledger/export/2026-07-26": [(
            "double_commit",
            "epoch 18 (beta) was acquired at seq 5; epoch 17 (alpha) then committed "
            "release-index/2026-07-26 at seq 8: a displaced owner changed the outside world. Epoch 18 "
            "(beta) committed release-index/2026-07-26 again at seq 9 after epoch 17 had: the effect "
            "happened twice.")],
        "reports/index/2026-07-26": [],
    }
    text = suite.find("testcase[@name='ledger/export/2026-07-26']/failure").text.splitlines()
    assert text[2:4] == ["stale for 3 min after the takeover, seq 6-8",
                         "effects: release-index/2026-07-26 committed, unverified"]
    assert text[-1] == "do: 4. Stop or quarantine the old worker; verify it emits nothing more."


def test_junit_of_an_incomplete_audit_fails_the_evidence_case(lossy, tmp_path):
    path = tmp_path / "audit.xml"
    assert run_cli("audit", str(lossy), "--junit", str(path), "-q").returncode == 3
    failure = ET.parse(path).getroot().find("testsuite/testcase[@name='evidence']/failure")
    assert failure.attrib == {"type": "incomplete", "message": "1 line lost, more than "
                              "--allow-quarantined 0: a pass cannot be claimed"}
    assert failure.text.splitlines() == [
        "1 quarantined line, 0 event_id conflicts (more than --allow-quarantined 0)",
        f'{lossy}:10: "epoch" is "seventeen", expected an integer in int64 range']

