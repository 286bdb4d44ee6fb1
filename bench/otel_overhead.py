"""The live door's costs (issue 3): what the span processor adds per span, and how fast it detects.

1. Cost per span. The same workload (an instrumented step: a span with its ownership attributes
   and one ``ownership.progress`` event; every 50th span a lease acquisition) runs on two
   providers: (A) only ``SimpleSpanProcessor(InMemorySpanExporter())``, (B) the same plus
   ``AuditSpanProcessor``. B's time includes ``force_flush``, so the worker thread's mapping and
   detection are paid inside the measurement, not hidden after it. Chunks of 1,000 spans
   alternate A and B; the ratio is the median of B/A per chunk in process CPU time (all
   threads), with wall time beside it. The filter alone is measured too, with spans that carry
   no ownership evidence. Target: at most 1.3x.
2. Live detection. Events from the preemption simulator's scale generator (a realistic mix with
   handovers, stale evidence and double commits), already parsed and in seq order per key, go
   through ``detect.live.detect_events`` on one thread, timed in CPU time. Target: at least
   200,000 events/s.

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


def load_events(n: int) -> list:
    from auditor.model import Event, Kind, Reporter, SinkResult
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
    from auditor.detect.live import detect_events

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
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    args = ap.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core, as the target says

    out = {"python": platform.python_version(), "machine": platform.machine(),
           "instrumented": measure_spans(instrumented, args.spans, args.rounds),
           "plain": measure_spans(plain, args.spans, args.rounds),
           "detection": measure_detection(args.events, max(3, args.rounds // 2))}
    if args.json:
        print(json.dumps(out, indent=1))
        return
    i, p, d = out["instrumented"], out["plain"], out["detection"]
    print(f"Python {out['python']} on {out['machine']}, pinned to one core")
    print(f"span cost, instrumented spans: {i['base_us_per_span']} us -> {i['audited_us_per_span']} us CPU per span; "
          f"ratio {i['cpu_ratio']}x CPU, {i['wall_ratio']}x wall (target <= 1.3x), median of {i['chunks']} chunks; "
          f"{i['events_audited']} events audited, {i['dropped']} dropped")
    print(f"span cost, spans without ownership evidence: ratio {p['cpu_ratio']}x CPU, {p['wall_ratio']}x wall")
    print(f"live detection: {d['events']:,} events over {d['keys']:,} keys, {d['findings']:,} findings, "
          f"{d['events_per_s']:,} events/s median ({d['best_events_per_s']:,} best) (target >= 200,000)")


if __name__ == "__main__":
    main()
