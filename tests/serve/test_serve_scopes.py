"""Scoped tokens and attribution (issue 44, item 7): a sink token limited to its sink names and
key globs, a coordinator token to key globs; out-of-scope records refused per record, counted in
``/healthz`` and quarantined; every stored record attributed to the name of the token that
delivered it, never the token itself. A real receiver, the probe's four forgeries."""

from __future__ import annotations

import json

import pytest

from .serve_kit import TOKENS, Served, request, stored, verdict

KEY = "ledger/export/2026-07-26"
OTHER = "billing/charge/42"
TAKEOVER = [{"kind": "lease_acquired", "workflow_key": KEY, "epoch": 17, "seq": 1, "worker": "alpha"},
            {"kind": "lease_acquired", "workflow_key": KEY, "epoch": 18, "seq": 2, "worker": "beta"},
            {"kind": "effect_attempted", "workflow_key": KEY, "epoch": 17, "seq": 3, "worker": "alpha",
             "effect_key": "pay-1", "sink": "payments"}]
ON_OTHER = [dict(e, workflow_key=OTHER) for e in TAKEOVER]
REJECT = {"kind": "effect_attempted", "epoch": 17, "seq": 4, "worker": "payments", "effect_key": "pay-1",
          "sink_result": "rejected", "reporter": "sink"}
SINK, COORD = "s" * 24, "c" * 24


def tokens(tmp_path):
    path = tmp_path / "tokens"
    path.write_text(f"{TOKENS['worker']} worker name=agents\n"
                    f"{SINK} sink name=payments-fence sinks=payments keys=ledger/*\n"
                    f"{COORD} coordinator name=lease-service keys=ledger/*\n"
                    f"{TOKENS['reader']} reader name=oncall\n")
    return path


def post(server: Served, events: list[dict], trace: int, token: str) -> tuple[int, dict]:
    status, body = server.post(request(events, trace), {"Authorization": f"Bearer {token}"}, role=None)
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

    r = ExportTraceServiceResponse.FromString(body)
    return status, {"rejected": r.partial_success.rejected_spans, "message": r.partial_success.error_message}


@pytest.mark.slow
def test_scoped_tokens_refuse_out_of_scope_records_and_every_record_names_its_token(tmp_path):
    db = tmp_path / "scopes.duckdb"
    with Served(tmp_path, db, "--decoders", "0", "--tokens", str(tokens(tmp_path))) as server:
        assert server.post(request(TAKEOVER, 1), role="worker")[0] == 200
        assert server.post(request(ON_OTHER, 2), role="worker")[0] == 200
        # The probe's forgeries: a rejection for another sink, a rejection and a compensation for a
        # key outside the sink's globs, a re-grant for a key outside the coordinator's.
        forged = [([dict(REJECT, workflow_key=KEY, sink="ledger-db")], SINK, "sink 'ledger-db' is not among the sinks"),
                  ([dict(REJECT, workflow_key=OTHER, sink="payments")], SINK, f"workflow_key '{OTHER}' is not among"),
                  ([{"kind": "effect_compensated", "workflow_key": OTHER, "epoch": 17, "seq": 5, "worker": "payments",
                     "effect_key": "pay-1", "sink": "payments"}], SINK, f"workflow_key '{OTHER}' is not among"),
                  ([{"kind": "authority_granted", "workflow_key": OTHER, "epoch": 17, "seq": 6, "worker": "alpha"}],
                   COORD, f"workflow_key '{OTHER}' is not among the keys of token lease-service")]
        for n, (events, token, said) in enumerate(forged):
            status, answer = post(server, events, 10 + n, token)
            assert status == 200 and answer["rejected"] == 1 and said in answer["message"], answer
            assert "out of scope" in answer["message"] and token not in answer["message"]
        assert server.json("/healthz")["out_of_scope"] == 4
        # In scope: the fence's own rejection on its own key is believed.
        status, answer = post(server, [dict(REJECT, workflow_key=KEY, sink="payments")], 20, SINK)
        assert status == 200 and answer["rejected"] == 0
        findings = server.json("/findings")
        assert sorted({(f["workflow_key"], f["grade"]) for f in findings}) == [
            (OTHER, "stale_attempt"), (KEY, "rejected_attempt")]
    code, doc = verdict(db)
    assert (code, doc["verdict"], doc["input"]["quarantined"]) == (1, "fail", 4)
    names = stored(db, "SELECT json_extract_string(attrs, '$.\"auditor.token\"') AS t, count(*) FROM events "
                       "GROUP BY t ORDER BY t")
    assert names == [("agents", 6), ("payments-fence", 1)]
    everything = json.dumps(stored(db, "SELECT * FROM events") + stored(db, "SELECT * FROM quarantine"), default=str)
    assert not any(t in everything for t in (SINK, COORD, TOKENS["worker"]))  # names, never the tokens


def report(db, *args: str) -> tuple[int, str, str]:
    import subprocess
    import sys

    from .serve_kit import ROOT

    proc = subprocess.run([sys.executable, "-m", "auditor", "report", "--db", str(db), "-q", "--wait", "30", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.slow
def test_each_finding_names_the_tokens_that_delivered_its_evidence_and_a_token_is_a_scope(tmp_path):
    db = tmp_path / "attributed.duckdb"
    with Served(tmp_path, db, "--decoders", "0", "--tokens", str(tokens(tmp_path))) as server:
        # The takeover on KEY comes from the lease service, the displaced owner's commit from the agents;
        # on OTHER the agents deliver all of it; the fence's rejection on KEY resolves the attempt.
        acquire, takeover, attempt = TAKEOVER
        assert post(server, [acquire, attempt], 1, TOKENS["worker"]) == (200, {"rejected": 0, "message": ""})
        assert post(server, [takeover], 2, COORD)[0] == 200
        assert post(server, ON_OTHER, 3, TOKENS["worker"])[0] == 200
        assert post(server, [dict(REJECT, workflow_key=KEY, sink="payments")], 4, SINK)[0] == 200
        live = {f["workflow_key"]: f.get("tokens") for f in server.json("/findings")}
    assert live == {KEY: {"event": "agents", "transition": "lease-service", "receipt": "payments-fence"},
                    OTHER: {"event": "agents", "transition": "agents"}}
    code, out, err = report(db, "--json", "-")
    doc = json.loads(out)
    assert code == 1 and {f["workflow_key"]: f["tokens"] for f in doc["findings"]} == live, err
    html = tmp_path / "r.html"
    assert report(db, "--html", str(html))[0] == 1
    page = html.read_text()
    assert "delivered by token agents (event), lease-service (transition), payments-fence (receipt)" in page
    assert not any(t in page for t in (SINK, COORD, TOKENS["worker"]))
    # A token as a scope: only the findings whose evidence it delivered.
    code, out, _ = report(db, "--json", "-", "--token", "lease-service")
    doc = json.loads(out)
    assert [(f["workflow_key"], f["grade"]) for f in doc["findings"]] == [(KEY, "rejected_attempt")]
    assert doc["scope"]["tokens"] == ["lease-service"] and code == 0  # a rejected attempt alone passes
    code, out, err = report(db, "--json", "-", "--token", "payments")  # a sink's name, not a token's
    assert code == 2 and "--token payments: no stored record was delivered by that token" in err
    assert "agents, lease-service, payments-fence" in err and not out


def test_an_auditor_token_attribute_in_a_file_is_no_attribution(tmp_path):
    """Only the receiver attributes: a log line claiming a token changes nothing in the document."""
    from auditor import audit

    log = tmp_path / "claims.jsonl"
    log.write_text("".join(json.dumps(dict(e, attrs={"auditor.token": "lease-service"})) + "\n" for e in TAKEOVER))
    with audit([log]) as result:
        doc = result.to_dict()
        assert [f["grade"] for f in doc["findings"]] == ["stale_attempt"] and "tokens" not in doc["findings"][0]
        assert result.token_names == ()
    from auditor import Scope
    from auditor.explain.scope import ScopeError

    with pytest.raises(ScopeError, match="no record came through auditor serve"):
        audit([log], scope=Scope(tokens=("lease-service",)))
