"""The smaller items of issue 44 (item 9), each on a real receiver or the real tokens file: a token
file with a byte order mark, a token that is not ASCII, ``--allow-host name:port``, 421s counted in
``/healthz``, a busy port."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from auditor.serve import TokensError, load_tokens
from .serve_kit import ROOT, Served, tokens_file


def test_a_tokens_file_with_a_byte_order_mark_works(tmp_path):
    path = tmp_path / "tokens"
    path.write_bytes(b"\xef\xbb\xbf" + f"{'t' * 20} worker\n".encode())
    assert load_tokens(path).roles("Bearer " + "t" * 20) == frozenset({"worker"})


def test_a_token_that_is_not_printable_ascii_is_refused_at_start_naming_the_line(tmp_path):
    path = tmp_path / "tokens"
    path.write_text(f"{'t' * 20} worker\n{'é' * 20} sink\n", encoding="utf-8")
    with pytest.raises(TokensError, match=r"tokens:2: the token holds characters that are not printable ASCII") as e:
        load_tokens(path)
    assert "é" not in str(e.value)  # never the token


@pytest.mark.slow
def test_allow_host_with_a_port_answers_and_421s_are_counted(tmp_path):
    server = Served(tmp_path, tmp_path / "h.duckdb", "--decoders", "0", "--tokens", str(tokens_file(tmp_path)),
                    "--allow-host", "127.0.0.1:4318").start()
    try:
        assert server.get("/healthz")[0] == 200  # Host 127.0.0.1:<port>: the name is allowed, whatever the port
        assert server.get("/healthz", {"Host": "rebound.example"})[0] == 421
        assert server.get("/healthz", {"Host": "rebound.example:4318"})[0] == 421
        assert server.json("/healthz")["unauthorized"] == 2
    finally:
        server.stop()


def test_a_busy_port_is_an_error_exit_2_not_incomplete(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "auditor", "serve", "--db", str(tmp_path / "b.duckdb"), "--port",
                               str(port), "-q", "--decoders", "0"], cwd=ROOT, capture_output=True, text=True,
                              timeout=120)
    assert proc.returncode == 2
    assert f"Error: --host 127.0.0.1 --port {port}: cannot listen there" in proc.stderr
