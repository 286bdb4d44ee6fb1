"""Issue 19, limits with clear answers: bombs, huge lines and endless standard input.

Kept small and fast: each bomb is just past a limit (the 64 MiB ratio floor, or a limit lowered
through ``Limits`` or an ``AUDITOR_MAX_*`` variable). bench/bombs.py measures the full-size ones
(a gigabyte behind a megabyte of gzip) and their peak RSS.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest
import zstandard

from auditor import AuditorError, LimitExceeded, Limits, audit
from auditor.core.limits import RATIO_FLOOR

from ..conftest import ROOT

ACQ = '{"seq": 1, "workflow_key": "k", "kind": "lease_acquired", "epoch": 1}\n'
STALE = '{"seq": 3, "workflow_key": "k", "kind": "effect_committed", "epoch": 0, "effect_key": "e"}\n'


@pytest.mark.parametrize("kind", ["gzip", "zstd"])
@pytest.mark.parametrize("filler", [b"a", b"\n"], ids=["one-line", "newlines"])
def test_a_decompression_bomb_is_refused_naming_the_limit(tmp_path, kind, filler):
    data = ACQ.encode() + filler * (RATIO_FLOOR + (8 << 20))
    path = tmp_path / f"bomb.jsonl.{'gz' if kind == 'gzip' else 'zst'}"
    path.write_bytes(gzip.compress(data, 1) if kind == "gzip" else zstandard.ZstdCompressor(3).compress(data))
    with pytest.raises(LimitExceeded) as e:
        audit([path])
    assert str(e.value).startswith(f"{path}: decompresses to more than 200 times its size (")
    assert str(e.value).endswith("if it is a real log, raise it with AUDITOR_MAX_RATIO=N (or "
                                 "Limits(max_ratio=N) in Python)")
    r = audit([path], limits=Limits(max_ratio=100_000))  # raised: read, one line quarantined
    assert r.input.events == 1 and r.input.quarantined == (filler == b"a")


def test_the_decompressed_size_limit(tmp_path):
    path = tmp_path / "big.jsonl.gz"
    path.write_bytes(gzip.compress((ACQ * 20_000).encode()))
    with pytest.raises(LimitExceeded, match=r"decompresses to more than 512\.0 KiB, the limit on one input; "
                                            r"nothing from this file was used; raise it with AUDITOR_MAX_INPUT_BYTES"):
        audit([path], limits=Limits(max_input_bytes=512 << 10))


def test_a_line_over_the_limit_is_quarantined_and_the_rest_is_read(tmp_path):
    big = json.dumps({"seq": 2, "workflow_key": "k", "kind": "progress", "epoch": 1, "attrs": {"b": "x" * 300_000}})
    path = tmp_path / "long.jsonl"
    # A long line inside a chunk, one across chunks, one without a newline at the end.
    path.write_text(ACQ + big + "\n" + "y" * 700_000 + "\n" + STALE + "z" * 500_000)
    limits = Limits(max_line_bytes=200_000)
    r = audit([path], limits=limits)
    assert (r.input.lines_read, r.input.events, r.input.quarantined) == (5, 2, 3)
    reason = ("line is longer than 200,000 bytes, the limit on one line; write large payloads elsewhere "
              "and reference them, or raise it with AUDITOR_MAX_LINE_BYTES=N (or Limits(max_line_bytes=N) in Python)")
    assert [(q.line, q.reason) for q in r.input.quarantine] == [(2, reason), (3, reason), (5, reason)]
    assert r.input.events == 2 and r.timeline("k")[-1].seq == 3

    from auditor.ingest import jsonl_chunks, discover

    src = discover([path], limits)[0]
    small = [t for t in jsonl_chunks(src, chunk_bytes=64 << 10)]  # the long lines span many reads
    assert sorted(n for t in small for n in t.column("line").to_pylist()) == [1, 2, 3, 4, 5]


def test_the_line_limit_through_the_environment_in_otlp(tmp_path):
    otlp = tmp_path / "spans.otlp.jsonl"
    otlp.write_text('{"resourceSpans": []}\n' + '{"resourceSpans": [' + " " * 5000 + "]}\n")
    env = {**os.environ, "AUDITOR_MAX_LINE_BYTES": "4K"}
    p = subprocess.run([sys.executable, "-m", "auditor", "audit", str(otlp)], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stderr.splitlines()[0]) == (
        2, f"Error: every line was quarantined (1 of 1); first: {otlp}:2: line is "
           "longer than 4,096 bytes, the limit on one line; write large payloads "
           "elsewhere and reference them, or raise it with AUDITOR_MAX_LINE_BYTES=N "
           "(or Limits(max_line_bytes=N) in Python)")


def test_a_bad_limit_setting_is_an_error():
    env = {**os.environ, "AUDITOR_MAX_RATIO": "lots"}
    p = subprocess.run([sys.executable, "-m", "auditor", "audit", "fixtures/seed_split_brain.jsonl"], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stderr) == (2, "Error: AUDITOR_MAX_RATIO='lots': expected a positive whole number, "
                                           "optionally with a unit (K, M, G: powers of 1024)\n")


def test_endless_standard_input_is_bounded(tmp_path):
    """``auditor audit - < /dev/zero``: refused at the input limit, the spool never past one line."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "AUDITOR_MAX_INPUT_BYTES": "64M"}
    with open("/dev/zero", "rb") as zero:
        p = subprocess.run([sys.executable, "-m", "auditor", "audit", "-"], cwd=ROOT, stdin=zero, env=env,
                           capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stderr) == (2, "Error: <stdin>: more than 67,108,864 bytes, the limit on one input; "
                                           "write it to a file first, or raise it with AUDITOR_MAX_INPUT_BYTES=N "
                                           "(or Limits(max_input_bytes=N) in Python)\n")
    assert list(tmp_path.iterdir()) == []


def test_standard_input_keeps_only_the_start_of_a_long_line(tmp_path):
    body = (ACQ + "q" * (3 << 20) + "\n" + STALE).encode()
    env = {**os.environ, "AUDITOR_MAX_LINE_BYTES": "1M"}
    p = subprocess.run([sys.executable, "-m", "auditor", "audit", "-", "--json", "-"], cwd=ROOT, input=body,
                       env=env, capture_output=True, timeout=120)
    inp = json.loads(p.stdout)["input"]
    assert (inp["lines_read"], inp["events"], inp["quarantined"]) == (3, 2, 1)
    assert inp["quarantine"][0]["line"] == 2 and "longer than 1,048,576 bytes" in inp["quarantine"][0]["reason"]


def test_limit_errors_are_auditor_errors():
    assert issubclass(LimitExceeded, AuditorError)
