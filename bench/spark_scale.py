"""The Spark engine beside the single-node audit (issue 15), on the same simulated logs.

For each size it generates (once, cached) the seeded log of ``bench/scale.py``, splits it into
``--files`` JSONL files (Spark reads and normalizes one task per file), and measures, each in a
fresh process so start-up counts the way a user meets it:

  (b) ``auditor audit DIR --json OUT``: one machine, DuckDB;
  (s) ``auditor.spark.run(DIR)`` on ``--master`` (default ``local[2]``) with ``--partitions``
      workflow-key partitions, the document written the same way; the process starts the JVM.

It prints both times, their ratio, whether the two documents are equal but for ``engine``, and
how Spark's time splits: session start, stage 1 (read + normalize per file), stage 2 (duplicates
collapsed, event_id conflicts found, shuffle by workflow key, detect + explain per partition,
collect), merge, timelines (the events of the keys a report draws, read again), JSON; and
across partitions: events and detect + explain seconds per partition (min / median / max).

    python bench/spark_scale.py --events 1000000 --events 10000000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import ROOT, generate, log_arguments, machine, measure, say  # noqa: E402


def split(log: Path, parts: int) -> Path:
    """``log`` cut into ``parts`` JSONL files of about equal lines, in a directory of their own."""
    out = log.with_name(f"{log.stem}.{parts}-files")
    if out.is_dir() and len(list(out.glob("*.jsonl"))) == parts:
        return out
    out.mkdir(exist_ok=True)
    with open(log, "rb") as f:
        total = sum(1 for _ in f)
    per = -(-total // parts)
    with open(log, "rb") as f:
        for n in range(parts):
            with open(out / f"part-{n:03d}.jsonl", "wb") as part:
                for _ in range(per):
                    line = f.readline()
                    if not line:
                        break
                    part.write(line)
    return out


def spark_child(directory: str, out: str, stats_out: str, master: str, partitions: int,
                driver_memory: str) -> None:
    """(s), in its own process: start Spark, audit, write the document and the timings."""
    t0 = time.perf_counter()
    sys.path.insert(0, str(ROOT))
    from auditor.render.json import write_json
    from auditor.spark import run, session

    spark = session(master, partitions, {"spark.driver.memory": driver_memory,
                                         "spark.driver.maxResultSize": "0"})
    started = time.perf_counter() - t0
    result, stats = run([directory], spark=spark, partitions=partitions)
    t = time.perf_counter()
    with open(out, "w", encoding="utf-8") as f:
        write_json(result, f)
    json_s = time.perf_counter() - t
    Path(stats_out).write_text(json.dumps({
        "session_s": started, "stage1_s": stats.stage1_s, "stage2_s": stats.stage2_s,
        "merge_s": stats.merge_s, "timelines_s": stats.timelines_s, "json_s": json_s, "files": stats.files,
        "partitions": stats.partitions, "exit_code": result.exit_code}))
    spark.stop()


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}"


def bench_size(args, events: int) -> dict:
    args.dir.mkdir(parents=True, exist_ok=True)
    log, meta = generate(args.dir, events, args.seed, None, args.disorder)
    data = split(log, args.files)
    stem = args.dir / f"{log.stem}.{args.files}-files"
    say(f"{events:,} events in {args.files} files, {meta['bytes'] / 1e9:.2f} GB, {meta['workflows']:,} keys")

    # Both children import the auditor of this checkout, whatever is installed.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "PYSPARK_PYTHON": sys.executable}
    say("  (b) auditor audit (one machine) ...")
    single_json = Path(f"{stem}.single.json")
    single = measure([sys.executable, "-m", "auditor", "audit", str(data), "--json", str(single_json)], env=env)
    if single.exit_code not in (0, 1):
        sys.exit(f"auditor audit failed (exit {single.exit_code})")

    say(f"  (s) auditor.spark on {args.master}, {args.partitions} partitions ...")
    spark_json, stats_json = Path(f"{stem}.spark.json"), Path(f"{stem}.spark-stats.json")
    spark = measure([sys.executable, __file__, "--spark-child", str(data), str(spark_json), str(stats_json),
                     args.master, str(args.partitions), args.driver_memory], env=env)
    if spark.exit_code != 0:
        sys.exit(f"the Spark run failed (exit {spark.exit_code})")
    stats = json.loads(stats_json.read_text())

    say("  comparing the documents ...")
    with open(single_json, encoding="utf-8") as f:
        a = json.load(f)
    with open(spark_json, encoding="utf-8") as f:
        b = json.load(f)
    engines = (a.pop("engine"), b.pop("engine"))
    same = a == b
    differing = [k for k in a if a.get(k) != b.get(k)]
    findings = len(a["findings"])
    del a, b
    if not args.keep:
        single_json.unlink(missing_ok=True)
        spark_json.unlink(missing_ok=True)
    parts = stats["partitions"]
    return {"events": events, "bytes": meta["bytes"], "files": args.files, "single": single.__dict__,
            "spark": spark.__dict__, "stats": stats, "same": same, "differing": differing,
            "engines": engines, "findings": findings,
            "part_events": [p[1] for p in parts], "part_detect_s": [p[4] for p in parts],
            "part_load_s": [p[3] for p in parts], "file_s": [f[1] for f in stats["files"]]}


def report(rows: list[dict], args) -> str:
    out = [f"machine: {machine()}",
           f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average at the end "
           f"{os.getloadavg()[0]:.1f} / {os.getloadavg()[1]:.1f} / {os.getloadavg()[2]:.1f} (1 / 5 / 15 min)",
           f"Spark: master {args.master}, {args.partitions} workflow-key partitions, driver memory "
           f"{args.driver_memory}",
           "",
           "| events | files | (b) one machine | (s) Spark | s/b | same document | findings | peak RSS (b) | peak RSS (s, Python driver) |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['events']:,} | {r['files']} | {r['single']['seconds']:.1f} s | {r['spark']['seconds']:.1f} s | "
                   f"{r['spark']['seconds'] / r['single']['seconds']:.1f} | "
                   f"{'yes' if r['same'] else 'NO: ' + ', '.join(r['differing'])} | {r['findings']:,} | "
                   f"{r['single']['peak_rss_mb']:,.0f} MB | {r['spark']['peak_rss_mb']:,.0f} MB |")
    out += ["", "| events | session start | stage 1: read + normalize | stage 2: dedupe + shuffle + detect | merge | "
            "timelines | JSON | per file normalize (min / median / max) | per partition events (min / median / max) | "
            "per partition load (min / median / max) | per partition detect + explain (min / median / max) |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["stats"]
        ev = r["part_events"]
        out.append(f"| {r['events']:,} | {s['session_s']:.1f} s | {s['stage1_s']:.1f} s | {s['stage2_s']:.1f} s | "
                   f"{s['merge_s']:.1f} s | {s['timelines_s']:.1f} s | {s['json_s']:.1f} s | {spread(r['file_s'])} s | "
                   f"{min(ev):,} / {statistics.median(ev):,.0f} / {max(ev):,} | {spread(r['part_load_s'])} s | "
                   f"{spread(r['part_detect_s'])} s |")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    log_arguments(p)
    p.add_argument("--files", type=int, default=8, help="split each log into this many files")
    p.add_argument("--partitions", type=int, default=16, help="workflow-key partitions of stage 2")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="4g")
    p.add_argument("--keep", action="store_true", help="keep both JSON documents")
    p.add_argument("--save", type=Path, help="also write the measurements as JSON here")
    p.add_argument("--spark-child", nargs=6, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.spark_child:
        d, out, stats, master, parts, memory = args.spark_child
        return spark_child(d, out, stats, master, int(parts), memory)
    rows = [bench_size(args, n) for n in (args.events or [1_000_000])]
    print(report(rows, args))
    if args.save:
        args.save.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
