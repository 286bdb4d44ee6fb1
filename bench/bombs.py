"""Peak memory and time of the hostile inputs of issue 19, each through the real CLI.

    python bench/bombs.py            # every case; prints one table row a case
    python bench/bombs.py --only gzip-no-newline

Each case runs ``python -m auditor audit ...`` in its own subprocess and reports its exit code,
wall time and peak RSS (the child's high-water mark, VmHWM, read from getrusage of a one-child
wrapper). The inputs are written to a temporary folder first (a few hundred MB of disk, mostly
the 40 MB-line and 300 MB-of-newlines files; the bombs themselves are small).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import zstandard

ROOT = Path(__file__).resolve().parent.parent
ACQ = b'{"seq": 1, "workflow_key": "k", "kind": "lease_acquired", "epoch": 1}\n'
GIB = 1 << 30

#: Measures one child: the wrapper has no other child, so RUSAGE_CHILDREN is that child's peak.
WRAPPER = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
           "p = subprocess.run(sys.argv[2:], stdin=open(sys.argv[1], 'rb') if sys.argv[1] != '-' else None, "
           "stdout=subprocess.DEVNULL, stderr=subprocess.PIPE); "
           "print(p.returncode, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
           "p.stderr.decode().strip()[:160].replace(chr(10), ' '))")


def gzip_stream(path: Path, head: bytes, filler: bytes, total: int) -> None:
    """A gzip file of ``head`` then ``total`` bytes of ``filler``, written without holding them."""
    comp = zlib.compressobj(1, zlib.DEFLATED, 31)
    block = filler * (1 << 20)
    with open(path, "wb") as f:
        f.write(comp.compress(head))
        for _ in range(total >> 20):
            f.write(comp.compress(block))
        f.write(comp.flush())


def zstd_stream(path: Path, head: bytes, filler: bytes, total: int) -> None:
    block = filler * (1 << 20)
    with open(path, "wb") as f, zstandard.ZstdCompressor(level=3).stream_writer(f) as w:
        w.write(head)
        for _ in range(total >> 20):
            w.write(block)


def plain(path: Path, blocks) -> None:
    """A file of ACQ then ``blocks``, written one block at a time."""
    with open(path, "wb") as f:
        f.write(ACQ)
        for block in blocks:
            f.write(block)


def cases(tmp: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (CLI arguments after 'audit', stdin file or '-')."""
    out: dict[str, tuple[list[str], str]] = {}
    p = tmp / "no_newline.jsonl.gz"
    gzip_stream(p, ACQ, b"a", GIB)
    out["gzip-no-newline (1 GiB in ~1 MB)"] = ([str(p)], "-")
    p = tmp / "newlines.jsonl.gz"
    gzip_stream(p, ACQ, b"\n", 4 * GIB)
    out["gzip-newlines (4 GiB in ~4 MB)"] = ([str(p)], "-")
    p = tmp / "zeros.jsonl.zst"
    zstd_stream(p, ACQ, b"\0", GIB)
    out["zstd-zeros (1 GiB)"] = ([str(p)], "-")
    p = tmp / "line40.jsonl"
    p.write_bytes(ACQ + json.dumps({"seq": 2, "workflow_key": "k", "kind": "progress", "epoch": 1,
                                    "attrs": {"b": "x" * (40 << 20)}}).encode() + b"\n")
    out["one 40 MB line"] = ([str(p)], "-")
    plain(p := tmp / "line256.jsonl", [b"y" * (1 << 20)] * 256)
    out["256 MB without a newline"] = ([str(p)], "-")
    plain(p := tmp / "lines14.jsonl", (json.dumps({
        "seq": 2 + i, "workflow_key": "k", "kind": "progress", "epoch": 1, "note": "n" * (7 << 20),
        "attrs": {"b": "x" * (7 << 20)}}).encode() + b"\n" for i in range(8)))
    out["eight 14 MB lines"] = ([str(p)], "-")
    plain(p := tmp / "newlines.jsonl", [b"\n" * (1 << 20)] * 300)
    out["300 MB of newlines"] = ([str(p)], "-")
    out["stdin from /dev/zero (default limits)"] = (["-"], "/dev/zero")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="run the cases whose name starts with this")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-bombs-") as tmp:
        todo = cases(Path(tmp))
        print("| case | exit | seconds | peak RSS | answer |\n|---|---|---|---|---|")
        for name, (args, stdin) in todo.items():
            if opts.only and not name.startswith(opts.only):
                continue
            cmd = [sys.executable, "-c", WRAPPER, stdin, sys.executable, "-m", "auditor", "audit", *args]
            env_tmp = Path(tmp, "spool")
            env_tmp.mkdir(exist_ok=True)
            line = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                                  env={**os.environ, "TMPDIR": str(env_tmp)}).stdout.split(" ", 3)
            code, seconds, rss_kb = int(line[0]), float(line[1]), int(line[2])
            answer = line[3].strip() if len(line) > 3 else ""
            print(f"| {name} | {code} | {seconds:.1f} | {rss_kb / 1024:,.0f} MB | {answer or '(audit ran)'} |",
                  flush=True)


if __name__ == "__main__":
    main()
