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
