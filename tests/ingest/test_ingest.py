"""Reading and normalizing: formats, compression, aliases, quarantine reasons, accounting."""

from __future__ import annotations

import gzip
import json

import polars as pl
import pytest
import zstandard

from auditor import audit
from auditor.core.model import Kind

from ..conftest import FIXTURES, triples

SEED = FIXTURES / "seed_split_brain.jsonl"
SEED_TRIPLES = [("stale_activity", "ledger/export/2026-07-26", 6),
                ("stale_attempt", "ledger/export/2026-07-26", 7),
                ("stale_commit", "ledger/export/2026-07-26", 8),
                ("double_commit", "ledger/export/2026-07-26", 9)]


def _seed_frame() -> pl.DataFrame:
    rows = [json.loads(line) for line in SEED.read_text().splitlines()]
    for r in rows:
        r.pop("attrs", None)
    return pl.DataFrame(rows)


@pytest.mark.parametrize("name, write", [
    ("seed.jsonl", lambda p: p.write_bytes(SEED.read_bytes())),
    ("seed.jsonl.gz", lambda p: p.write_bytes(gzip.compress(SEED.read_bytes()))),
    ("seed.jsonl.zst", lambda p: p.write_bytes(zstandard.ZstdCompressor().compress(SEED.read_bytes()))),
    ("seed.csv", lambda p: _seed_frame().write_csv(p)),
    ("seed.csv.gz", lambda p: p.write_bytes(gzip.compress(_seed_frame().write_csv().encode()))),
    ("seed.parquet", lambda p: _seed_frame().write_parquet(p)),
    ("seed.bin", lambda p: p.write_bytes(zstandard.ZstdCompressor().compress(SEED.read_bytes()))),
])
def test_every_format_gives_the_seed_findings(tmp_path, name, write):
    path = tmp_path / name
    write(path)
    r = audit([path])
    assert triples(r) == SEED_TRIPLES
    assert (r.input.lines_read, r.input.events, r.input.duplicates, r.input.quarantined) == (16, 16, 0, 0)


def test_directory_reads_every_supported_file_below(tmp_path):
    (tmp_path / "a").mkdir()
    lines = SEED.read_text().splitlines(keepends=True)
    (tmp_path / "a" / "first.jsonl").write_text("".join(lines[:8]))
    (tmp_path / "second.jsonl.gz").write_bytes(gzip.compress("".join(lines[8:]).encode()))
    (tmp_path / "notes.txt").write_text("not an event log")
    r = audit([tmp_path])
    assert triples(r) == SEED_TRIPLES
    assert r.input.files == [str(tmp_path / "a" / "first.jsonl"), str(tmp_path / "second.jsonl.gz")]


def test_quarantine_reasons_name_the_line_and_the_fix(tmp_path):
    lines = [
        '{"seq": 1, "workflow_key": "k", "kind": "lease_acquired", "epoch": 1}',
        "",
        "not json",
        '{"seq": 2, "workflow_key": "k", "kind": "progress", "epoch": "seventeen"}',
        '{"seq": 3, "workflow_key": "k", "kind": "progress", "epoch": -1}',
        '{"seq": 4, "workflow_key": "k", "kind": "progress", "epoch": 99999999999999999999}',
        '{"seq": 5, "workflow_key": "k", "kind": "teleport", "epoch": 1}',
        '{"seq": 6, "kind": "progress", "epoch": 1}',
        '{"seq": 7, "workflow_key": "k", "kind": "effect_committed", "epoch": 1}',
        '{"seq": 8.5, "workflow_key": "k", "kind": "progress", "epoch": 1}',
        '[1, 2]',
        '{"seq": 9, "workflow_key": "k", "kind": "progress"}',
        '{"seq": "10", "workflow_key": "k", "kind": "progress", "epoch": "1"}',
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    r = audit([path], fail_on="double_commit")
    assert [(q.line, q.reason) for q in r.input.quarantine] == [
        (3, "line is not valid JSON; write one JSON object per line"),
        (4, '"epoch" is "seventeen", expected an integer in int64 range'),
        (5, '"epoch" is -1, expected an integer >= 0'),
        (6, '"epoch" is "99999999999999999999", expected an integer in int64 range'),
        (7, '"kind" is "teleport", not a kind the auditor knows; map it with --map FILE '
            '([kinds] teleport = "progress")'),
        (8, '"workflow_key" is missing; add the unit that must have one effect owner (or job_id / run_id)'),
        (9, '"effect_key" is missing; every effect_committed needs the effect key it concerns'),
        (10, '"seq" is "8.5", expected an integer in int64 range'),
        (11, "line is JSON but not an object; write one JSON object per line"),
        (12, '"epoch" is missing; every progress needs the owner epoch it was produced under'),
    ]
    assert all(q.file == str(path) for q in r.input.quarantine)
    frame = r.quarantine_frame()
    assert frame["line"].to_list() == [q.line for q in r.input.quarantine]
    assert frame["reason"].to_list() == [q.reason for q in r.input.quarantine]
    # blank line 2 is not counted; 13 non-blank lines = 2 events + 0 duplicates + 10 quarantined
    assert (r.input.lines_read, r.input.events, r.input.duplicates, r.input.quarantined) == (12, 2, 0, 10)


def test_aliases_normalize_to_canonical_events(tmp_path):
    r = audit([FIXTURES / "job_log_aliases.jsonl"])
    events = r.timeline("job-7781")
    assert [(e.seq, e.kind, e.epoch, e.worker, e.effect_key, e.sink_result and e.sink_result.value)
            for e in events] == [
        (1, Kind.LEASE_ACQUIRED, 7, "W1", None, None),
        (2, Kind.PROGRESS, 7, "W1", None, None),
        (3, Kind.LEASE_ACQUIRED, 8, "W2", None, None),
        (4, Kind.EFFECT_ATTEMPTED, 7, "W1", "tool:job-7781:render", None),
        (5, Kind.EFFECT_ATTEMPTED, 7, "W1", "tool:job-7781:render", "rejected"),
        (6, Kind.PROGRESS, 7, "W1", None, None),
        (7, Kind.EFFECT_COMMITTED, 8, "W2", "tool:job-7781:render", None),
    ]


def test_exact_duplicates_collapse_and_are_counted(tmp_path):
    text = SEED.read_text()
    path = tmp_path / "twice.jsonl"
    path.write_text(text + text.splitlines(keepends=True)[7])
    r = audit([path])
    assert (r.input.lines_read, r.input.events, r.input.duplicates) == (17, 16, 1)
    assert triples(r) == SEED_TRIPLES


def test_crlf_bom_and_missing_final_newline(tmp_path):
    text = SEED.read_text().rstrip("\n").replace("\n", "\r\n")
    path = tmp_path / "windows.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    r = audit([path])
    assert triples(r) == SEED_TRIPLES
    assert r.input.lines_read == 16


def test_payloads_are_hashed_not_stored(tmp_path):
    line = {"seq": 1, "workflow_key": "k", "kind": "lease_acquired", "epoch": 1,
            "prompt": "TOP SECRET PROMPT", "attrs": {"body": {"card": "4111"}, "rows": 3}}
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(line) + "\n")
    r = audit([path])
    (event,) = r.timeline("k")
    assert event.attrs["rows"] == 3
    assert event.attrs["prompt"].startswith("sha256:") and event.attrs["body"].startswith("sha256:")
    dump = r.store.con.execute("SELECT string_agg(attrs, '') FROM events").fetchone()[0]
    assert "TOP SECRET" not in dump and "4111" not in dump
    kept = audit([path], keep_payloads=True)
    assert kept.timeline("k")[0].attrs["prompt"] == "TOP SECRET PROMPT"


@pytest.mark.slow
def test_chunks_appended_together_or_apart_store_the_same(tmp_path, monkeypatch):
    """A big file is staged in chunks and appended a few chunks at a time (store.appending.APPEND_ROWS):
    how the chunks are grouped changes nothing, duplicates across chunks and bad lines included."""
    import functools
    import io

    import auditor.ingest.jsonl as jsonl
    import auditor.store.feed as ingest
    import auditor.store as store
    from auditor.render.json import write_json

    lines = []
    for path in sorted(FIXTURES.glob("*.jsonl")):
        if not path.name.startswith("otlp_"):
            lines += path.read_text().splitlines()
    lines += ["{not json", '{"seq": "x"}', lines[3]]  # two quarantined lines and a duplicate
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines * 40) + "\n")
    assert path.stat().st_size > ingest.SMALL_FILE  # read as one big source, in chunks

    def document() -> tuple[str, tuple[int, int, int, int]]:
        with audit([path]) as r:
            out = io.StringIO()
            write_json(r, out)
            return out.getvalue(), (r.input.lines_read, r.input.events, r.input.duplicates, r.input.quarantined)

    whole = document()
    monkeypatch.setattr(jsonl, "jsonl_chunks", functools.partial(jsonl.jsonl_chunks, chunk_bytes=64 << 10))
    monkeypatch.setattr(store.appending, "APPEND_ROWS", 700)
    apart = document()
    read, events, duplicates, quarantined = whole[1]
    assert apart[1] == whole[1]
    assert read == len(lines) * 40 == events + duplicates + quarantined
    assert quarantined % 40 == 0 and quarantined >= 80 and duplicates >= 39 * (len(lines) - quarantined // 40)
    assert apart[0] == whole[0]


def test_read_ahead_hands_over_every_chunk_then_the_error_then_stops():
    """A big file's chunks are read in a thread (jsonl.read_ahead): every chunk in order, an
    error where the chunk would have been, and a caller stopping early closes the reader."""
    import threading

    from auditor.ingest.jsonl import read_ahead

    assert list(read_ahead(iter(range(5)))) == [0, 1, 2, 3, 4]

    def failing():
        yield "a"
        yield "b"
        raise ValueError("the stream is damaged at line 3")

    got = []
    with pytest.raises(ValueError, match="line 3"):
        for chunk in read_ahead(failing()):
            got.append(chunk)
    assert got == ["a", "b"]

    closed = threading.Event()

    def endless():
        try:
            n = 0
            while True:
                n += 1
                yield n
        finally:
            closed.set()

    inner = endless()  # held here: only read_ahead's own close() can close it
    chunks = read_ahead(inner)
    assert [next(chunks), next(chunks)] == [1, 2]
    chunks.close()  # what a failed ingest does to the generator it was reading
    assert closed.wait(5)
    assert not any(t.name == "auditor-read-ahead" for t in threading.enumerate())


def test_a_big_gzip_cut_short_keeps_the_lines_before_the_cut(tmp_path):
    import random

    rng = random.Random(7)  # random tokens: the file must stay over a megabyte compressed
    n = 100_000
    body = "".join(json.dumps({"seq": i, "workflow_key": f"k-{i % 97}", "kind": "progress", "epoch": 1,
                               "worker": "w", "step_id": rng.randbytes(12).hex()}) + "\n"
                   for i in range(1, n + 1)).encode()
    packed = gzip.compress(body)
    path = tmp_path / "big.jsonl.gz"
    path.write_bytes(packed[: len(packed) * 3 // 4])
    assert path.stat().st_size > 1 << 20  # read in chunks, ahead of the store
    with audit([path]) as r:
        assert r.input.quarantined == 1
        assert r.input.lines_read == r.input.events + 1
        assert n // 2 < r.input.events < n
        assert "cut short" in r.input.quarantine[0].reason
        assert r.input.quarantine[0].line == r.input.events + 1


def test_a_store_that_fails_mid_file_stops_the_reader_at_once(tmp_path, monkeypatch):
    """When the store fails after some chunks, read_source closes the chunks it was reading:
    the read-ahead thread ends and the file is closed before the error reaches the caller."""
    import functools
    import threading

    import auditor.ingest.jsonl as jsonl
    import auditor.store.feed as ingest
    import auditor.store as store
    from auditor.core.errors import StoreError
    from auditor.ingest.sources import discover

    lines = SEED.read_text().splitlines()
    path = tmp_path / "big.jsonl"
    path.write_text("\n".join(lines * 6000) + "\n")
    monkeypatch.setattr(jsonl, "jsonl_chunks", functools.partial(jsonl.jsonl_chunks, chunk_bytes=64 << 10))
    monkeypatch.setattr(store.appending, "APPEND_ROWS", 1)
    appended = []

    def failing_stage(self, held, typed_chunk, source_id, position_base=None):
        appended.append(len(held))
        if len(appended) == 3:
            raise StoreError("the disk is full")
        held.clear()
        return 0

    monkeypatch.setattr(store.Store, "_stage", failing_stage)
    with store.Store(None) as s, pytest.raises(StoreError, match="disk is full") as caught:
        ingest.read_source(s, discover([path])[0])
    assert len(appended) == 3
    # caught holds the traceback, and so the frames that hold the chunks: the reader is stopped
    # by read_source itself, not by the garbage collector some time later
    assert caught.tb is not None
    assert not any(t.name == "auditor-read-ahead" for t in threading.enumerate())


def test_the_attrs_memory_lasts_one_ingest(tmp_path, monkeypatch):
    """The attrs function remembers the attrs it decoded (raw text: payloads before hashing)
    for the ingest that read them, no longer."""
    import auditor.store as store
    import auditor.store.setup as setup
    from auditor.store.setup import _ATTRS_SEEN

    seen, decoded = [], []
    real, real_udf = store.forget_attrs, setup.attrs_udf

    def forget():
        seen.append(len(_ATTRS_SEEN))
        real()

    def udf(line, keep):
        decoded.append(line)
        return real_udf(line, keep)

    monkeypatch.setattr(store, "forget_attrs", forget)
    monkeypatch.setattr(setup, "attrs_udf", udf)
    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"seq": i, "workflow_key": "k", "kind": "progress", "epoch": 1,
                                        "worker": "w", "attrs": {"prompt": f"secret {i % 3}"}}) + "\n"
                            for i in range(1, 3001)))
    with audit([path]) as r:
        assert r.input.events == 3000
    assert seen and seen[0] == 3  # three distinct attrs, remembered
    assert len(decoded) == 3 == len(set(decoded))  # and decoded once each, for 3,000 lines
    assert not _ATTRS_SEEN


@pytest.mark.parametrize("keep", ["never", "always", "alternating"])
@pytest.mark.parametrize("rows", [10, 3001])  # a small vector, and one big enough for pc.unique
def test_attrs_batch_gives_what_attrs_udf_gives_row_by_row(keep, rows):
    import pyarrow as pa

    from auditor.store.setup import attrs_batch, attrs_udf, forget_attrs

    values = [None if i % 5 == 0 else '{"attrs":{"prompt":"secret","n":%d}}' % (i % 7) for i in range(rows - 1)]
    values.append('{"attrs":{"a":"' + "y" * 600 + '"}}')  # past what the memory holds
    keeps = [keep == "always" or (keep == "alternating" and i % 2 == 1) for i in range(rows)]
    got = attrs_batch(pa.array(values, pa.string()), pa.array(keeps)).to_pylist()
    forget_attrs()
    assert got == [None if v is None else attrs_udf(v, k) for v, k in zip(values, keeps)]
    hashed = [g for g, k in zip(got, keeps) if g is not None and not k and "prompt" in g]
    assert all("secret" not in g and "sha256:" in g for g in hashed)
    assert bool(hashed) == (keep != "always")


def test_rejected_lines_leave_the_events_table_for_the_quarantine(tmp_path, monkeypatch):
    """A rejected line is staged into the events table (an empty kind, its reason in reason) and
    moved to the quarantine before the transaction ends: a batch of small files (ingest_many,
    counted per source) and the same lines read as one big file in chunks (ingest) keep the
    same events, quarantine the same lines with the same reasons, and leave no marked row."""
    import functools

    import auditor.ingest.jsonl as jsonl
    import auditor.store.feed as ingest
    import auditor.store as store
    from auditor.ingest.sources import discover

    good = SEED.read_text().splitlines()
    bad = ["{not json", '{"seq": "x"}', '{"seq": 3, "workflow_key": "k", "kind": "no_such_kind", "epoch": 1}',
           "[1, 2]", '{"seq": 4, "workflow_key": "", "kind": "progress", "epoch": 1, "worker": "w"}']
    small = [tmp_path / "a.jsonl", tmp_path / "b.jsonl"]
    small[0].write_text("\n".join(good[:5] + bad[:2] + good[5:]) + "\n")
    small[1].write_text("\n".join(bad[2:] + ["", "   "] + good[:3]) + "\n")  # blank lines are not counted

    def stored(s: store.Store) -> tuple:
        events = s.con.execute("SELECT event_id, workflow_key, kind, seq, line FROM events ORDER BY obs").fetchall()
        quarantine = s.con.execute("SELECT source_id, line, reason FROM quarantine ORDER BY ALL").fetchall()
        ((marked,),) = s.con.execute("SELECT count(*) FROM events WHERE kind = ''").fetchall()
        sources = s.con.execute("SELECT lines_read, events, duplicates, quarantined FROM sources ORDER BY source_id").fetchall()
        return events, quarantine, marked, sources

    with store.Store(None) as s:
        counts = ingest.read_sources(s, discover(small))
        batch = stored(s)
    assert [(c.lines_read, c.events, c.duplicates, c.quarantined) for c in counts] == [
        (len(good) + 2, len(good), 0, 2), (3 + 3, 0, 3, 3)] == batch[3]
    assert batch[2] == 0 and len(batch[1]) == 5 and len(batch[0]) == len(good)

    monkeypatch.setattr(ingest, "SMALL_FILE", 0)  # each file read as a big one, in chunks
    monkeypatch.setattr(jsonl, "jsonl_chunks", functools.partial(jsonl.jsonl_chunks, chunk_bytes=256))
    monkeypatch.setattr(store.appending, "APPEND_ROWS", 4)
    with store.Store(None) as s:
        ingest.read_sources(s, discover(small))
        apart = stored(s)
    assert apart == batch
