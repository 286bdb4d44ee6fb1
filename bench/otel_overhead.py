"""The live door's costs (issue 3): what the span processor adds per span, and how fast it detects.

1. Cost per span. The same workload (an instrumented step: a span with its ownership attributes
   and one ``ownership.progress`` event; every 50th span a lease acquisition) runs on two
   providers: (A) only ``SimpleSpanProcessor(InMemorySpanExporter())``, (B) the same plus
   ``AuditSpanProcessor``. B's time includes ``force_flush``, so the worker thread's mapping and
   detection are paid inside the measurement, not hidden after it. Chunks of 1,000 spans
   alternate A and B; the ratio is the median of B/A per chunk in process CPU time (all
   threads), with wall time beside it. The filter alone is measured too, with spans that carry
   no ownership evidence. Target: at most 1.3x.
   With ``db=`` the same spans go to a DuckDB store too: ``measure_db`` creates ``--db-spans``
   spans in a tight loop and reports the sustained rate until every one is stored, and drops.
2. Live detection. Events from the preemption simulator's scale generator (a realistic mix with
   handovers, stale evidence and double commits), already parsed and in seq order per key, go
   through ``detect.live.detect_events`` on one thread, timed in CPU time. Target: at least
   200,000 events/s.

3. ``auditor serve``. A real server process (``--db``) and two sender processes posting OTLP
   protobuf trace requests (100 spans of 10 ownership events each) over keep-alive HTTP to
   127.0.0.1, honouring 429 + Retry-After. The senders encode their requests first and start
   together when the clock starts. Reported: events/s from the first request until the store
   holds every event, refused requests, and the server's peak RSS (its decoder processes' beside
   it). A fresh server per run, ``--serve-runs`` runs (5 by default); the median is the figure,
   every run is printed. Target: >= 50,000 events/s with two senders, no loss, memory bounded.

    python bench/otel_overhead.py                  # 20,000 spans x 7 rounds, 1,000,000 events
    python bench/otel_overhead.py --spans 5000 --rounds 3 --events 200000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from auditor.otel import AuditSpanProcessor  # noqa: E402

KEYS = 1000


def instrumented(tracer, n: int, start: int) -> None:
    """``n`` worker steps as an instrumented agent emits them, seqs from ``start``.

    ``KEYS`` workflow keys take turns; each key's lease is re-acquired (a clean handover to the
    next epoch) every 50 of its steps, so the detector does real work and finds nothing.
    """
    for i in range(start, start + n):
        key = f"tenant-{i % KEYS}/export/2026-07-26"
        cycle = i // KEYS
        epoch = 1 + cycle // 50
        if cycle % 50 == 0:
            with tracer.start_as_current_span("lease.acquire", attributes={
                    "ownership.event": "lease_acquired", "ownership.workflow_key": key,
                    "ownership.epoch": epoch, "ownership.seq": i, "ownership.worker": "w1"}):
                pass
            continue
        with tracer.start_as_current_span("export.step", attributes={
                "ownership.workflow_key": key, "ownership.epoch": epoch, "ownership.worker": "w1",
                "rows": i}) as span:
            span.add_event("ownership.progress", {"ownership.seq": i})


def plain(tracer, n: int, start: int) -> None:
    """The same shape of span without ownership evidence: the processor only filters it."""
    for i in range(start, start + n):
        with tracer.start_as_current_span("http.request", attributes={
                "http.route": "/export", "http.status_code": 200, "rows": i}) as span:
            span.add_event("cache.miss", {"key": i})


def measure_spans(workload, spans: int, rounds: int, chunk: int = 1000) -> dict:
    """Median cost ratio B/A over many small interleaved chunks, in CPU time of the process
    (all threads), so that a busy machine's other processes and drifting load weigh on both
    sides alike; wall-clock medians are reported beside it."""
    exporter_a, exporter_b = InMemorySpanExporter(), InMemorySpanExporter()
    base = TracerProvider()
    base.add_span_processor(SimpleSpanProcessor(exporter_a))
    audited = TracerProvider()
    audited.add_span_processor(SimpleSpanProcessor(exporter_b))
    processor = AuditSpanProcessor(schedule_delay_millis=200)
    audited.add_span_processor(processor)
    tracer_a, tracer_b = base.get_tracer("bench"), audited.get_tracer("bench")
    workload(tracer_a, 2000, 0)  # warm both paths
    workload(tracer_b, 2000, 0)
    processor.force_flush(60_000)
    cpu, wall = [], []
    seq = 10_000
    for r in range(rounds * max(1, spans // chunk)):
        if r % 20 == 0:  # the exporters hold every span: keep the heap the same size on both sides
            exporter_a.clear()
            exporter_b.clear()
        c0, w0 = time.process_time(), time.perf_counter()
        workload(tracer_a, chunk, seq)
        c1, w1 = time.process_time(), time.perf_counter()
        workload(tracer_b, chunk, seq)
        if not processor.force_flush(60_000):
            sys.exit("force_flush timed out")
        c2, w2 = time.process_time(), time.perf_counter()
        seq += chunk
        cpu.append((c1 - c0, c2 - c1))
        wall.append((w1 - w0, w2 - w1))
    audited.shutdown()
    base.shutdown()
    return {
        "base_us_per_span": round(statistics.median(a for a, _ in cpu) / chunk * 1e6, 2),
        "audited_us_per_span": round(statistics.median(b for _, b in cpu) / chunk * 1e6, 2),
        "cpu_ratio": round(statistics.median(b / a for a, b in cpu if a > 0), 3),
        "wall_ratio": round(statistics.median(b / a for a, b in wall), 3),
        "chunks": len(cpu), "dropped": processor.dropped_spans, "unmapped": processor.unmapped,
        "events_audited": processor.detector.events, "findings": len(processor.findings),
    }


def measure_db(spans: int) -> dict:
    """Evidence spans in a tight loop with ``db=``: sustained rate until all are stored."""
    with tempfile.TemporaryDirectory() as tmp:
        processor = AuditSpanProcessor(db=Path(tmp) / "bench.duckdb")
        provider = TracerProvider()
        provider.add_span_processor(processor)
        tracer = provider.get_tracer("bench")
        w0, c0 = time.perf_counter(), time.process_time()
        instrumented(tracer, spans, 0)
        emitted = time.perf_counter() - w0
        provider.shutdown()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        return {"spans": spans, "emit_s": round(emitted, 2), "stored_s": round(wall, 2), "cpu_s": round(cpu, 2),
                "spans_per_s": int(spans / wall), "dropped": processor.dropped_spans,
                "persisted": processor.persisted, "persist_failures": processor.persist_failures}


def _request(sender: int, batch: int, spans: int = 100, events: int = 10) -> bytes:
    """One OTLP protobuf trace request: ``spans`` spans of ``events`` ownership.progress events,
    on keys of their own (``sender``-``batch``-``span``), seqs increasing per key."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    def kv(k, v):
        return KeyValue(key=k, value=AnyValue(int_value=v) if isinstance(v, int) else AnyValue(string_value=v))

    req = ExportTraceServiceRequest()
    scope = req.resource_spans.add().scope_spans.add()
    for n in range(spans):
        span = scope.spans.add(trace_id=os.urandom(16), span_id=os.urandom(8), name="step",
                               start_time_unix_nano=1_790_000_000_000_000_000)
        key = f"s{sender}/b{batch % 50}/k{n}"
        span.attributes.extend([kv("ownership.workflow_key", key), kv("ownership.epoch", 1 + batch // 50),
                                kv("ownership.worker", f"w{sender}")])
        base = batch * events
        for e in range(events):
            ev = span.events.add(name="ownership.progress", time_unix_nano=1_790_000_000_000_000_000 + base + e)
            ev.attributes.append(kv("ownership.seq", base + e))
    return req.SerializeToString()


def _sender(port: int, sender: int, requests: int, out, start, token: str | None = None) -> None:
    import http.client

    bodies = [_request(sender, b) for b in range(requests)]
    headers = {"Content-Type": "application/x-protobuf", **({"Authorization": f"Bearer {token}"} if token else {})}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    out.put("ready")
    start.wait()  # every sender posts from the same instant, the one the clock starts at
    refused = 0
    for body in bodies:
        while True:
            conn.request("POST", "/v1/traces", body, headers)
            r = conn.getresponse()
            r.read()
            if r.status == 200:
                break
            if r.status != 429:
                raise SystemExit(f"serve answered {r.status}")
            refused += 1
            time.sleep(float(r.getheader("Retry-After", "1")) / 20)  # a busy exporter retries sooner
    out.put(refused)


def measure_serve(requests: int, decoders: int | None = None, auth: bool = False) -> dict:
    """Two sender processes against one ``auditor serve --db`` process on 127.0.0.1; ``auth``: with
    ``--tokens`` (each request carries a bearer token, its records screened by role)."""
    import multiprocessing
    import socket
    import subprocess
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    token = "bench-" + os.urandom(16).hex() if auth else None
    with tempfile.TemporaryDirectory() as tmp:
        tokens = Path(tmp) / "tokens"
        tokens.write_text(f"{token} worker,reader\n" if token else "")
        server = subprocess.Popen([sys.executable, "-m", "auditor", "serve", "--port", str(port), "--db",
                                   str(Path(tmp) / "serve.duckdb"), "-q",
                                   *([] if decoders is None else ["--decoders", str(decoders)]),
                                   *(["--tokens", str(tokens)] if token else [])], cwd=ROOT)

        def health() -> dict:
            req = urllib.request.Request(f"http://127.0.0.1:{port}/healthz",
                                         headers={"Authorization": f"Bearer {token}"} if token else {})
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())

        for _ in range(1200):  # up to 120 s: a loaded machine starts the receiver in 10-20 s
            try:
                health()
                break
            except OSError:
                time.sleep(0.1)
        out, start = multiprocessing.Queue(), multiprocessing.Event()
        senders = [multiprocessing.Process(target=_sender, args=(port, i, requests, out, start, token))
                   for i in range(2)]
        for p in senders:  # bodies are encoded before the clock starts: the senders' cost is not serve's
            p.start()
        for _ in senders:
            assert out.get(timeout=600) == "ready"
        w0 = time.perf_counter()
        start.set()
        total = 2 * requests * 100 * 10
        refused = [out.get(timeout=600) for _ in senders]
        while health()["persisted"] < total and time.perf_counter() - w0 < 600:
            time.sleep(0.05)
        wall = time.perf_counter() - w0
        h = health()
        rss = _peak_rss_mb(server.pid)
        decoders_rss = sum(_peak_rss_mb(pid) for pid in _children(server.pid))
        server.terminate()
        server.wait(60)
        for p in senders:
            p.join(30)
        return {"events": total, "seconds": round(wall, 2), "events_per_s": int(total / wall),
                "refused_requests": sum(refused), "persisted": h["persisted"], "unmapped": h["unmapped"],
                "persist_failures": h["persist_failures"], "peak_rss_mb": rss, "decoders_peak_rss_mb": decoders_rss}


def _peak_rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return 0


def _children(pid: int) -> list[int]:
    """The server's decoder processes (and the spawn machinery's resource tracker)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[1] == str(pid):
                        out.append(int(d))
            except OSError:
                pass
    return out


def load_events(n: int) -> list:
    from auditor.core.model import Event, Kind, Reporter, SinkResult
    from auditor.simulate.scale import generate_log

    kinds, results, reporters = ({m.value: m for m in e} for e in (Kind, SinkResult, Reporter))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "events.jsonl"
        generate_log(path, n, seed=3)
        events = []
        with open(path, "rb") as f:
            for line in f:
                d = json.loads(line)
                get = d.get
                events.append(Event(
                    seq=d["seq"], workflow_key=d["workflow_key"], kind=kinds[d["kind"]], epoch=get("epoch"),
                    worker=get("worker", "unknown"), effect_key=get("effect_key"), sink=get("sink"),
                    sink_result=results.get(get("sink_result")), reporter=reporters.get(get("reporter")),
                    step_id=get("step_id"), ts=get("ts"), event_id=get("event_id")))
    events.sort(key=lambda e: (e.workflow_key, e.seq))
    return events


def measure_detection(n: int, rounds: int) -> dict:
    from auditor.detect.live.detector import detect_events

    events = load_events(n)
    times, found = [], 0
    for _ in range(rounds):
        t = time.process_time()  # CPU time: one thread, so one core's worth of work
        found = len(detect_events(events))
        times.append(time.process_time() - t)
    best, median = min(times), statistics.median(times)
    return {"events": len(events), "findings": found, "keys": len({e.workflow_key for e in events}),
            "median_s": round(median, 3), "events_per_s": int(len(events) / median),
            "best_events_per_s": int(len(events) / best)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spans", type=int, default=20_000, help="spans per round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--events", type=int, default=1_000_000, help="events for the detection throughput")
    ap.add_argument("--db-spans", type=int, default=20_000, help="spans for the sustained rate with db=")
    ap.add_argument("--serve-requests", type=int, default=100,
                    help="requests per sender (1,000 events each) for auditor serve")
    ap.add_argument("--serve-runs", type=int, default=5, help="auditor serve runs (a fresh server each): the median is reported")
    ap.add_argument("--serve-decoders", type=int, default=None, help="auditor serve --decoders (default: serve's own)")
    ap.add_argument("--serve-auth", action="store_true", help="auditor serve --tokens: senders send a bearer token")
    ap.add_argument("--only", choices=["spans", "db", "detection", "serve"], action="append",
                    help="run only these parts (repeatable)")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    args = ap.parse_args()
    parts = set(args.only or ["spans", "db", "detection", "serve"])
    out = {"python": platform.python_version(), "machine": platform.machine(), "load": os.getloadavg()}
    if "serve" in parts:  # two cores: before this process pins itself to one
        runs = [measure_serve(args.serve_requests, args.serve_decoders, args.serve_auth) for _ in range(args.serve_runs)]
        out["serve"] = dict(sorted(runs, key=lambda r: r["events_per_s"])[len(runs) // 2], runs=runs)
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as the target says
    if "spans" in parts:
        out["instrumented"] = measure_spans(instrumented, args.spans, args.rounds)
        out["plain"] = measure_spans(plain, args.spans, args.rounds)
    if "db" in parts:
        out["db"] = measure_db(args.db_spans)
    if "detection" in parts:
        out["detection"] = measure_detection(args.events, max(3, args.rounds // 2))
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print(f"Python {out['python']} on {out['machine']}, load average {out['load']}; the span parts pinned to one core")
    if "instrumented" in out:
        i, p = out["instrumented"], out["plain"]
        print(f"span cost, every span carrying evidence: {i['base_us_per_span']} us -> {i['audited_us_per_span']} us "
              f"CPU per span; ratio {i['cpu_ratio']}x CPU, {i['wall_ratio']}x wall (target <= 1.3x), median of "
              f"{i['chunks']} chunks; {i['events_audited']} events audited, {i['dropped']} dropped")
        print(f"span cost, spans without ownership evidence: ratio {p['cpu_ratio']}x CPU, {p['wall_ratio']}x wall")
    if "db" in out:
        d = out["db"]
        print(f"with db=: {d['spans']:,} evidence spans in a tight loop, all stored after {d['stored_s']} s "
              f"(emitted in {d['emit_s']} s): {d['spans_per_s']:,} spans/s sustained; {d['dropped']} dropped, "
              f"{d['persisted']:,} persisted, {d['persist_failures']} persistence failures")
    if "detection" in out:
        d = out["detection"]
        print(f"live detection: {d['events']:,} events over {d['keys']:,} keys, {d['findings']:,} findings, "
              f"{d['events_per_s']:,} events/s median ({d['best_events_per_s']:,} best) (target >= 200,000)")
    if "serve" in out:
        v = out["serve"]
        for r in v["runs"]:
            print(f"  serve run: {r['events_per_s']:,} events/s ({r['seconds']} s), {r['persisted']:,} persisted, "
                  f"{r['refused_requests']} refused, peak RSS {r['peak_rss_mb']} + {r['decoders_peak_rss_mb']} MB")
        print(f"auditor serve, two senders, median of {len(v['runs'])} runs: {v['events']:,} events stored in {v['seconds']} s = "
              f"{v['events_per_s']:,} events/s (target >= 50,000); {v['refused_requests']} requests refused "
              f"with 429 and retried, {v['persisted']:,} persisted, {v['unmapped']} unmapped, "
              f"{v['persist_failures']} persistence failures; server peak RSS {v['peak_rss_mb']} MB "
              f"(+ {v['decoders_peak_rss_mb']} MB in its decoder processes)")


if __name__ == "__main__":
    main()
