"""A JSON-lines file cut into line-aligned pieces (issue 46): the pieces' lines, read each on its
own as a Spark task reads them, are the whole file's lines with the same physical numbers."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from auditor.ingest import Source
from auditor.ingest.jsonl import jsonl_chunks
from auditor.spark.inputs import _spans
from auditor.spark.inputs import newline_census
from auditor.spark.tasks import _unreadable, normalize_files

from ..conftest import FIXTURES

CORPUS = FIXTURES.parent / "tests" / "corpus"


def lines(path: Path, span=None) -> list[tuple[int, bytes, str | None]]:
    source = Source(str(path), path, path.stat().st_size)
    return [(line, raw, bad) for t in jsonl_chunks(source, span=span, chunk_bytes=64)
            for line, raw, bad in zip(t.column("line").to_pylist(), t.column("raw").to_pylist(),
                                      t.column("bad").to_pylist())]


def pieces(path: Path, size: int) -> list[tuple[int, int, int]]:
    total = path.stat().st_size
    census = [newline_census((1, str(path), at, min(at + size, total)))[1:] for at in range(0, total, size)]
    return _spans(census, total)


def messy(path: Path, seed: int) -> Path:
    """Lines of many lengths: a BOM, CRLF and LF, blank lines, a lone CR inside a line, a line
    longer than a piece, no newline at the end."""
    rng = random.Random(seed)
    out = [b"\xef\xbb\xbf" + b'{"n": 0}\r\n']
    for n in range(1, 300):
        body = b'{"n": %d, "pad": "%s"}' % (n, b"x" * rng.choice((0, 1, 5, 40, 300)))
        out.append(rng.choice((b"", b"\n", b"\r\n")) + body + rng.choice((b"\n", b"\r\n", b"\r\r\n")))
    out.append(b'{"last": "no newline"}')
    path.write_bytes(b"".join(out))
    return path


@pytest.mark.parametrize("size", [1, 7, 64, 100, 1000, 1 << 20])
@pytest.mark.parametrize("seed", [1, 2])
def test_pieces_read_alone_are_the_whole_files_lines(tmp_path, size, seed):
    path = messy(tmp_path / "messy.jsonl", seed)
    spans = pieces(path, size)
    assert spans[0][:1] == (0,) and spans[-1][1] == path.stat().st_size
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))  # contiguous, each at a line start
    assert all(path.read_bytes()[s - 1:s] == b"\n" for s, _e, _l in spans[1:])
    assert [x for span in spans for x in lines(path, span)] == lines(path)
    if size < 100:
        assert len(spans) > 20


@pytest.mark.parametrize("path", sorted(p for p in list(FIXTURES.glob("*.jsonl")) + list(CORPUS.glob("*.jsonl"))),
                         ids=lambda p: p.name)
def test_every_jsonl_fixture_and_corpus_file_in_pieces_of_97_bytes(path):
    assert [x for span in pieces(path, 97) for x in lines(path, span)] == lines(path)


def test_a_line_longer_than_the_limit_is_quarantined_once_in_its_piece(tmp_path):
    from auditor.core.limits import Limits

    path = tmp_path / "long.jsonl"
    path.write_bytes(b'{"a": 1}\n' + b'{"b": "' + b"y" * 5000 + b'"}\n{"c": 3}\n')
    source = Source(str(path), path, path.stat().st_size, Limits(max_line_bytes=1000))
    got = [(t.column("line").to_pylist(), t.column("bad").to_pylist())
           for span in pieces(path, 300) for t in jsonl_chunks(source, span=span, chunk_bytes=256)]
    flat = [(n, bad is not None) for ls, bads in got for n, bad in zip(ls, bads)]
    assert flat == [(1, False), (2, True), (3, False)]


def test_a_file_an_executor_cannot_see_is_named_with_what_to_do(tmp_path):
    import pyarrow as pa

    from auditor.core.limits import Limits
    from auditor.normalize.vocabulary import vocabulary_of

    gone = tmp_path / "gone.jsonl"
    batch = pa.RecordBatch.from_pylist([{"source_id": 1, "name": "logs/gone.jsonl", "path": str(gone),
                                         "content": None, "start": 0, "end": 10, "first_line": 1}])
    (row,) = [r for b in normalize_files([batch], "auto", False, vocabulary_of(None), Limits())
              for r in b.to_pylist()]
    assert row["tag"] == "x" and row["reason"] == "InputError"
    assert row["message"].startswith("logs/gone.jsonl: no such file on the executor at ")
    assert "every worker must see the input at the same path" in row["message"]
    assert _unreadable("f", PermissionError(13, "Permission denied")).endswith(": Permission denied")
