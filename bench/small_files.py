"""The fixed cost per input file: audit a directory of many three-line logs and print the time.

    python bench/small_files.py                  # 10,000 files, audit and ingest --db
    python bench/small_files.py --files 2000

Each file holds one workflow key's lease_acquired, progress and a stale progress (so every file
adds one finding and the accounting can be checked). The run is the real CLI in a subprocess,
``python -m auditor audit DIR --json FILE``, timed from start to exit, and its peak RSS (the
child's VmHWM, via getrusage). Before small files were batched (one transaction per file) 10,000
files took 452 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make(folder: Path, files: int) -> None:
    for i in range(files):
        key = f"tenant-{i % 97}/job/{i}"
        lines = [{"seq": 1, "workflow_key": key, "kind": "lease_acquired", "epoch": 1, "worker": "a"},
                 {"seq": 2, "workflow_key": key, "kind": "lease_acquired", "epoch": 2, "worker": "b"},
                 {"seq": 3, "workflow_key": key, "kind": "progress", "epoch": 1, "worker": "a"}]
        sub = folder / f"host-{i % 50:02d}"
        sub.mkdir(exist_ok=True)
        (sub / f"run-{i:05d}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def timed(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "auditor", *args], cwd=ROOT, capture_output=True, text=True)
    return time.perf_counter() - start, p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-small-") as tmp:
        folder = Path(tmp, "logs")
        folder.mkdir()
        make(folder, opts.files)
        out = Path(tmp, "audit.json")
        seconds, p = timed(["audit", str(folder), "--json", str(out), "--fail-on", "double_commit"])
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        if p.returncode != 0:
            sys.exit(f"audit failed ({p.returncode}): {p.stderr}")
        inp = json.loads(out.read_text())["input"]
        assert (inp["lines_read"], inp["events"], len(inp["files"])) == (3 * opts.files,) * 2 + (opts.files,), inp
        print(f"audit: {opts.files:,} files of 3 lines in {seconds:.1f} s "
              f"({1000 * seconds / opts.files:.2f} ms a file), peak RSS {rss:,.0f} MB")
        db = Path(tmp, "store.duckdb")
        seconds, p = timed(["ingest", str(folder), "--db", str(db)])
        if p.returncode != 0:
            sys.exit(f"ingest failed ({p.returncode}): {p.stderr}")
        again, p = timed(["ingest", str(folder), "--db", str(db)])
        assert p.stdout.count("already ingested") == opts.files, p.stdout[-500:]
        print(f"ingest --db: {seconds:.1f} s; again (every file skipped by digest): {again:.1f} s")


if __name__ == "__main__":
    main()
