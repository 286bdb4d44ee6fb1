"""SPEC revision 3.1, item 4 of issue 42: a file whose suffix names no format is decided by its
first non-blank line, and in a logfmt file a line that starts with ``{`` is one JSON record."""

from __future__ import annotations

import pytest

from auditor import audit
from auditor.ingest import detect_format
from auditor.ingest.sources import discover
from auditor.core.limits import Limits

from ..conftest import FIXTURES

MIXED = FIXTURES / "logfmt_with_a_json_line.log"
MAP = FIXTURES / "logfmt_with_a_json_line.map.toml"


@pytest.mark.parametrize("name", ["mixed.log", "mixed.txt", "mixed"])
def test_a_logfmt_file_with_a_json_line_is_logfmt_and_reads_it(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(MIXED.read_bytes())
    (source,) = discover([path], Limits.from_env(), [])
    assert detect_format(source) == "logfmt"
    with audit([path], vocabulary=MAP) as r:
        assert (r.input.lines_read, r.input.events, r.input.quarantined) == (4, 4, 0)
        assert [(f.grade.value, f.seq, f.line) for f in r.findings] == [("stale_commit", 3, 3), ("stale_commit", 4, 4)]


def test_a_file_whose_first_line_is_json_stays_jsonl(tmp_path):
    lines = MIXED.read_text().splitlines()
    path = tmp_path / "json_first.log"
    path.write_text("\n".join([lines[2], *lines[:2], lines[3]]) + "\n")
    (source,) = discover([path], Limits.from_env(), [])
    assert detect_format(source) == "jsonl"
