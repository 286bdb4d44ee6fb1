"""Regenerate the hostile-input corpus: ``python tests/corpus/make.py``.

Each file is named after what it shows and is judged by ``tests/test_hostile.py`` against the
``<name>.expected.json`` beside it. Text files are written byte for byte here (so invalid UTF-8,
BOMs and CRLF survive editors); the compressed and Parquet files are derived from them. Big inputs
(a 10 MB line, 100,000-deep nesting) are generated at test time instead, never committed.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def ev(seq, kind="progress", epoch=1, key="k", **extra) -> bytes:
    d = {"seq": seq, "workflow_key": key, "kind": kind}
    if epoch is not None:
        d["epoch"] = epoch
    d.update(extra)
    return json.dumps(d).encode()


ACQ = ev(1, "lease_acquired")


def lines(*items: bytes, end: bytes = b"\n") -> bytes:
    return b"".join(i + end for i in items)


def seed_tail(n: int) -> bytes:
    return lines(*(ev(100 + i) for i in range(n)))


TEXT = {
    "invalid_utf8.jsonl": lines(
        ACQ,
        b'{"seq": 2, "workflow_key": "k\xff", "kind": "progress", "epoch": 1}',
        b'{"seq": 3, "workflow_key": "k", "kind": "progress", "epoch": 1, "note": "\xc0\xaf overlong"}',
        b'{"seq": 4, "workflow_key": "k", "kind": "progress", "epoch": 1, "note": "\x80 lone continuation"}',
        b'{"seq": 5, "workflow_key": "k", "kind": "progress", "epoch": 1, "note": "cut \xe2\x82"}',
        b'{"seq": 6, "workflow_key": "k", "kind": "progress", "epoch": 1, "note": "\xed\xa0\x80 surrogate"}',
        ev(7, note="caf\u00e9 \u2603 fine")),
    "bom_crlf_blank_lines.jsonl": b"\xef\xbb\xbf" + lines(ACQ, b"", b"   \t", ev(2), b"\xef\xbb\xbf" + ev(3), b"\xef\xbb\xbf", ev(4), end=b"\r\n"),
    "cr_only_line_endings.jsonl": lines(ACQ, ev(2), end=b"\r"),
    "no_final_newline_cut_mid_object.jsonl": lines(ACQ, ev(2)) + ev(3)[:25],
    "nan_and_infinity.jsonl": lines(
        ACQ,
        b'{"seq": 2, "workflow_key": "k", "kind": "progress", "epoch": NaN}',
        b'{"seq": Infinity, "workflow_key": "k", "kind": "progress", "epoch": 1}',
        b'{"seq": 4, "workflow_key": "k", "kind": "progress", "epoch": -Infinity}',
        b'{"seq": 5, "workflow_key": "k", "kind": "progress", "epoch": 1, "ratio": NaN, "limit": Infinity}',
        b'{"seq": 6, "workflow_key": "k", "kind": "progress", "epoch": 1e400}',
        b'{"seq": 7, "workflow_key": "k", "kind": "progress", "epoch": "NaN"}'),
    "epochs_beyond_int64_and_negative.jsonl": lines(
        ACQ,
        b'{"seq": 2, "workflow_key": "k", "kind": "progress", "epoch": 9223372036854775807}',
        b'{"seq": 3, "workflow_key": "k", "kind": "progress", "epoch": 9223372036854775808}',
        b'{"seq": 4, "workflow_key": "k", "kind": "progress", "epoch": 18446744073709551616}',
        b'{"seq": 5, "workflow_key": "k", "kind": "progress", "epoch": -1}',
        b'{"seq": 6, "workflow_key": "k", "kind": "progress", "epoch": -9223372036854775809}',
        b'{"seq": 7, "workflow_key": "k", "kind": "progress", "epoch": "-0"}',
        b'{"seq": 8, "workflow_key": "k", "kind": "progress", "epoch": 1.0}',
        b'{"seq": 9, "workflow_key": "k", "kind": "progress", "epoch": 1e3}',
        b'{"seq": 10, "workflow_key": "k", "kind": "progress", "epoch": true}',
        b'{"seq": 11, "workflow_key": "k", "kind": "progress", "epoch": "0x11"}',
        b'{"seq": 12, "workflow_key": "k", "kind": "progress", "epoch": [1]}',
        b'{"seq": 13, "workflow_key": "k", "kind": "progress", "epoch": {"value": 1}}',
        b'{"seq": -9223372036854775808, "workflow_key": "k", "kind": "progress", "epoch": 1}',
        b'{"seq": 9223372036854775808, "workflow_key": "k", "kind": "progress", "epoch": 1}',
        b'{"seq": " 15 ", "workflow_key": "k", "kind": "progress", "epoch": " 1 "}'),
    "duplicate_seqs_and_lines.jsonl": lines(
        ACQ, ev(2), ev(2), ev(2, worker="other"), ev(3, "lease_acquired", 2), ev(3, "lease_acquired", 3),
        ACQ, b'{"seq": 4, "seq": 5, "workflow_key": "k", "kind": "progress", "epoch": 3}'),
    "empty.jsonl": b"",
    "only_blank_lines.jsonl": b"\n\r\n   \n\t\n\xef\xbb\xbf\n",
    "not_objects.jsonl": lines(
        ACQ, b"[1, 2]", b'"a string"', b"42", b"null", b"true", b"{", b"}", b"{}", b'{"seq": 2,}',
        b"{'seq': 2}", b"\x00\x00", b"\x1b[31m{}\x1b[0m"),
    "hostile_strings.jsonl": lines(
        ev(1, "lease_acquired", key="\x1b[31mEVIL\x1b[0m", worker="<script>alert(1)</script>"),
        ev(2, key="\x1b[31mEVIL\x1b[0m", worker="[bold red]markup[/bold red]"),
        ev(3, key="k\u0000nul", worker="\u202eoverride"),
        ev(4, key="k\u2028line", worker="a\tb\rc"),
        b'{"seq": 5, "workflow_key": "k\\ud800", "kind": "progress", "epoch": 1}',
        ev(6, kind="\x1b]0;title\x07progress")),
    "deep_attrs_small.jsonl": lines(
        ACQ,
        b'{"seq": 2, "workflow_key": "k", "kind": "progress", "epoch": 1, "attrs": '
        + b'{"a": ' * 3000 + b"1" + b"}" * 3000 + b"}",
        b'{"seq": 3, "workflow_key": "k", "kind": "progress", "epoch": 1, "attrs": '
        + b"[" * 3000 + b"]" * 3000 + b"}",
        b'{"seq": 4, "workflow_key": "k", "kind": "progress", "epoch": 1, "attrs": ' + b"[" * 3000 + b"}"),
    "mentions_resource_spans.jsonl": lines(
        b'"resourceSpans"', ev(1, "lease_acquired", attrs={"resourceSpans": []}), ev(2)),
    "csv_missing_columns.csv": b"seq,workflow_key,kind,epoch\n1,k,lease_acquired,1\n2,k,progress\n3,k\n4\n5,k,progress,1\n",
    "csv_no_epoch_column.csv": b"seq,workflow_key,kind\n1,k,lease_acquired\n2,k,progress\n",
    "csv_extra_columns.csv": b"seq,workflow_key,kind,epoch\n1,k,lease_acquired,1\n2,k,progress,1,EXTRA,MORE\n3,k,progress,1\n",
    "csv_invalid_utf8.csv": b"seq,workflow_key,kind,epoch\n1,k,lease_acquired,1\n2,k\xff,progress,1\n3,k,progress,1\n",
    "csv_header_only.csv": b"seq,workflow_key,kind,epoch\n",
    "csv_empty.csv": b"",
    "parquet_not_parquet.parquet": b"PAR1 this is not a parquet file PAR1",
}


def main() -> None:
    for name, data in TEXT.items():
        (HERE / name).write_bytes(data)
    body = lines(*(ev(i, "lease_acquired" if i == 1 else "progress") for i in range(1, 400)))
    whole = gzip.compress(body, mtime=0)
    (HERE / "truncated.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    flipped = bytearray(whole)
    flipped[len(flipped) // 2] ^= 0xFF
    (HERE / "corrupt.jsonl.gz").write_bytes(bytes(flipped))
    (HERE / "multi_member_zero_padded.jsonl.gz").write_bytes(
        gzip.compress(body[:2000], mtime=0) + gzip.compress(body[2000:], mtime=0) + b"\0" * 16)
    (HERE / "truncated_header.jsonl.gz").write_bytes(whole[:6])
    import zstandard

    z = zstandard.ZstdCompressor(level=3)
    frames = z.compress(body[:5000]) + z.compress(body[5000:])
    (HERE / "truncated.jsonl.zst").write_bytes(frames[: len(frames) - 40])
    (HERE / "multi_frame.jsonl.zst").write_bytes(frames)
    csv_body = b"seq,workflow_key,kind,epoch\n" + b"".join(
        b"%d,k,%s,1\n" % (i, b"lease_acquired" if i == 1 else b"progress") for i in range(1, 300))
    csv_gz = gzip.compress(csv_body, mtime=0)
    (HERE / "truncated.csv.gz").write_bytes(csv_gz[: len(csv_gz) // 2])
    csv_zst = z.compress(csv_body[:3000]) + z.compress(csv_body[3000:])
    (HERE / "truncated.csv.zst").write_bytes(csv_zst[: len(csv_zst) - 30])

    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({
        "seq": pa.array([1.0, 2.5, 3.0, float("nan"), 5.0]),
        "workflow_key": pa.array([7, 7, 7, 7, 7]),
        "kind": pa.array(["lease_acquired", "progress", "progress", "progress", "progress"]),
        "epoch": pa.array(["1", "seventeen", "1", "1", "-4"]),
        "worker": pa.array([b"\xff\xfe", b"w", None, b"w", b"w"], pa.binary()),
    }), HERE / "parquet_wrong_column_types.parquet")
    pq.write_table(pa.table({
        "seq": pa.array([1, 2, 3], pa.int64()),
        "workflow_key": ["k", "k", "k"],
        "kind": ["lease_acquired", "progress", "progress"],
        "epoch": pa.array([1, 18446744073709551615, None], pa.uint64()),
        "attrs": pa.array([{"prompt": "SECRET-PARQUET", "n": 1}, None, {"prompt": None, "n": 3}]),
        "ts": pa.array([0, 1, 2], pa.timestamp("us", tz="UTC")),
    }), HERE / "parquet_uint64_and_struct_attrs.parquet")


if __name__ == "__main__":
    main()
