"""The noisy-log benchmark (issue 35): what three irrelevant lines per evidence line cost an audit.

It writes (once, cached in bench/out/) a log of N simulated events in zap's shape (``msg``,
epoch-seconds ``ts``; ``auditor.simulate.shapes``) twice: alone ("clean", N lines) and with three
lines nobody needs before each event ("noisy", 4N lines: requests, caches, metrics), plus the
events in canonical form. Then, each in a fresh process as a user runs them, side by side:

  (m) ``auditor map NOISY --out MAP``: the suggested vocabulary (the first 100,000 lines), timed;
  (n) ``auditor audit NOISY --map MAP --json OUT`` and (c) the same over CLEAN, alternating
      ``--repeat`` times (3 by default), the median of each: the ratio n/c is the noise's cost;
  (s) once, (n) with a vocabulary whose [ignore] patterns RE2 cannot read (a lookahead, same
      meaning): every noise line then goes through the Python normalizer, which the store's SQL
      otherwise spares them.

It checks that (n) and (c) write the same document but for the input accounting and the lines
findings point at, that their findings are the canonical log's, and prints ``uptime`` (the load
averages) before and after, since the machine is shared. Results and how to read them: bench/RESULTS.md.

    python bench/noisy.py --events 250000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT))


def write_logs(events: int, seed: int) -> tuple[Path, Path, Path]:
    """``(canonical, clean, noisy)`` for ``events`` simulated events, written once and reused."""
    import random

    from auditor.simulate.scale import generate_log
    from auditor.simulate.shapes import noise, zap

    stem = OUT / f"noisy-{events}-{seed}"
    canonical, clean, noisy = (Path(f"{stem}.canonical.jsonl"), Path(f"{stem}.clean.jsonl"),
                               Path(f"{stem}.noisy.jsonl"))
    if noisy.exists() and clean.exists() and canonical.exists():
        return canonical, clean, noisy
    OUT.mkdir(parents=True, exist_ok=True)
    generate_log(canonical, events, seed=seed)
    rng = random.Random(seed)
    with canonical.open() as src, clean.open("w") as c, noisy.open("w") as n:
        for at, text in enumerate(src, 1):
            ev = json.loads(text)
            when = datetime.fromisoformat(ev["ts"].replace("Z", "+00:00")).timestamp()
            line = zap(ev, at)
            line["ts"] = round(when, 3)
            evidence = json.dumps(line) + "\n"
            c.write(evidence)
            for _ in range(3):
                quiet = noise(rng, at)
                quiet["ts"] = round(when - rng.randrange(1, 900) / 1000, 3)
                n.write(json.dumps(quiet) + "\n")
            n.write(evidence)
    return canonical, clean, noisy


def uptime() -> str:
    """``uptime``'s line (the load averages over 1, 5 and 15 minutes): the machine is shared."""
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except OSError:
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def run(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "auditor", *args], capture_output=True, cwd=ROOT)
    return time.perf_counter() - t, done


def audit(log: Path, vocabulary: Path, out: Path) -> float:
    seconds, done = run(["audit", str(log), "--map", str(vocabulary), "--json", str(out), "-q",
                         "--allow-quarantined", "1000000000"])
    if done.returncode not in (0, 1, 3):
        sys.exit(f"auditing {log} failed (exit {done.returncode}): {done.stderr.decode()[-2000:]}")
    return seconds


def without_places(doc):
    if isinstance(doc, list):
        return [without_places(x) for x in doc]
    if isinstance(doc, dict):
        return {k: without_places(v) for k, v in doc.items() if k not in ("file", "line", "files", "input")}
    return doc


def without_prefilter(vocabulary: Path, out: Path) -> Path:
    """The same vocabulary, its [ignore] patterns behind a lookahead RE2 cannot read."""
    import tomllib

    from auditor.normalize.suggest.writer import toml_string

    data = tomllib.loads(vocabulary.read_text())
    patterns = data.get("ignore", {}).get("kind_patterns", [])
    text = vocabulary.read_text()
    for p in patterns:
        text = text.replace(toml_string(p, literal=True), toml_string("(?=.)" + p, literal=True), 1)
    out.write_text(text)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=250_000, help="evidence lines; the noisy log has 4x as many")
    ap.add_argument("--seed", type=int, default=35)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    load_before = uptime()
    canonical, clean, noisy = write_logs(a.events, a.seed)
    lines = sum(1 for _ in noisy.open())
    vocabulary = OUT / f"noisy-{a.events}-{a.seed}.map.toml"
    map_s, done = run(["map", str(noisy), "--out", str(vocabulary), "--force", "-q"])
    if done.returncode != 0:
        sys.exit(f"auditor map failed: {done.stderr.decode()}")
    noisy_s, clean_s = [], []
    for _ in range(a.repeat):
        noisy_s.append(audit(noisy, vocabulary, OUT / "noisy.json"))
        clean_s.append(audit(clean, vocabulary, OUT / "clean.json"))
    slow_s = audit(noisy, without_prefilter(vocabulary, OUT / "noisy-re.map.toml"), OUT / "noisy-re.json")
    canonical_s = audit(canonical, vocabulary, OUT / "canonical.json")
    load_after = uptime()
    docs = {n: json.loads((OUT / f"{n}.json").read_text()) for n in ("noisy", "clean", "noisy-re", "canonical")}
    same = without_places(docs["noisy"]) == without_places(docs["clean"]) == without_places(docs["noisy-re"])
    triples = {n: sorted((f["grade"], f["workflow_key"], f["seq"]) for f in d["findings"]) for n, d in docs.items()}
    inp = docs["noisy"]["input"]
    n, c = statistics.median(noisy_s), statistics.median(clean_s)
    print(f"machine: {os.cpu_count()} cores, shared")
    print(f"uptime before: {load_before}")
    print(f"uptime after:  {load_after}")
    print(f"noisy log: {lines:,} lines = {inp['events']:,} events + {inp['duplicates']:,} duplicates + "
          f"{inp['quarantined']:,} quarantined + {inp['ignored']:,} ignored; clean log: {a.events:,} lines")
    print(f"(m) auditor map NOISY (first 100,000 lines):  {map_s:6.2f} s  (limit 10 s)")
    print(f"(n) audit NOISY --map:                        {n:6.2f} s  (median of {a.repeat}: "
          f"{', '.join(f'{x:.2f}' for x in noisy_s)})")
    print(f"(c) audit CLEAN --map:                        {c:6.2f} s  (median of {a.repeat}: "
          f"{', '.join(f'{x:.2f}' for x in clean_s)})")
    print(f"(s) audit NOISY, [ignore] not decided in SQL: {slow_s:6.2f} s  (once)")
    print(f"    audit CANONICAL (fast path):              {canonical_s:6.2f} s  (once)")
    print(f"ratio n/c = {n / c:.2f} (limit 1.5); s/c = {slow_s / c:.2f}")
    print(f"same document (but input and lines): {same}; findings equal the canonical log's: "
          f"{triples['noisy'] == triples['clean'] == triples['canonical']} ({len(triples['noisy']):,} findings)")


if __name__ == "__main__":
    main()
