"""The Spark engine on a real standalone cluster (issue 46) beside one machine, on ONE file.

For each size it generates (once, cached) the seeded log of ``bench/scale.py`` as a single JSONL
file, starts a standalone cluster from the pyspark installation's own ``spark-class`` (a master and
``--workers`` workers of ``--cores`` cores and ``--worker-memory`` each, bound to 127.0.0.1,
``tests/spark/standalone.py``), and measures, each as a fresh command-line process:

  (b) ``auditor audit LOG --json OUT``: one machine;
  (k) ``auditor audit LOG --engine spark --spark-master spark://... --spark-conf
      spark.executor.memory=1g``: the cluster; the file is read in 64 MiB pieces by many tasks.

It prints wall and CPU seconds, the driver's peak RSS, whether the two documents' findings are
equal, and whether the cluster's findings by grade equal the generator's truth, with the load
(``uptime``) before and after each run.

    python bench/spark_cluster.py --events 10000000
    python bench/spark_cluster.py --events 40000000 --no-single
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale import ROOT, auditor_command, by_grade, document_findings, generate, log_arguments, measure, say  # noqa: E402

sys.path.insert(0, str(ROOT))
from tests.spark.standalone import Cluster  # noqa: E402


def load() -> str:
    return open("/proc/loadavg").read().split(" ", 3)[:3].__str__()


def cluster_command(cluster: Cluster, log: Path, out: Path, executor_memory: str, conf: list[str]) -> list[str]:
    extra = [x for c in conf for x in ("--spark-conf", c)]
    return [*auditor_command(), "audit", str(log), "--engine", "spark", "--spark-master", cluster.url,
            "--quiet", "--json", str(out), "--spark-conf", f"spark.executor.memory={executor_memory}",
            "--spark-conf", "spark.driver.host=127.0.0.1", "--spark-conf", "spark.driver.bindAddress=127.0.0.1",
            *extra]


def bench(args, events: int, cluster: Cluster) -> None:
    log, meta = generate(args.dir, events, args.seed, None, args.disorder)
    say(f"{events:,} events in one file, {meta['bytes'] / 1e9:.2f} GB; truth {meta['truth']}")
    single = None
    if not args.no_single:
        out = args.dir / f"{log.stem}.single.json"
        say(f"  (b) one machine ... load {load()}")
        single = measure([*auditor_command(), "audit", str(log), "--quiet", "--json", str(out)])
        say(f"  (b) {single.seconds:.1f} s, {single.cpu_seconds:.1f} CPU-s, peak {single.peak_rss_mb:,.0f} MB, "
            f"exit {single.exit_code}; load after {load()}")
    out_k = args.dir / f"{log.stem}.cluster.json"
    say(f"  (k) cluster: {args.workers} workers x {args.cores} core(s), executors {args.executor_memory} ... "
        f"load {load()}")
    run = measure(cluster_command(cluster, log, out_k, args.executor_memory, args.spark_conf),
                  env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))
    say(f"  (k) {run.seconds:.1f} s, {run.cpu_seconds:.1f} CPU-s (driver), driver peak {run.peak_rss_mb:,.0f} MB, "
        f"exit {run.exit_code}; load after {load()}")
    if run.exit_code not in (0, 1):
        say("  (k) failed: see its error above")
        return
    found = by_grade(document_findings(out_k))
    say(f"  findings by grade {found}: {'equal to' if found == meta['truth'] else 'DIFFER from'} the truth")
    if single is not None:
        from collections import Counter  # findings hold None and lists: compared as multisets of JSON

        def key(f: dict) -> str:
            return json.dumps(f, sort_keys=True)

        same = Counter(map(key, document_findings(out_k))) == Counter(
            map(key, document_findings(args.dir / f"{log.stem}.single.json")))
        say(f"  findings {'equal' if same else 'DIFFER'} to one machine's; cluster / one machine = "
            f"{run.seconds / single.seconds:.2f}x")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    log_arguments(p)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--cores", type=int, default=1)
    p.add_argument("--worker-memory", default="1g")
    p.add_argument("--executor-memory", default="1g")
    p.add_argument("--spark-conf", action="append", default=[], help="more --spark-conf KEY=VALUE")
    p.add_argument("--no-single", action="store_true", help="skip (b), one machine")
    args = p.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(Path(tempfile.mkdtemp(prefix="spark-cluster-", dir=args.dir)), workers=args.workers,
                      cores=args.cores, memory=args.worker_memory, executor_memory=args.executor_memory)
    cluster.start()
    try:
        for events in args.events or [10_000_000]:
            bench(args, events, cluster)
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
