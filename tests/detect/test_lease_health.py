"""Lease health (SPEC section 7) through the real pipeline: the diagnostics with their numbers, the
options (--by, --heartbeat-misses), the verdict they never change, scope, stores, the renderings.

Every metric of the fixtures is pinned whole by ``<stem>.expected.json`` (tests/test_fixtures.py);
here the diagnostics' numbers and sentences are, and what each option changes.
"""

from __future__ import annotations

import json

import pytest

from auditor import AuditError, Scope, audit, report
from auditor.core.model import DiagnosticKind, Verdict
from auditor.render.markdown import code, render_markdown
from auditor.render.terminal import lease_lines

from ..conftest import FIXTURES, run_cli, vocabulary_of, write_jsonl

SEED000 = FIXTURES / "lease_timing_35s_vs_90s.jsonl"
W1W2 = FIXTURES / "w1_w2_pause_expired_lease.jsonl"
BOUNDARY = FIXTURES / "lease_boundary_early_reclaim.jsonl"
JOB_LOG = FIXTURES / "job_log_mapped_vocabulary.jsonl"
ADVICE_RISK = ("lengthen the lease above R*H+J (seed 000: heartbeats every 30 s, one miss tolerated, 20 s of "
               "jitter: 90 s is a sensible buffer), or heartbeat more often, or make the heartbeat path steadier")
ADVICE_LATE = "extend earlier: with at least one heartbeat interval and a retry's reserve left"
ADVICE_EARLY = ("check the coordinator's reclaim condition (lease_until < now() on the coordinator's clock) "
                "and clock agreement between coordinator and workers")
ADVICE_EFFECT = ("a worker that cannot confirm its lease must start no new external action: check the lease "
                 "before each effect, and fence the sink")
LEASE_KINDS = {DiagnosticKind.LEASE_TIMING_RISK, DiagnosticKind.LATE_EXTENSION,
               DiagnosticKind.TAKEOVER_BEFORE_EXPIRY, DiagnosticKind.EFFECT_AFTER_LEASE_EXPIRY}


def lease_diagnostics(result):
    return [(d.kind.value, d.workflow_key, d.seq, d.epoch, d.group, d.numbers, d.detail)
            for d in result.diagnostics if d.kind in LEASE_KINDS]


# The diagnostics, whole: kind, where, group, numbers, and the sentence with what to change.

BROWSER = {"tool": "browser", "model": "m-large"}
SQL_P1 = {"tool": "sql", "provider": "p1"}


def _late(group, key, seq, epoch, h, leases, extensions, least, worst, said):
    """One group's late_extension: the counts, the least time left, the worst leases (key, epoch,
    worker, seq, position, late extensions, least left), and the sentence."""
    return ("late_extension", key, seq, epoch, group,
            {"leases": leases, "extensions": extensions, "least_left_s": least, "H": h,
             "worst": [{"workflow_key": k, "epoch": e, "worker": w, "seq": s, "extensions": n, "least_left_s": x,
                        "position": p} for k, e, w, s, p, n, x in worst]},
            said + "; " + ADVICE_LATE)


CASES = {
    # Seed 000: H = 30 s, J = 20 s, R = 1; the 35 s lease is at risk, the 90 s one is not. Each
    # browser job extended four times with under 30 s left: one late_extension for the group.
    SEED000: [
        ("lease_timing_risk", "agent/browser/job-1", 1, 1, BROWSER,
         {"L": 35.0, "R": 1, "H": 30.0, "J": 20.0, "threshold": 50.0, "gaps": 6},
         "tool=browser, model=m-large: the shortest lease L = 35 s is not above R*H+J = 1 x 30 s + 20 s = 50 s "
         "(H the median of 6 heartbeat gaps, J = max - median): an ordinary delay revokes a worker that is "
         "still running (shortest lease granted here); " + ADVICE_RISK),
        _late(BROWSER, "agent/browser/job-1", 4, 1, 30.0, 2, 8, -15.0,
              [("agent/browser/job-1", 1, "browser-w1", 4, 4, 4, -15.0), ("agent/browser/job-2", 1, "browser-w2", 9, 9, 4, -15.0)],
              "tool=browser, model=m-large: 8 extensions in 2 leases came with less than one heartbeat interval "
              "(H = 30 s) left; the least: 15 s after it had expired, by epoch 1 (browser-w1) of agent/browser/job-1"),
    ],
    # Seed 000's pause test: W1 keeps going after its lease expired; the rejection is a receipt.
    W1W2: [
        ("effect_after_lease_expiry", "8f1b2c7e", 8, 42, {"tool": "http"}, {"after_expiry_s": 51.0},
         "epoch 42 (W1) attempted ext-791 51 s after its own lease expired (at 2026-07-23T21:15:30Z; "
         "by ts, so confidence medium); " + ADVICE_EFFECT),
    ],
    BOUNDARY: [
        # Revision 3: the refused heartbeat at seq 5 is an attempt, so the gaps are 10, 10, 10.25 and 30 s.
        ("lease_timing_risk", "etl/load/2026-07-26", 1, 5, SQL_P1,
         {"L": 30.0, "R": 1, "H": 10.125, "J": 19.875, "threshold": 30.0, "gaps": 4},
         "tool=sql, provider=p1: the shortest lease L = 30 s is not above R*H+J = 1 x 10.125 s + 19.875 s = 30 s "
         "(H the median of 4 heartbeat gaps, J = max - median): an ordinary delay revokes a worker that is "
         "still running (shortest lease granted here); " + ADVICE_RISK),
        _late(SQL_P1, "etl/load/2026-07-26", 4, 5, 10.125, 1, 1, 0.0, [("etl/load/2026-07-26", 5, "w-a", 4, 4, 1, 0.0)],
              "tool=sql, provider=p1: 1 extension in 1 lease came with less than one heartbeat interval "
              "(H = 10.125 s) left; the least: 0 s left, by epoch 5 (w-a) of etl/load/2026-07-26"),
        ("takeover_before_expiry", "etl/load/2026-07-26", 8, 6, SQL_P1, {"remaining_s": 19.5, "current_epoch": 7},
         "epoch 7 took over while the lease of epoch 6 (w-b) still had 19.5 s to run (until "
         "2026-07-26T10:02:05Z); " + ADVICE_EARLY),
        ("effect_after_lease_expiry", "etl/load/2026-07-26", 9, 6, SQL_P1, {"after_expiry_s": 1.0},
         "epoch 6 (w-b) attempted load:2026-07-26 1 s after its own lease expired (at 2026-07-26T10:02:05Z; "
         "by ts, so confidence medium); " + ADVICE_EFFECT),
        ("takeover_before_expiry", "etl/load/2026-07-27", 2, 1, {"tool": "sql", "provider": None},
         {"remaining_s": 60.0, "current_epoch": 2},
         "epoch 2 took over while the lease of epoch 1 (w-e) still had 60 s to run (until "
         "2026-07-27T12:01:30Z); " + ADVICE_EARLY),
    ],
    JOB_LOG: [
        ("takeover_before_expiry", "c2a90e11", 10, 7, {}, {"remaining_s": 40.0, "current_epoch": 8},
         "epoch 8 took over while the lease of epoch 7 (W3) still had 40 s to run (until "
         "2026-07-23T21:16:00Z); " + ADVICE_EARLY),
    ],
}


@pytest.mark.parametrize("log", list(CASES), ids=[p.stem for p in CASES])
def test_diagnostics_carry_their_numbers_and_what_to_change(log):
    with audit(log, vocabulary=vocabulary_of(log)) as result:
        assert lease_diagnostics(result) == CASES[log]
        assert list(result.lease_health.diagnostics) == [d for d in result.diagnostics if d.kind in LEASE_KINDS]


def test_lease_diagnostics_never_fail_or_hold_back_a_verdict():
    with audit(SEED000, fail_on="stale_activity") as result:
        assert len(result.diagnostics) == 2 and result.findings == []
        assert (result.verdict, result.exit_code) == (Verdict.PASS, 0)
    p = run_cli("audit", str(SEED000), "--fail-on", "stale_activity", "-q")
    assert p.returncode == 0, p.stderr


# --heartbeat-misses and --by.


@pytest.mark.parametrize("misses, expected", [
    (0, [("tool=browser", 20.0, 15.0, False), ("tool=search", 20.0, 70.0, False)]),
    (1, [("tool=browser", 50.0, -15.0, True), ("tool=search", 50.0, 40.0, False)]),
    (2, [("tool=browser", 80.0, -45.0, True), ("tool=search", 80.0, 10.0, False)]),
    (3, [("tool=browser", 110.0, -75.0, True), ("tool=search", 110.0, -20.0, True)]),
])
def test_heartbeat_misses_is_r_in_the_rule(misses, expected):
    with audit(SEED000, by=["tool"], heartbeat_misses=misses) as result:
        health = result.lease_health
        assert (health.by, health.heartbeat_misses) == (("tool",), misses)
        assert [(g.label, g.threshold, g.margin, g.at_risk) for g in health.groups] == expected
        risks = [d.numbers for d in result.diagnostics if d.kind is DiagnosticKind.LEASE_TIMING_RISK]
        assert [r["R"] for r in risks] == [misses] * sum(at_risk for *_, at_risk in expected)


@pytest.mark.parametrize("by, labels", [
    (None, ["tool=browser, model=m-large", "tool=search, model=m-small"]),  # default: those present
    (["model"], ["model=m-large", "model=m-small"]),
    (["provider"], ["provider=-"]),  # nobody carries it: one group, the value missing
    ([], ["all keys"]),
    (["tool", "tool"], ["tool=browser", "tool=search"]),
])
def test_by_chooses_the_dimensions(by, labels):
    with audit(SEED000, by=by) as result:
        assert [g.label for g in result.lease_health.groups] == labels
        assert sum(g.keys for g in result.lease_health.groups) == 4


def test_pooled_group_figures_are_not_medians_of_medians():
    with audit(BOUNDARY) as result:
        group = result.lease_health.groups[0]
        keys = {k.workflow_key: k.metrics for k in result.lease_health.keys}
    # etl/load/2026-07-26 has gaps 10, 30 and 10.25 s (the last to its refused heartbeat; median
    # 10.25), etl/load/2026-07-28 one of 10 s: the group's H is the median of all four gaps,
    # 10.125 s (not 10.25 nor 10.125's median of medians), so its threshold is 30 s and L = 30 s is at risk.
    assert (keys["etl/load/2026-07-26"].heartbeat_interval_median, keys["etl/load/2026-07-28"].heartbeat_interval_median,
            group.metrics.heartbeat_interval_median, group.threshold, group.at_risk) == (10.25, 10.0, 10.125, 30.0, True)
    assert "etl/no-lease/2026-07-26" not in keys  # no lease evidence: not a lease-health key


@pytest.mark.parametrize("kwargs, message", [
    ({"heartbeat_misses": -1}, "--heartbeat-misses is -1, expected a whole number of heartbeats one is "
                               "willing to miss (0 or more; default 1)"),
    ({"heartbeat_misses": 1.5}, "--heartbeat-misses is 1.5, expected a whole number of heartbeats one is "
                                "willing to miss (0 or more; default 1)"),
    ({"by": ["tool", " "]}, "--by ' ': expected the name of an attrs member, e.g. --by tool"),
])
def test_bad_options_raise_before_reading(kwargs, message, tmp_path):
    with pytest.raises(AuditError) as e:
        audit(tmp_path / "not-read.jsonl", **kwargs)
    assert str(e.value) == message


@pytest.mark.slow
def test_cli_options_on_audit_and_report(tmp_path):
    db = tmp_path / "store.duckdb"
    assert run_cli("ingest", str(SEED000), "--db", str(db), "-q").returncode == 0
    audited = run_cli("audit", str(SEED000), "--by", "tool", "--heartbeat-misses", "2", "--json", "-", "-q")
    reported = run_cli("report", "--db", str(db), "--by", "tool", "--heartbeat-misses", "2", "--json", "-", "-q")
    assert (audited.returncode, reported.returncode) == (0, 0), (audited.stderr, reported.stderr)
    a, r = json.loads(audited.stdout), json.loads(reported.stdout)
    assert a["lease_health"] == r["lease_health"]
    assert (a["lease_health"]["by"], a["lease_health"]["heartbeat_misses"]) == (["tool"], 2)
    assert [(g["group"], g["threshold_s"], g["at_risk"]) for g in a["lease_health"]["groups"]] == [
        ({"tool": "browser"}, 80.0, True), ({"tool": "search"}, 80.0, False)]
    bad = run_cli("report", "--db", str(db), "--by", "")
    assert (bad.returncode, bad.stderr.decode().strip()) == (
        2, "Error: --by '': expected the name of an attrs member, e.g. --by tool")


@pytest.mark.slow
def test_json_section_is_deterministic_and_rounded(tmp_path):
    first = run_cli("audit", str(BOUNDARY), "--json", "-", "-q")
    second = run_cli("audit", str(BOUNDARY), "--json", "-", "-q")
    assert first.stdout == second.stdout
    doc = json.loads(first.stdout)
    keys = {k["workflow_key"]: k for k in doc["lease_health"]["keys"]}
    assert keys["etl/load/2026-07-26"]["heartbeat_age_at_takeover_s"] == {"median": 22.75, "max": 35.0}
    assert keys["etl/load/2026-07-26"]["takeovers"][1] == {
        "seq": 8, "position": 8, "epoch": 7, "worker": "w-c", "displaced_epoch": 6, "displaced_worker": "w-b", "reclaim": True,
        "expired": False, "displaced_lease_until": "2026-07-26T10:02:05Z", "remaining_s": 19.5,
        "heartbeat_age_s": 10.5}
    # A log without lease fields gets the section, empty.
    plain = json.loads(run_cli("audit", str(FIXTURES / "seed_split_brain.jsonl"), "--json", "-", "-q").stdout)
    assert plain["lease_health"] == {"by": [], "heartbeat_misses": 1, "groups": [], "keys": []}


def test_milliseconds_survive_and_round_to_the_millisecond(tmp_path):
    events = [{"seq": 1, "workflow_key": "k", "kind": "lease_acquired", "epoch": 1, "ts": "2026-07-26T10:00:00Z",
               "lease_until": "2026-07-26T10:00:30.0004Z"}]
    events += [{"seq": n + 2, "workflow_key": "k", "kind": "progress", "epoch": 1, "heartbeat": "ok",
                "ts": f"2026-07-26T10:00:{10 * n:02d}.{n * 333:03d}Z"} for n in range(4)]
    with audit(write_jsonl(tmp_path / "ms.jsonl", events)) as result:
        m = result.lease_health.keys[0].metrics
    # gaps 10.333, 10.333, 10.333 s; the lease 30.000 s (the sub-millisecond part is dropped)
    assert (m.heartbeat_gaps, m.heartbeat_interval_median, m.heartbeat_jitter, m.lease_min) == (3, 10.333, 0.0, 30.0)


def test_scope_keeps_the_groups_of_its_keys_whole():
    with audit(SEED000, scope=Scope(keys=("agent/browser/job-2",))) as result:
        health = result.lease_health
        assert [k.workflow_key for k in health.keys] == ["agent/browser/job-2"]
        assert [(g.label, g.keys, g.metrics.heartbeat_gaps) for g in health.groups] == [
            ("tool=browser, model=m-large", 2, 6)]  # the group's figures are over all its keys
        kinds = [(d.kind.value, d.workflow_key) for d in result.diagnostics]
        # The group's diagnostics stay with it, at the group's shortest lease and worst extension.
        assert kinds == [("lease_timing_risk", "agent/browser/job-1"), ("late_extension", "agent/browser/job-1")]
    with audit(SEED000, scope=Scope(keys=("agent/search/*",))) as result:
        assert [g.label for g in result.lease_health.groups] == ["tool=search, model=m-small"]
        assert result.diagnostics == []


# The renderings.


def test_terminal_shows_the_riskiest_groups():
    with audit(SEED000) as result:
        lines = [line.plain for line in lease_lines(result)]
    assert lines == [
        "",
        "lease health (rule L > R*H+J, R = 1; grouped by tool, model): 1 of 2 groups at risk:",
        "  rule     L min  R*H+J     H     J  keys  expired  reclaims  failed  hb age  group",
        "  AT RISK   35 s   50 s  30 s  20 s     2        0         0       0       -  tool=browser, model=m-large",
        "  safe      90 s   50 s  30 s  20 s     2        0         0       0       -  tool=search, model=m-small",
        "  failed: extensions refused (heartbeat=lost); hb age: how old the displaced owner's last heartbeat "
        "was at a takeover (max)",
        "  " + CASES[SEED000][0][-1],
    ]
    p = run_cli("audit", str(W1W2))
    out = p.stdout.decode()
    assert p.returncode == 0, p.stderr
    assert ("  too few gaps   90 s  140 s  85 s  55 s     1        1         1       1   105 s  tool=http"
            in out.splitlines())
    assert "diagnostics: effect_after_lease_expiry 1" in out


def test_terminal_says_nothing_without_lease_evidence():
    with audit(FIXTURES / "seed_split_brain.jsonl") as result:
        assert lease_lines(result) == []


def test_markdown_has_a_short_section():
    with audit(SEED000) as result:
        text = render_markdown(result)
    section = text[text.index("## Lease health"):text.index("## Incidents")].splitlines()
    assert section[:8] == [
        "## Lease health", "",
        "Lease health (rule L \\> R\\*H+J, R = 1; grouped by tool, model): 1 of 2 groups at risk.", "",
        "| rule | L min | R\\*H+J | H | J | keys | expired | reclaims | failed extensions | heartbeat age at "
        "takeover | group |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        "| **AT RISK** | 35 s | 50 s | 30 s | 20 s | 2 | 0 | 0 | 0 | - | `tool=browser, model=m-large` |",
        "| safe | 90 s | 50 s | 30 s | 20 s | 2 | 0 | 0 | 0 | - | `tool=search, model=m-small` |"]


def test_hostile_dimension_values_stay_text(tmp_path):
    hostile = "<img src=x onerror=alert(1)>|`*"
    events = [{"seq": 1, "workflow_key": "k", "kind": "lease_acquired", "epoch": 1, "ts": "2026-07-26T10:00:00Z",
               "lease_until": "2026-07-26T10:00:20Z", "attrs": {"tool": hostile}}]
    events += [{"seq": n + 2, "workflow_key": "k", "kind": "progress", "epoch": 1, "heartbeat": "ok",
                "ts": f"2026-07-26T10:00:{10 * n:02d}Z", "lease_until": f"2026-07-26T10:00:{10 * n + 20:02d}Z",
                "attrs": {"tool": hostile}} for n in range(4)]
    from auditor.render.html import render_html

    with audit(write_jsonl(tmp_path / "hostile.jsonl", events)) as result:
        assert [g.label for g in result.lease_health.groups] == [f"tool={hostile}"]
        page, md = render_html(result), render_markdown(result)
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert f"| {code('tool=' + hostile)} |" in md and "<img" not in md.replace(code("tool=" + hostile), "")
