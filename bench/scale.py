"""The scale benchmark (issue 5): audit millions of events and compare with DuckDB's own scan.

For each size it generates (once, cached beside the other logs) a seeded, realistic log with the
preemption simulator's scale generator, then measures four things side by side, each in a fresh
process so that start-up, imports and peak memory are counted the way a user meets them:

  (a) the floor: DuckDB's ``read_json`` over the same file, touching every event column;
  (b) ``auditor audit FILE --json OUT``, end to end, as a user runs it;
  (a) and (b) alternate ``--repeat`` times (3 by default) and the median of each is reported;
  (c) a plain pure-Python reference: ``json.loads`` per line, the events sorted per workflow key
      in seq order, and the incremental detector (``auditor.detect.live``), whose state per key is
      essentially the highest epoch acquired so far;
  (d) DuckDB alone doing the detection: ``read_json`` into an in-memory table, ``detect.sql``, the
      finding rows written by ``COPY``; none of the rest of (b). A floor for any audit on this SQL;
  (e) DuckDB alone storing the events in a DuckDB file (bounded memory), without detecting anything.

``--careful`` adds (f): the same audit with every line through the careful normalizer
(``Store(careful=True)``, the reference the SQL fast path is pinned to), and says whether its JSON
document is byte-identical to (b)'s.

It prints the ratios b/a, c/b, d/a and e/a, the peak resident memory of each process (its VmHWM), whether
(b) and (c) found the same findings, and the cold start of auditing the 16-event seed fixture.
``--phases`` adds a separate, unmeasured diagnostic run that times the stages of (b) inside one
process. Results and how to read them: bench/RESULTS.md.

    python bench/scale.py --events 100000 --events 1000000 --events 10000000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEED_FIXTURE = ROOT / "fixtures" / "seed_split_brain.jsonl"

# The event columns of SPEC section 2 as the generator writes them; the floor reads all of them.
COLUMNS = {"seq": "BIGINT", "ts": "VARCHAR", "workflow_key": "VARCHAR", "kind": "VARCHAR",
           "epoch": "BIGINT", "worker": "VARCHAR", "step_id": "VARCHAR", "effect_key": "VARCHAR",
           "sink": "VARCHAR", "sink_result": "VARCHAR", "reporter": "VARCHAR", "attrs": "JSON"}

FLOOR = """
import duckdb, json, sys, time
t = time.perf_counter()
cols = json.loads(sys.argv[2])
touched = ", ".join(f"max({c}::VARCHAR)" if t == "JSON" else f"max({c})" for c, t in cols.items())
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
row = con.execute(f"SELECT count(*), {touched} FROM read_json($path, format = "
                               f"'newline_delimited', columns = $cols)",
                               {"path": sys.argv[1], "cols": cols}).fetchall()[0]
print(json.dumps({"rows": row[0], "query_s": time.perf_counter() - t}))
"""

# (d): what DuckDB alone needs for this audit's detection, skipping everything else the audit does
# (no validation or quarantine, no dedupe, no incidents, no Python objects, findings written by
# COPY): the events loaded from read_json into an in-memory table, detect.sql's statements, and its
# finding rows. It is the floor of any audit built on this SQL, and how far it sits above (a) says
# how much of b/a the detection itself costs.
DETECT_ONLY = """
import duckdb, json, sys, time
sys.path.insert(0, sys.argv[4])
from auditor.detect.batch import _BUILD, SQL, _identify_keys
t = time.perf_counter()
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
con.execute("SET preserve_insertion_order = false")
con.execute(\"\"\"CREATE TABLE events AS
SELECT md5(concat_ws(chr(31), seq, workflow_key, kind, epoch, worker, effect_key, sink, sink_result,
                     reporter, step_id, ts, attrs)) AS event_id,
       seq AS ord, seq, row_number() OVER () AS obs, workflow_key, kind, epoch, worker, effect_key, sink,
       sink_result, reporter, step_id, ts, try_cast(ts AS TIMESTAMPTZ) AS ts_utc,
       attrs::VARCHAR AS attrs, 1 AS source_id, 0::BIGINT AS line, row_number() OVER () AS position
FROM read_json($path, format = 'newline_delimited', columns = $cols)\"\"\",
            {"path": sys.argv[1], "cols": json.loads(sys.argv[2])})
from auditor.core.columns import table
have = {r[0] for r in con.execute("DESCRIBE events").fetchall()}
for c in table():  # the store's other columns (the field registry's), empty: the log gives none of them
    if c.name not in have:
        con.execute(f"ALTER TABLE events ADD COLUMN {c.name} {c.sql.split()[0]}")
con.execute("CREATE TABLE sources AS SELECT 1 AS source_id, $path AS name", {"path": sys.argv[1]})
scratch = sys.argv[3] + ".scratch.duckdb"
_identify_keys(con, lambda statement: statement())  # the keys' ids, as the audit's detection takes them
for name in _BUILD:  # "scratch" attaches a file for the spooled finding rows, as the audit does
    con.execute(SQL[name], [scratch] if name == "scratch" else [])
con.execute("COPY (SELECT * FROM auditor_detect.finding_rows) TO '" + sys.argv[3].replace("'", "''") + "' (FORMAT json)")
(n,) = con.execute("SELECT count(*) FROM auditor_detect.finding_rows").fetchone()
print(json.dumps({"findings": n, "query_s": time.perf_counter() - t}))
"""

# (e): what holding the events within bounded memory costs before any detection: read_json into a
# table of a DuckDB file (memory bounded by DuckDB's buffer pool, like (b)'s scratch store), and a
# checkpoint. In memory the same table is faster but takes about 2 GB at ten million events.
STORE_ONLY = """
import duckdb, json, os, sys, tempfile, time
t = time.perf_counter()
with tempfile.TemporaryDirectory(prefix="scale-store-") as d:
    con = duckdb.connect(os.path.join(d, "events.duckdb"))
    con.execute("SET enable_progress_bar = false")
    con.execute("SET preserve_insertion_order = false")
    con.execute("CREATE TABLE events AS SELECT * FROM read_json($path, format = 'newline_delimited', "
                "columns = $cols)", {"path": sys.argv[1], "cols": json.loads(sys.argv[2])})
    con.execute("CHECKPOINT")
    (n,) = con.execute("SELECT count(*) FROM events").fetchone()
    con.close()
print(json.dumps({"rows": n, "query_s": time.perf_counter() - t}))
"""


# Every child imports this checkout's auditor, not whichever one the interpreter has installed.
CHILD_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))


@dataclass
class Run:
    """One measured child process."""

    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    exit_code: int


@dataclass
class Row:
    events: int
    bytes: int
    workflows: int
    truth: dict[str, int]
    floor: Run
    audit: Run
    reference: Run | None
    detect_only: Run | None = None
    detect_only_findings: int | None = None
    store_only: Run | None = None
    found: dict[str, int] = field(default_factory=dict)
    reference_found: dict[str, int] = field(default_factory=dict)
    same_findings: bool | None = None
    mismatches: int = 0
    phases: dict[str, float] = field(default_factory=dict)
    careful: Run | None = None
    same_document: bool | None = None  # (b)'s JSON document byte-identical to (f)'s
    floor_runs: list[float] = field(default_factory=list)  # every run's seconds; floor is the median
    audit_runs: list[float] = field(default_factory=list)

    @property
    def b_over_a(self) -> float:
        return self.audit.seconds / self.floor.seconds

    @property
    def d_over_a(self) -> float | None:
        return self.detect_only.seconds / self.floor.seconds if self.detect_only else None

    @property
    def c_over_b(self) -> float | None:
        return self.reference.seconds / self.audit.seconds if self.reference else None


def measure(cmd: list[str], stdout=subprocess.DEVNULL, env: dict | None = None) -> Run:
    """Run ``cmd`` to completion; wall time, CPU time and peak RSS of that child alone.

    The peak is the child's VmHWM, polled from /proc: the ru_maxrss that wait4 reports for a
    child starts from its parent's high-water mark (Linux keeps it across fork and execve), and
    this process grows to gigabytes when it compares findings.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, env=env or CHILD_ENV)
    peak_kb = 0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                peak_kb = max([peak_kb] + [int(line.split()[1]) for line in f if line.startswith("VmHWM")])
        except OSError:
            pass
        time.sleep(0.05)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(round(elapsed, 3), round(usage.ru_utime + usage.ru_stime, 3), round(peak_kb / 1024, 1),
               proc.returncode)


def median_run(runs: list[Run]) -> Run:
    """The run of median wall time (the lower middle of an even count), with the highest peak RSS."""
    middle = sorted(runs, key=lambda r: r.seconds)[(len(runs) - 1) // 2]
    return Run(middle.seconds, middle.cpu_seconds, max(r.peak_rss_mb for r in runs), middle.exit_code)


def generate(directory: Path, events: int, seed: int, workflows: int | None, disorder: float) -> tuple[Path, dict]:
    """The log for one size, generated once and reused while its parameters stay the same."""
    from auditor.simulate import generate_log

    name = f"scale-{events}-s{seed}" + (f"-w{workflows}" if workflows else "") + f"-d{disorder}"
    path, meta_path = directory / f"{name}.jsonl", directory / f"{name}.meta.json"
    if path.exists() and meta_path.exists():
        return path, json.loads(meta_path.read_text())
    say(f"generating {events:,} events into {path} ...")
    t = time.perf_counter()
    log = generate_log(path, events, seed=seed, workflows=workflows, disorder=disorder)
    meta = {"events": log.events, "workflows": log.workflows, "runs": log.runs, "truth": log.findings,
            "bytes": path.stat().st_size, "generate_s": round(time.perf_counter() - t, 1)}
    meta_path.write_text(json.dumps(meta))
    return path, meta


def auditor_command() -> list[str]:
    script = Path(sys.executable).with_name("auditor")
    return [str(script)] if script.exists() else [sys.executable, "-m", "auditor"]


def finding_key(f: dict) -> tuple:
    """A finding as compared between (b) and (c): every field of the JSON finding but where it is
    written (``file``, ``line``, the ``*position`` fields), which the reference, fed events, lacks."""
    f = {k: v for k, v in f.items() if k not in ("file", "line") and not k.endswith("position")}
    f["epochs"] = f.get("epochs") or []  # an absent list and an empty one are alike
    return (json.dumps(f, sort_keys=True),)  # hashable whatever the finding's lists and objects


def document_findings(path: Path):
    """The findings of an audit's JSON document, one item a line as the document writes them: a
    40M document is 3.3 GB, which ``json.load`` would turn into many times that in this process."""
    with open(path, encoding="utf-8") as f:
        inside = False
        for line in f:
            if not inside:
                inside = line == '  "findings": [\n'
            elif line.startswith("    {"):
                yield json.loads(line.rstrip().rstrip(","))
            else:
                return


def by_grade(findings) -> dict[str, int]:
    out: dict[str, int] = {}
    for f in findings:
        out[f["grade"]] = out.get(f["grade"], 0) + 1
    return out


def bench_size(args, events: int) -> Row:
    args.dir.mkdir(parents=True, exist_ok=True)
    log, meta = generate(args.dir, events, args.seed, args.workflows, args.disorder)
    stem = args.dir / log.stem
    say(f"{events:,} events, {meta['bytes'] / 1e9:.2f} GB, {meta['workflows']:,} workflow keys")

    # The log is read once first, untimed: a 2.45 GB file evicted from the page cache made the
    # first floor run time the disk (20.4 s against 4-5 s), and the audit after it the cache.
    say("  reading the log once (page cache) ...")
    with open(log, "rb") as f:
        while f.read(64 << 20):
            pass
    # (a) and (b) alternate, --repeat times, so a shared machine's load falls on both alike; the
    # median run of each is reported (peak RSS: the highest of the runs).
    floors, audits = [], []
    audit_json = Path(f"{stem}.audit.json")
    for i in range(args.repeat):
        say(f"  (a) DuckDB read_json floor, run {i + 1} of {args.repeat} ...")
        with open(f"{stem}.floor.out", "w") as out:
            floor = measure([sys.executable, "-c", FLOOR, str(log), json.dumps(COLUMNS)], stdout=out)
        rows = json.loads(Path(f"{stem}.floor.out").read_text())["rows"]
        if floor.exit_code != 0 or rows != meta["events"]:
            sys.exit(f"the floor query failed or read {rows} rows, expected {meta['events']}")
        floors.append(floor)
        say(f"  (b) auditor audit, run {i + 1} of {args.repeat} ...")
        with open(f"{stem}.audit.txt", "w") as out:
            audit = measure(auditor_command() + ["audit", str(log), "--json", str(audit_json)], stdout=out)
        if audit.exit_code not in (0, 1):
            sys.exit(f"auditor audit failed (exit {audit.exit_code}); see {stem}.audit.txt")
        audits.append(audit)
    floor, audit = median_run(floors), median_run(audits)

    reference = None
    if not args.no_reference:
        say("  (c) pure-Python reference ...")
        ref_json = Path(f"{stem}.reference.jsonl")
        reference = measure([sys.executable, __file__, "--reference", str(log), "--out", str(ref_json)])
        if reference.exit_code != 0:
            sys.exit(f"the reference failed (exit {reference.exit_code})")

    row = Row(events, meta["bytes"], meta["workflows"], meta["truth"], floor, audit, reference,
              floor_runs=[r.seconds for r in floors], audit_runs=[r.seconds for r in audits])
    if not args.no_detect_only:
        say("  (d) DuckDB alone: load and detect.sql ...")
        with open(f"{stem}.detect_only.out", "w") as out:
            row.detect_only = measure([sys.executable, "-c", DETECT_ONLY, str(log), json.dumps(COLUMNS),
                                       f"{stem}.detect_only.json", str(ROOT)], stdout=out)
        if row.detect_only.exit_code != 0:
            sys.exit(f"(d) failed (exit {row.detect_only.exit_code})")
        row.detect_only_findings = json.loads(Path(f"{stem}.detect_only.out").read_text())["findings"]
        Path(f"{stem}.detect_only.json").unlink(missing_ok=True)
        say("  (e) DuckDB alone: store the events in a DuckDB file ...")
        row.store_only = measure([sys.executable, "-c", STORE_ONLY, str(log), json.dumps(COLUMNS)])
        if row.store_only.exit_code != 0:
            sys.exit(f"(e) failed (exit {row.store_only.exit_code})")
    say("  comparing findings ...")
    row.found = by_grade(document_findings(audit_json))
    if reference is not None:
        batch = list(document_findings(audit_json))
        with open(ref_json, encoding="utf-8") as f:
            ref = [json.loads(line) for line in f]
        row.reference_found = by_grade(ref)
        a, c = Counter(map(finding_key, batch)), Counter(map(finding_key, ref))
        row.same_findings = a == c
        row.mismatches = sum(((a - c) + (c - a)).values())
    if args.careful:
        say("  (f) the careful path (every line through normalize_line) ...")
        careful_json = Path(f"{stem}.careful.json")
        row.careful = measure([sys.executable, __file__, "--careful-of", str(log), "--out", str(careful_json)])
        if row.careful.exit_code != 0:
            sys.exit(f"(f) failed (exit {row.careful.exit_code})")
        row.same_document = same_bytes(audit_json, careful_json)
        if not args.keep:
            careful_json.unlink(missing_ok=True)
    if args.phases:
        row.phases = phases(log)
    if not args.keep:
        audit_json.unlink(missing_ok=True)
    return row


def phases(log: Path) -> dict[str, float]:
    """Stage timings of one in-process audit: a diagnostic run, never the measured one."""
    say("  phases (diagnostic run) ...")
    out = subprocess.run([sys.executable, __file__, "--phases-of", str(log)], check=True,
                         capture_output=True, text=True, env=CHILD_ENV).stdout
    return json.loads(out)


def run_phases(log: str) -> None:
    marks: dict[str, float] = {}
    t = time.perf_counter()

    def mark(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        marks[name] = round(now - t, 2)
        t = now

    from auditor import analyze, ingest_paths
    from auditor.render.json import write_json
    from auditor.store import Store
    mark("import")
    import auditor.detect.batch

    detect, spent = auditor.detect.batch.detect, []

    def timed_detect(store):  # analyze() looks detect up when it runs: split detect from explain
        start = time.perf_counter()
        try:
            return detect(store)
        finally:
            spent.append(time.perf_counter() - start)

    auditor.detect.batch.detect = timed_detect
    store = Store(None)
    ingest_paths([log], store, "auto", None, idempotent=False)
    mark("ingest")
    result = analyze(store)  # detect + explain
    mark("detect+explain")
    marks["detect"] = round(sum(spent), 2)
    marks["explain"] = round(marks["detect+explain"] - marks["detect"], 2)
    with open(os.devnull, "w", encoding="utf-8") as out:
        write_json(result, out)
    mark("json")
    with open("/proc/self/status") as f:  # VmHWM: ru_maxrss would include the parent's
        marks["peak_rss_mb"] = next(round(int(line.split()[1]) / 1024) for line in f
                                    if line.startswith("VmHWM"))
    print(json.dumps(marks))


def same_bytes(a: Path, b: Path) -> bool:
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(1 << 20), fb.read(1 << 20)
            if x != y:
                return False
            if not x:
                return True


def run_careful(log: str, out: str) -> None:
    """(f): the audit with every line through the careful normalizer, its document written to ``out``."""
    from auditor import analyze, ingest_paths
    from auditor.render.json import write_json
    from auditor.store import Store

    store = Store(None, careful=True)
    ingest_paths([log], store, "auto", None, idempotent=False)
    with analyze(store) as result, open(out, "w", encoding="utf-8") as f:
        write_json(result, f)


def run_reference(log: str, out: str) -> None:
    """(c): everything in plain Python, one ``json.loads`` per line."""
    from auditor.detect.live.detector import detect_events
    from auditor.core.model import Event, Kind, Reporter, SinkResult

    kinds, results, reporters = ({m.value: m for m in e} for e in (Kind, SinkResult, Reporter))
    shared: dict[str, str] = {}
    share = shared.setdefault  # one string per workflow key and worker, not one per line
    loads = json.loads
    events = []
    with open(log, "rb") as f:
        for line in f:
            if line.isspace():
                continue
            d = loads(line)
            get = d.get
            events.append(Event(
                seq=d["seq"], workflow_key=share(d["workflow_key"], d["workflow_key"]),
                kind=kinds[d["kind"]], epoch=get("epoch"), worker=share(get("worker", "unknown"), get("worker", "unknown")),
                effect_key=get("effect_key"), sink=get("sink"), sink_result=results.get(get("sink_result")),
                reporter=reporters.get(get("reporter")), step_id=get("step_id"), ts=get("ts"),
                event_id=get("event_id")))
    events.sort(key=lambda e: (e.workflow_key, e.seq))
    findings = detect_events(events)
    with open(out, "w", encoding="utf-8") as f:
        for finding in findings:
            f.write(json.dumps(finding.to_dict(), ensure_ascii=False) + "\n")


def cold_start(runs: int) -> float:
    """Median wall time of auditing the 16-event seed fixture from a cold process."""
    times = []
    for _ in range(runs):
        run = measure(auditor_command() + ["audit", str(SEED_FIXTURE)])
        if run.exit_code != 1:
            sys.exit(f"the seed audit exited {run.exit_code}, expected 1")
        times.append(run.seconds)
    return statistics.median(times)


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal"))
        mem_gb = f"{mem / 1024 / 1024:.0f} GB"
    except (OSError, StopIteration):
        mem_gb = "?"
    import duckdb

    return (f"{os.cpu_count()} cores ({cpu}), {mem_gb} RAM, Linux {platform.release()}, Python "
            f"{platform.python_version()}, DuckDB {duckdb.__version__}")


def table(rows: list[Row]) -> str:
    head = ("| events | JSONL | (a) floor s | (b) audit s | (c) reference s | (d) DuckDB alone s | b/a | "
            "c/b | d/a | peak RSS (b) | peak RSS (d) | same findings | findings (b) | findings (d) |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        c = f"{r.reference.seconds:.1f}" if r.reference else "-"
        cb = f"{r.c_over_b:.1f}" if r.c_over_b else "-"
        same = "-" if r.same_findings is None else "yes" if r.same_findings else f"NO ({r.mismatches} differ)"
        d = r.detect_only
        lines.append(
            f"| {r.events:,} | {r.bytes / 1e9:.2f} GB | {r.floor.seconds:.2f} | {r.audit.seconds:.2f} | {c} | "
            f"{f'{d.seconds:.2f}' if d else '-'} | {r.b_over_a:.2f} | {cb} | "
            f"{f'{r.d_over_a:.2f}' if d else '-'} | {r.audit.peak_rss_mb:,.0f} MB | "
            f"{f'{d.peak_rss_mb:,.0f} MB' if d else '-'} | {same} | {sum(r.found.values()):,} | "
            f"{(f'{r.detect_only_findings:,}' + ('' if r.detect_only_findings == sum(r.found.values()) else ' DIFFERS')) if d else '-'} |")
    return "\n".join(lines)


def log_arguments(p: argparse.ArgumentParser) -> None:
    """The options that choose the generated logs, shared with bench/spark_scale.py."""
    p.add_argument("--events", type=int, action="append", help="log size; repeat for several")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--disorder", type=float, default=0.01, help="share of lines out of order")
    p.add_argument("--dir", type=Path, default=Path("/tmp/bench"), help="where logs and outputs go")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    log_arguments(p)
    p.add_argument("--workflows", type=int, default=None, help="spread runs over this many keys")
    p.add_argument("--no-reference", action="store_true", help="skip (c)")
    p.add_argument("--no-detect-only", action="store_true", help="skip (d) and (e)")
    p.add_argument("--phases", action="store_true", help="add a diagnostic run timing (b)'s stages")
    p.add_argument("--careful", action="store_true",
                   help="add (f), the careful path, and compare its JSON document with (b)'s byte for byte")
    p.add_argument("--repeat", type=int, default=3, help="runs of (a) and (b), alternating; the median is reported")
    p.add_argument("--cold-runs", type=int, default=5)
    p.add_argument("--keep", action="store_true", help="keep the audit's JSON document")
    p.add_argument("--save", type=Path, help="also write the measurements as JSON here")
    p.add_argument("--reference", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--phases-of", help=argparse.SUPPRESS)
    p.add_argument("--careful-of", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.reference:
        return run_reference(args.reference, args.out)
    if args.phases_of:
        return run_phases(args.phases_of)
    if args.careful_of:
        return run_careful(args.careful_of, args.out)

    load_before = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    rows = [bench_size(args, n) for n in (args.events or [100_000])]
    cold = cold_start(args.cold_runs)
    print(f"machine: {machine()}")
    print(f"date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; load average {load_before} at the start, "
          f"{' / '.join(f'{x:.1f}' for x in os.getloadavg())} (1 / 5 / 15 min) at the end")
    print(table(rows))
    for r in rows:
        print(f"{r.events:,}: runs (a) {r.floor_runs} s, (b) {r.audit_runs} s (medians above)")
        print(f"{r.events:,}: (a) cpu {r.floor.cpu_seconds:.1f}s rss {r.floor.peak_rss_mb:,.0f} MB; "
              f"(b) cpu {r.audit.cpu_seconds:.1f}s; (c) "
              + (f"cpu {r.reference.cpu_seconds:.1f}s rss {r.reference.peak_rss_mb:,.0f} MB" if r.reference else "-"))
        if r.store_only:
            print(f"  (e) store the events in a DuckDB file: {r.store_only.seconds:.2f} s, "
                  f"e/a {r.store_only.seconds / r.floor.seconds:.2f}, peak RSS {r.store_only.peak_rss_mb:,.0f} MB; "
                  f"(d) peak RSS {r.detect_only.peak_rss_mb:,.0f} MB")
        print(f"  findings (b) {r.found}")
        if r.reference:
            print(f"  findings (c) {r.reference_found}")
        print(f"  generator truth {r.truth}")
        if r.careful:
            print(f"  (f) careful path: {r.careful.seconds:.2f} s, f/a {r.careful.seconds / r.floor.seconds:.2f}, "
                  f"peak RSS {r.careful.peak_rss_mb:,.0f} MB; (b)'s JSON document "
                  + ("byte-identical to (f)'s" if r.same_document else "DIFFERS from (f)'s"))
        if r.phases:
            print(f"  phases of (b): {r.phases}")
    print(f"cold start, seed audit (median of {args.cold_runs}): {cold:.2f} s")
    if args.save:
        args.save.write_text(json.dumps({"machine": machine(), "cold_start_s": cold,
                                         "rows": [asdict(r) for r in rows]}, indent=2))


if __name__ == "__main__":
    main()
