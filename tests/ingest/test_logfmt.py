"""logfmt as an input format (SPEC section 2): quoted values with escapes, bare keys, keys given
twice, lines that do not parse, detection by content (also in a .log file, gzip and zstd)."""

from __future__ import annotations

import gzip

import pytest

from auditor import audit
from auditor.ingest import Source, detect_format
from auditor.ingest.logfmt import LogfmtError, looks_like_logfmt, parse

from ..conftest import FIXTURES, run_cli

VOCAB = '[fields]\nmsg = "kind"\nrev = "seq"\ntime = "ts"\n[kinds]\n"claimed job" = "lease_acquired"\n' \
        '"charge committed" = "effect_committed"\n'


@pytest.mark.parametrize("line, pairs", [
    ('time=2026-07-26T10:00:01Z level=info msg="claimed job" job=J-7 token=7 rev=1042',
     [("time", "2026-07-26T10:00:01Z"), ("level", "info"), ("msg", "claimed job"), ("job", "J-7"),
      ("token", "7"), ("rev", "1042")]),
    (r'k="a \"quoted\" \\ back\nslash\t\u00e9 \x41"', [("k", 'a "quoted" \\ back\nslash\t\u00e9 A')]),
    ("debug flag= x=1", [("debug", ""), ("flag", ""), ("x", "1")]),
    ("a=1 a=2", [("a", "1"), ("a", "2")]),
    ("  spaced=out   x=y  ", [("spaced", "out"), ("x", "y")]),
    ("lease.token=7 labels.job=J", [("lease.token", "7"), ("labels.job", "J")]),
])
def test_pairs(line, pairs):
    assert parse(line) == pairs


@pytest.mark.parametrize("line, error", [
    ('msg="claimed job', 'an unterminated quoted value at column 5'),
    ("url=http://x?a=b", "'=' inside an unquoted value at column 15"),
    ('k="x"y', "'y' right after a quoted value at column 6"),
    ("=1", "'=' at column 1"),
    ('k="bad \\q escape"', None),
])
def test_lines_that_do_not_parse_say_what_and_where(line, error):
    with pytest.raises(LogfmtError) as e:
        parse(line)
    if error is not None:
        assert str(e.value) == (f"line is not logfmt (key=value pairs): {error}; quote values that hold spaces, "
                                '= or " ("like this")')
    else:
        assert "has an escape logfmt does not know" in str(e.value)


def test_detected_by_content_not_json_and_key_value_pairs():
    assert looks_like_logfmt(b'time=1 msg=x\n\nlevel=info msg="a b"\n')
    assert looks_like_logfmt(b"a=1\nbroken=\"\nb=2\n")  # one bad line among them: quarantined later
    assert not looks_like_logfmt(b'{"msg": "x=1"}\n')
    assert not looks_like_logfmt(b"seq,workflow_key,kind\n1,k,progress\n")
    assert not looks_like_logfmt(b"hello world\n")
    assert not looks_like_logfmt(b"")


@pytest.mark.parametrize("name, compress", [("app.log", None), ("app", None), ("app.logfmt.gz", gzip.compress),
                                            ("app.log.zst", "zstd")])
def test_a_logfmt_file_is_read_whatever_its_name_and_compression(tmp_path, name, compress):
    text = (FIXTURES / "logfmt_quoted_and_escaped_values.logfmt").read_bytes()
    if compress == "zstd":
        import zstandard

        data = zstandard.ZstdCompressor().compress(text)
    else:
        data = compress(text) if compress else text
    path = tmp_path / name
    path.write_bytes(data)
    assert detect_format(Source(name, path, len(data))) == "logfmt"
    with audit([path], vocabulary=FIXTURES / "logfmt_quoted_and_escaped_values.map.toml") as got, \
            audit([FIXTURES / "logfmt_quoted_and_escaped_values_canonical.jsonl"]) as want:
        assert [(f.grade, f.workflow_key, f.seq, f.effect_key, f.line) for f in got.findings] == \
            [(f.grade, f.workflow_key, f.seq, f.effect_key, f.line) for f in want.findings]
        assert got.findings[0].effect_key == 'charge "run-17" step 3'  # escapes read back exactly


def test_quarantine_names_the_line_a_bare_key_is_absent_and_a_key_twice_disagreeing_is_ambiguous(tmp_path):
    path = tmp_path / "app.log"
    path.write_text('time=2026-07-26T10:00:01Z msg="claimed job" job=J token=7 rev=1 worker=\n'
                    "\n"
                    'msg="claimed job broken\n'
                    'time=2026-07-26T10:00:03Z msg="charge committed" job=J token=7 token=8 rev=3 idempotency_key=e\n'
                    'time=2026-07-26T10:00:04Z msg="charge committed" job=J token=7 token=7 rev=4 idempotency_key=e\n')
    vocabulary = tmp_path / "v.toml"
    vocabulary.write_text(VOCAB)
    with audit([path], vocabulary=vocabulary, allow_quarantined=5) as got:
        assert (got.input.lines_read, got.input.events, got.input.quarantined) == (4, 2, 2)
        assert [(q.line, q.reason) for q in got.input.quarantine] == [
            (3, 'line is not logfmt (key=value pairs): an unterminated quoted value at column 5; quote values that '
                'hold spaces, = or " ("like this")'),
            (4, '"epoch" is given twice with different values ("token": "7" and "token": "8"); the line is '
                "ambiguous, keep one of them")]
        assert got.store.events_of("J")[0].worker == "unknown"  # worker= is absent


def test_format_logfmt_on_the_command_line(tmp_path):
    path = tmp_path / "events.txt"
    path.write_text('msg="claimed job" job=J token=1 rev=1\n')
    vocabulary = tmp_path / "v.toml"
    vocabulary.write_text(VOCAB)
    done = run_cli("audit", str(path), "--format", "logfmt", "--map", str(vocabulary))
    assert done.returncode == 0, done.stderr
    assert b"1 lines read = 1 events + 0 duplicates + 0 quarantined" in done.stdout
