"""Fuzzing the ingester with hypothesis: whatever bytes arrive, the audit ends cleanly and every
line is accounted for.

The properties, for JSON lines (plain, gzip, zstd, cut short, corrupted), CSV and Parquet:
- the only exception that may leave ``audit()`` is ``NoEvents`` (nothing usable: exit 2), plus
  ``InputError`` for a corrupt compressed stream; anything else is a crash;
- ``lines read = events + duplicates + quarantined``, and ``lines read`` is exactly the number of
  non-blank lines in the bytes (for a cut stream: in the bytes before the cut, plus the cut);
- a line built to be a valid event is never quarantined, whatever surrounds it;
- every quarantined line names its file, a line that exists, and a one-line reason.

``AUDITOR_FUZZ_EXAMPLES`` raises the number of examples per property and ``AUDITOR_FUZZ_SEED``
picks another bulk file (a soak run); ``AUDITOR_FUZZ_TALLY=FILE`` appends one JSON line per example (property, lines) for the figures
in the closing note. Neither prints anything.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import zlib
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from auditor import NoEvents, audit
from auditor.ingest import InputError

from ..conftest import examples

EXAMPLES = int(os.environ.get("AUDITOR_FUZZ_EXAMPLES", examples(30)))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.large_base_example])
KINDS = ["lease_acquired", "progress", "effect_attempted", "effect_committed", "outcome_verified"]

pytestmark = pytest.mark.slow  # real processes and sessions: the end-to-end part of the suite


def _tally(prop: str, lines: int) -> None:
    if path := os.environ.get("AUDITOR_FUZZ_TALLY"):
        with open(path, "a") as f:
            f.write(json.dumps({"property": prop, "lines": lines}) + "\n")


@st.composite
def valid_events(draw) -> dict:
    kind = draw(st.sampled_from(KINDS))
    e = {"seq": draw(st.integers(1, 10_000)), "workflow_key": draw(st.sampled_from(["a", "b/c", "é"])),
         "kind": kind, "worker": draw(st.sampled_from(["w1", "w2"]))}
    if kind != "outcome_verified":
        e["epoch"] = draw(st.integers(0, 2**63 - 1) | st.integers(0, 5))
    if kind in ("effect_attempted", "effect_committed", "outcome_verified"):
        e["effect_key"] = draw(st.sampled_from(["x", "y"]))
    if draw(st.booleans()):
        e["attrs"] = draw(_values(st.characters(blacklist_categories=("Cs",))))
    return e


def _values(chars: st.SearchStrategy[str]) -> st.SearchStrategy:
    text = st.text(chars, max_size=30)
    scalars = (st.none() | st.booleans() | st.integers() | st.floats() | text
               | st.sampled_from(["\x1b[31m", "<script>", "NaN", "Infinity", "-0", "1e999", " 7 ", "",
                                  "9223372036854775808", "-1", "\ufeff", "\u2028", "{}"]))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(text | st.sampled_from(["prompt", "seq", "attrs"]), inner,
                                          max_size=4), max_leaves=12)


json_values = _values(st.characters(blacklist_categories=()))  # lone surrogates included
FIELDS = ["seq", "workflow_key", "kind", "epoch", "worker", "effect_key", "sink_result", "reporter",
          "ts", "event_id", "attrs", "token", "job_id", "prompt"]


@st.composite
def hostile_lines(draw) -> tuple[bytes, bool]:
    """One line's bytes (possibly holding newlines of its own) and whether it is a valid event."""
    choice = draw(st.integers(0, 6))
    if choice <= 1:  # a valid event, dressed up in ways the reader must see through
        text = json.dumps(draw(valid_events()), ensure_ascii=draw(st.booleans()))
        pad = draw(st.sampled_from(["", " ", "\t", "\ufeff", "\ufeff ", "  \t"]))
        return (pad + text + draw(st.sampled_from(["", " ", "\r", "\t"]))).encode("utf-8"), True
    if choice == 2:  # a valid event with one field made hostile
        e = draw(valid_events())
        e[draw(st.sampled_from(FIELDS))] = draw(json_values)
        return json.dumps(e).encode("utf-8", "surrogatepass"), False
    if choice == 3:  # JSON-ish text: non-standard numbers, nesting, truncation, trailing junk
        base = json.dumps(draw(valid_events()))
        return draw(st.sampled_from([
            base[: draw(st.integers(0, len(base)))],
            base.replace('"epoch": ', '"epoch": NaN, "x": ', 1),
            base.replace('"seq": ', '"seq": -', 1),
            base + draw(st.sampled_from([",", "}", " {}", "\x00", "\x1b[0m"])),
            "[" * draw(st.integers(1, 5000)),
            '{"attrs": ' + "{\"a\": " * draw(st.integers(1, 3000)) + "1",
        ])).encode("utf-8", "surrogatepass"), False
    if choice == 4:
        return draw(st.binary(max_size=120)), False
    if choice == 5:  # invalid UTF-8 inside an otherwise valid event
        text = json.dumps(draw(valid_events()))
        cut = draw(st.integers(1, len(text) - 1))
        junk = draw(st.sampled_from([b"\xff", b"\xc0\xaf", b"\x80", b"\xe2\x82", b"\xed\xa0\x80"]))
        return text[:cut].encode() + junk + text[cut:].encode(), False
    return draw(st.sampled_from([b"", b" ", b"\t", b"\r", b"\xef\xbb\xbf", b"\x0b", b"\x00"])), False


@st.composite
def hostile_files(draw) -> tuple[bytes, set[int]]:
    """The bytes of a JSON-lines file and the line numbers that hold valid events."""
    items = draw(st.lists(hostile_lines(), max_size=40))
    if items and draw(st.booleans()):  # exact duplicates of earlier lines
        items += draw(st.lists(st.sampled_from(items), max_size=4))
    data, valid, line = b"", set(), 1
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf"
    for raw, ok in items:
        if ok:
            valid.add(line)
        data += raw + draw(st.sampled_from([b"\n", b"\r\n"]))
        line += (raw + b"\n").count(b"\n")
    if data.endswith(b"\n") and draw(st.booleans()):
        data = data[:-1].rstrip(b"\r")  # no final newline
    return data, valid


def _nonblank(data: bytes) -> int:
    """Lines a person would call lines: not empty after whitespace and byte-order marks."""
    pieces = data.split(b"\n")
    if pieces and pieces[-1] == b"":
        pieces.pop()
    n = 0
    for piece in pieces:
        try:
            text = piece.decode("utf-8")
        except UnicodeDecodeError:
            n += 1
            continue
        n += text.strip(" \t\r\n").lstrip("\ufeff") != ""
    return n


def _audit(data: bytes, name: str):
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / name
        path.write_bytes(data)
        try:
            r = audit([path], fail_on="double_commit")
        except NoEvents:
            return path, None
        inp = r.input
        assert inp.lines_read == inp.events + inp.duplicates + inp.quarantined
        (stored,) = r.store.con.execute("SELECT count(*) FROM events").fetchone()
        quarantined = dict(r.store.con.execute("SELECT line, reason FROM quarantine ORDER BY line").fetchall())
        assert (stored, len(quarantined)) == (inp.events, inp.quarantined)
        assert all(reason and "\n" not in reason for reason in quarantined.values())
        assert all(q.file == str(path) for q in inp.quarantine)
        r.store.close()
        return path, (inp, quarantined)


@FUZZ
@given(hostile_files(), st.sampled_from(["plain", "gzip", "zstd"]))
def test_any_bytes_are_accounted_for(file, compression):
    data, valid = file
    _tally("jsonl", data.count(b"\n") + 1)
    packed = {"plain": lambda b: b, "gzip": gzip.compress,
              "zstd": zstandard.ZstdCompressor().compress}[compression](data)
    _, got = _audit(packed, "fuzz.jsonl" + {"plain": "", "gzip": ".gz", "zstd": ".zst"}[compression])
    if got is None:
        assert not valid
        return
    inp, quarantined = got
    assert inp.lines_read == _nonblank(data)
    assert not set(quarantined) & valid, {line: quarantined[line] for line in set(quarantined) & valid}
    assert all(1 <= q <= data.count(b"\n") + 1 for q in quarantined)


def _decodable(packed: bytes, compression: str) -> bytes:
    """What a stream cut short still yields, member after member, by the libraries' own decoders."""
    def decoder():
        if compression == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        return zstandard.ZstdDecompressor().decompressobj()

    out = b""
    while packed:
        d = decoder()
        out += d.decompress(packed)
        if not d.eof:
            break
        packed = d.unused_data
    return out


@FUZZ
@given(hostile_files(), st.sampled_from(["gzip", "zstd"]), st.integers(0, 3), st.data())
def test_a_stream_cut_short_keeps_the_lines_before_the_cut(file, compression, frames, data_):
    data, valid = file
    pack = gzip.compress if compression == "gzip" else zstandard.ZstdCompressor().compress
    parts = [data[i * len(data) // (frames + 1):(i + 1) * len(data) // (frames + 1)]
             for i in range(frames + 1)]
    packed = [pack(p) for p in parts]  # several members or frames, as appended logs are
    ends = {sum(len(p) for p in packed[:i + 1]) for i in range(len(packed))}
    packed = b"".join(packed)
    cut = data_.draw(st.integers(1, len(packed) - 1))
    assume(cut not in ends)  # a cut between two members is a shorter valid file: nothing to see
    _tally("cut", data.count(b"\n") + 1)
    _, got = _audit(packed[:cut], "cut.jsonl" + (".gz" if compression == "gzip" else ".zst"))
    before = _decodable(packed[:cut], compression)
    complete = before[: before.rfind(b"\n") + 1]
    cut_line = complete.count(b"\n") + 1
    if got is None:
        assert not any(line < cut_line for line in valid)
        return
    inp, quarantined = got
    assert inp.lines_read == _nonblank(complete) + 1
    assert max(quarantined) == cut_line
    assert quarantined[cut_line].startswith(f"the {compression} stream is cut short (the file is truncated)")
    assert not set(quarantined) & {line for line in valid if line < cut_line}


@FUZZ
@given(hostile_files(), st.sampled_from(["gzip", "zstd"]), st.data())
def test_a_corrupt_stream_fails_its_file_or_is_accounted_for(file, compression, data_):
    data, _ = file
    _tally("corrupt", data.count(b"\n") + 1)
    packed = bytearray(gzip.compress(data) if compression == "gzip" else
                       zstandard.ZstdCompressor(write_checksum=True).compress(data))
    at = data_.draw(st.integers(0, len(packed) - 1))
    packed[at] ^= data_.draw(st.integers(1, 255))
    try:
        _audit(bytes(packed), "corrupt.jsonl" + (".gz" if compression == "gzip" else ".zst"))
    except InputError as e:
        assert str(e).startswith(f"{tempfile.gettempdir()}") and "nothing from this file was used" in str(e)


_cells = (st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
          | st.sampled_from(["", '"', '""', ",", "\n", "1", "-1", "k", "lease_acquired", "progress",
                             "9223372036854775808", "NaN", "\r\n", " 2 "]))


@FUZZ
@given(st.lists(st.lists(_cells, min_size=0, max_size=7), max_size=25), st.booleans(),
       st.sampled_from([b"", b"\xff", b"\xef\xbb\xbf"]))
def test_any_csv_is_accounted_for(rows, quote, junk):
    _tally("csv", len(rows) + 1)
    header = ["seq", "workflow_key", "kind", "epoch", "worker"]

    def cell(c: str) -> str:
        return '"' + c.replace('"', '""') + '"' if quote else c

    text = ",".join(header) + "\n" + "".join(",".join(cell(c) for c in row) + "\n" for row in rows)
    data = text.encode()
    if rows:
        where = len(data) // 2
        data = data[:where] + junk + data[where:]
    try:
        _audit(data, "fuzz.csv")
    except InputError as e:  # DuckDB cannot even guess the dialect: the file is unreadable (exit 2)
        assert ": cannot read as csv: " in str(e)
        _tally("csv unreadable", 0)


_arrow_columns = st.sampled_from(["int64", "uint64", "float", "string", "binary", "bool", "ts",
                                  "list", "struct", "null", "decimal"])


@FUZZ
@given(st.dictionaries(st.sampled_from(["seq", "workflow_key", "kind", "epoch", "worker",
                                        "effect_key", "attrs", "prompt", "other"]),
                       _arrow_columns, min_size=1, max_size=6),
       st.integers(1, 12), st.randoms(use_true_random=False))
def test_any_parquet_column_types_are_accounted_for(columns, n, rnd):
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    _tally("parquet", n)

    def values(kind: str):
        pick = {
            "int64": lambda: rnd.choice([None, 0, 1, -1, 2**63 - 1, -(2**63), rnd.randint(0, 9)]),
            "uint64": lambda: rnd.choice([None, 0, 2**64 - 1, 2**63, rnd.randint(0, 9)]),
            "float": lambda: rnd.choice([None, 1.0, 2.5, float("nan"), float("inf"), -0.0, 1e300]),
            "string": lambda: rnd.choice([None, "", "k", "lease_acquired", "progress", "\x1b[31m", "1"]),
            "binary": lambda: rnd.choice([None, b"", b"\xff\xfe", b"k", b"1"]),
            "bool": lambda: rnd.choice([None, True, False]),
            "ts": lambda: rnd.choice([None, 0, 2**62]),
            "list": lambda: rnd.choice([None, [], [1, 2]]),
            "struct": lambda: rnd.choice([None, {"prompt": "p", "n": 1}, {"prompt": None, "n": None}]),
            "null": lambda: None,
            "decimal": lambda: rnd.choice([None, decimal.Decimal("1.50"), decimal.Decimal("7")]),
        }[kind]
        vals = [pick() for _ in range(n)]
        if kind == "ts":
            return pa.array(vals, pa.timestamp("us"))
        if kind == "decimal":
            return pa.array(vals, pa.decimal128(20, 2))
        return pa.array(vals, {"int64": pa.int64(), "uint64": pa.uint64(), "float": pa.float64(),
                               "binary": pa.binary()}.get(kind))

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "fuzz.parquet"
        pq.write_table(pa.table({name: values(kind) for name, kind in columns.items()}), path)
        try:
            r = audit([path], fail_on="double_commit")
        except NoEvents:
            return
        inp = r.input
        assert inp.lines_read == n == inp.events + inp.duplicates + inp.quarantined
        r.store.close()


@pytest.mark.parametrize("compression", ["gzip", "zstd"])
def test_cut_in_a_big_stream_reports_the_line_reached(tmp_path, compression):
    """Big enough (67 MB) that the cut falls past the first of the reader's 32 MB chunks."""
    line = b'{"seq": %d, "workflow_key": "k", "kind": "progress", "epoch": 1, "pad": "' + b"p" * 200 + b'"}\n'
    data = b"".join(line % i for i in range(1, 250_001))
    packed = gzip.compress(data, 1) if compression == "gzip" else zstandard.ZstdCompressor(level=1).compress(data)
    cut = packed[: len(packed) * 9 // 10]
    path = tmp_path / f"big.jsonl.{'gz' if compression == 'gzip' else 'zst'}"
    path.write_bytes(cut)
    r = audit([path], fail_on="double_commit")
    complete = _decodable(cut, compression)
    n = complete[: complete.rfind(b"\n") + 1].count(b"\n")
    assert n > 200_000
    assert (r.input.lines_read, r.input.events, r.input.quarantined) == (n + 1, n, 1)
    assert [q.line for q in r.input.quarantine] == [n + 1]


def _bulk_lines(rnd, n: int) -> tuple[bytes, set[int]]:
    """``n`` lines drawn from the same families as ``hostile_lines``, fast enough for volume."""
    junk = [b"\xff", b"\xc0\xaf", b"\x80", b"\xe2\x82", b"\xed\xa0\x80", b"\x00", b"\x1b[31m"]
    hostile = [None, True, -1, 2**63, -(2**63) - 1, 1.5, "NaN", "", " 7 ", "\x1b[0m", [], {}, "\ud800",
               {"prompt": "p"}, "9223372036854775808", 1e300]
    out, valid = [], set()
    for line in range(1, n + 1):
        e = {"seq": rnd.randint(1, 5000), "workflow_key": rnd.choice(["a", "b", "c/d"]),
             "kind": rnd.choice(KINDS), "epoch": rnd.randint(0, 9), "effect_key": rnd.choice("xyz"),
             "worker": rnd.choice(["w1", "w2"])}
        family = rnd.randrange(8)
        if family <= 2:
            out.append(rnd.choice(["", " ", "\ufeff"]).encode() + json.dumps(e).encode()
                       + rnd.choice([b"", b"\r", b" "]))
            valid.add(line)
        elif family == 3:
            e[rnd.choice(FIELDS)] = rnd.choice(hostile)
            out.append(json.dumps(e).encode("utf-8", "surrogatepass"))
        elif family == 4:
            text = json.dumps(e).encode()
            cut = rnd.randrange(len(text))
            out.append(text[:cut] + rnd.choice(junk) + text[cut + rnd.randint(0, 1):])
        elif family == 5:
            out.append(bytes(rnd.randrange(256) for _ in range(rnd.randrange(40))).replace(b"\n", b""))
        elif family == 6:
            out.append(json.dumps(e).replace('"epoch": ', '"epoch": NaN, "e": ', 1).encode())
        else:
            out.append(rnd.choice([b"", b"  ", b"\t", b"\xef\xbb\xbf", b"[1]", b"{}", b"{", b"null"]))
    return b"\n".join(out) + b"\n", valid


@pytest.mark.parametrize("seed", [int(os.environ.get("AUDITOR_FUZZ_SEED", "1"))])
def test_a_hundred_thousand_hostile_lines(seed, tmp_path):
    import random

    data, valid = _bulk_lines(random.Random(seed), 100_000)
    _tally("bulk", 100_000)
    _, (inp, quarantined) = _audit(data, f"bulk{seed}.jsonl")
    assert inp.lines_read == _nonblank(data)
    assert not set(quarantined) & valid
    assert inp.events + inp.duplicates >= len(valid)
