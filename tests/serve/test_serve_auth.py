"""Only your senders write, only you read (issue 36): bearer tokens and roles, Host, TLS, and every
forged record refused or quarantined so that the verdict never becomes a pass."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from auditor.serve import load_tokens, TokensError
from .serve_kit import ROOT, TOKENS, Served, auth, free_port, request, stored, tokens_file, verdict, verdict_here

KEY = "ledger/export/2026-07-26"
#: A failing history sent by a worker: epoch 17 displaced at seq 2, then an unresolved stale attempt
#: (seq 3), a stale commit (seq 4) and the same effect committed by epoch 18 (seq 5, a double commit).
FAILING = [
    {"kind": "lease_acquired", "workflow_key": KEY, "epoch": 17, "seq": 1, "worker": "alpha"},
    {"kind": "lease_acquired", "workflow_key": KEY, "epoch": 18, "seq": 2, "worker": "beta"},
    {"kind": "effect_attempted", "workflow_key": KEY, "epoch": 17, "seq": 3, "worker": "alpha", "effect_key": "x"},
    {"kind": "effect_committed", "workflow_key": KEY, "epoch": 17, "seq": 4, "worker": "alpha", "effect_key": "y"},
    {"kind": "effect_committed", "workflow_key": KEY, "epoch": 18, "seq": 5, "worker": "beta", "effect_key": "y"},
]
#: Each would better the verdict if believed: (the record, the roles that may send it).
FORGERIES = [
    ({"kind": "effect_compensated", "workflow_key": KEY, "seq": 6, "effect_key": "y"}, ("sink", "coordinator")),
    ({"kind": "effect_attempted", "workflow_key": KEY, "epoch": 17, "seq": 7, "effect_key": "x",
      "sink_result": "rejected"}, ("sink",)),
    ({"kind": "result_rejected", "workflow_key": KEY, "epoch": 17, "seq": 8, "effect_key": "x"}, ("sink",)),
    ({"kind": "outcome_verified", "workflow_key": KEY, "seq": 9, "effect_key": "y"}, ("verifier",)),
    ({"kind": "authority_granted", "workflow_key": KEY, "seq": 10, "authority_id": "m"}, ("coordinator",)),
    ({"kind": "authority_revoked", "workflow_key": KEY, "seq": 11, "authority_id": "m"}, ("coordinator",)),
    ({"kind": "revalidated", "workflow_key": KEY, "epoch": 18, "seq": 12, "decision": "continue"}, ("coordinator",)),
]


@pytest.mark.parametrize("text, message", [
    ("tok\n", "--tokens {p}:1: a token without roles"),
    (f"{'t' * 20} admin\n", '--tokens {p}:1: unknown role "admin"; roles are worker, sink, coordinator, verifier, '
                            "reader, any"),
    ("short worker\n", "--tokens {p}:1: the token is shorter than 16 characters"),
    (f"# senders\n{'t' * 20} worker\n{'t' * 20} sink\n", "--tokens {p}:3: the same token as line 2"),
    ("# nothing\n\n", "--tokens {p}: no token in it"),
])
def test_a_bad_tokens_file_names_the_line_never_the_token(tmp_path, text, message):
    path = tmp_path / "tokens"
    path.write_text(text)
    with pytest.raises(TokensError) as e:
        load_tokens(path)
    assert str(e.value).startswith(message.format(p=path))
    assert "t" * 20 not in str(e.value) and "short " not in str(e.value)


def test_tokens_roles_by_bearer_header(tmp_path):
    tokens = load_tokens(tokens_file(tmp_path))
    assert tokens.roles(f"Bearer {TOKENS['sink']}") == {"sink"}
    assert tokens.roles(f"bearer   {TOKENS['any']} ") == {"any"}
    assert tokens.roles(f"Basic {TOKENS['sink']}") is None
    assert tokens.roles("Bearer " + "x" * 24) is None and tokens.roles(None) is None


def test_listening_beyond_loopback_without_tokens_is_refused(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "auditor", "serve", "--host", "0.0.0.0", "--port", str(free_port()),
                           "--db", str(tmp_path / "x.duckdb")], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.startswith("Error: --host 0.0.0.0: listening beyond this machine without --tokens")


def partial(body: bytes) -> tuple[int, str]:
    r = ExportTraceServiceResponse.FromString(body)
    return r.partial_success.rejected_spans, r.partial_success.error_message


@pytest.mark.slow
def test_forged_records_are_refused_or_quarantined_and_never_make_a_pass(tmp_path):
    db = tmp_path / "auth.duckdb"
    with Served(tmp_path, db, "--decoders", "0", "--tokens", str(tokens_file(tmp_path))) as server:
        assert server.post(request(FAILING, 1), role="worker")[0] == 200
        # Who may talk: no token, an unknown one, a reader posting, a worker reading, a foreign Host.
        assert server.post(request(FAILING, 2), role=None)[0] == 401
        assert server.post(request(FAILING, 2), {"Authorization": "Bearer " + "x" * 24}, role=None)[0] == 401
        assert server.post(request(FAILING, 2), role="reader")[0] == 403
        assert server.get("/findings", {"Authorization": ""})[0] == 401
        assert server.get("/findings", auth("worker"))[0] == 403
        assert server.get("/findings", {"Host": "attacker.example"})[0] == 421
        assert server.post(request(FAILING, 2), {"Host": "attacker.example:4318"}, role="any")[0] == 421
        assert server.get("/findings", {"Host": f"localhost:{server.port}"})[0] == 200
        code, doc = verdict(db)
        assert (code, doc["verdict"]) == (1, "fail")
        quarantined = 0
        for n, (forged, roles) in enumerate(FORGERIES):
            for role in ("worker", *sorted({"sink", "coordinator", "verifier"} - set(roles))):
                status, body = server.post(request([forged], 100 + n), role=role)
                assert status == 200 and partial(body)[0] == 1, (forged, role)
                assert f"has the role {role}; only {' or '.join((*roles, 'any'))} may report it" in partial(body)[1]
                quarantined += 1
            server.get("/findings")  # answers once the store holds every acknowledged record
            code, said, counted = verdict_here(db)
            assert said != "pass" and code != 0 and counted == quarantined, forged
        code, doc = verdict(db)  # as an operator runs it
        assert (code, doc["verdict"], doc["input"]["quarantined"]) == (1, "fail", quarantined)
        reasons = [r for (r,) in stored(db, "SELECT reason FROM quarantine")]
        assert len(reasons) == quarantined and all("(--tokens): not believed" in r for r in reasons)
        # The role decides: the sink's own rejection is believed (the stale attempt is now a near miss).
        status, body = server.post(request([FORGERIES[1][0]], 200), role="sink")
        assert status == 200 and partial(body)[0] == 0
        grades = sorted(f["grade"] for f in server.json("/findings"))
        assert grades == ["double_commit", "rejected_attempt", "stale_commit"]


def self_signed(tmp_path):
    """A certificate and key for localhost (openssl's own CLI)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("openssl") is None, reason="makes its certificate with the openssl CLI")
def test_the_sdk_exporter_sends_with_a_bearer_token_over_tls_with_a_client_certificate(tmp_path, monkeypatch):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    # requests lets these override the exporter's certificate_file (its session's verify)
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    cert, key = self_signed(tmp_path)
    db = tmp_path / "tls.duckdb"
    args = ["--decoders", "0", "--tokens", str(tokens_file(tmp_path)), "--tls-cert", str(cert), "--tls-key", str(key),
            "--tls-client-ca", str(cert)]
    server = Served(tmp_path, db, *args, tls=cert)
    server.connection = _with_client_cert(server, cert, key)
    with server:
        memory = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        for e in FAILING:
            provider.get_tracer("t").start_span("step", attributes={"ownership.event": e["kind"], **{
                "ownership." + k: v for k, v in e.items() if k != "kind"}}).end()
        endpoint = f"https://localhost:{server.port}/v1/traces"
        good = OTLPSpanExporter(endpoint=endpoint, certificate_file=str(cert), client_certificate_file=str(cert),
                                client_key_file=str(key), headers={"authorization": f"Bearer {TOKENS['worker']}"},
                                timeout=10)
        assert good.export(memory.get_finished_spans()) is SpanExportResult.SUCCESS
        no_client_cert = OTLPSpanExporter(endpoint=endpoint, certificate_file=str(cert), timeout=3,
                                          headers={"authorization": f"Bearer {TOKENS['worker']}"})
        assert no_client_cert.export(memory.get_finished_spans()) is SpanExportResult.FAILURE
        good.shutdown()
        no_client_cert.shutdown()
        assert sorted(f["grade"] for f in server.json("/findings")) == ["double_commit", "stale_attempt", "stale_commit"]
    assert stored(db, "SELECT count(*) FROM events") == [(5,)]


def _with_client_cert(server: Served, cert, key):
    import http.client
    import ssl

    def connection(timeout: float = 30.0):
        context = ssl.create_default_context(cafile=str(cert))
        context.load_cert_chain(str(cert), str(key))
        return http.client.HTTPSConnection("localhost", server.port, timeout=timeout, context=context)

    return connection


def test_a_rejection_spelled_another_way_is_still_a_rejection():
    """The role check reads evidence as the store will: ``Sink_Result`` and ``sinkResult`` are
    ``sink_result`` to the normalizer, so a worker's token cannot slip a rejection past it."""
    from auditor.serve.evidence import screen

    base = {"seq": 9, "workflow_key": "k", "kind": "effect_attempted", "epoch": 1, "effect_key": "x"}
    for spelling in ("sink_result", "Sink_Result", "sinkResult", "SINK_RESULT"):
        kept, refused = screen([{**base, spelling: "rejected"}], frozenset({"worker"}), 1024)
        assert (kept, len(refused)) == ([], 1), spelling
        assert "a rejection (sink_result=rejected) from a sender whose token has the role worker" in refused[0]
    kept, refused = screen([base], frozenset({"worker"}), 1024)
    assert (kept, refused) == ([base], [])
