"""Evidence written the way teams' loggers write it (SPEC section 2, "Logs as teams write them"):
one list of canonical events rendered as structlog-style nested JSON (messages carrying ids), zap
JSON (epoch-seconds ``ts``, ``msg``), logfmt (quoted and escaped values), Elastic Common Schema
(``event.action``, ``labels.*``) and a noisy log (three irrelevant lines per evidence line), each
with the vocabulary that reads it and its canonical twin (the same events in the contract's shape).

``write_fixtures(folder)`` writes the five fixtures of ``fixtures/`` (``python -m
auditor.simulate.shapes fixtures``; tests/explain/test_shapes.py checks they are current); ``noisy_lines``
feeds ``bench/noisy.py``. The truth is the canonical twin: whatever the auditor finds there, it
must find in the shaped log, at the shaped log's own lines.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from .scenarios import SCENARIOS, Event

_T0 = datetime(2026, 7, 26, 2, 0, tzinfo=timezone.utc)
_T0_S = int(_T0.timestamp())


def _rfc3339(at: int, millis: bool = False) -> str:
    """The wall-clock time of the ``at``-th line of a scenario (one a minute)."""
    t = _T0 + timedelta(minutes=at)
    return t.strftime("%Y-%m-%dT%H:%M:%S.000Z" if millis else "%Y-%m-%dT%H:%M:%SZ")


def _kind(ev: Event) -> str:
    """The kind as a logger names it: a rejection and a lost heartbeat are kinds of their own."""
    if ev.get("sink_result") == "rejected":
        return "rejected"
    if ev.get("heartbeat") == "lost":
        return "heartbeat_lost"
    if ev.get("heartbeat") == "ok":
        return "heartbeat_ok"
    return ev["kind"]


# structlog: nested objects, the message in "event", wordings that carry ids.

_STRUCTLOG = {
    "lease_acquired": "lease acquired for {workflow_key} by {worker}",
    "progress": "exported {rows} rows of {workflow_key}",
    "effect_attempted": "publishing {effect_key} to {sink}",
    "rejected": "{sink} refused {effect_key}: stale fencing token",
    "effect_committed": "published {effect_key} to {sink}",
    "outcome_verified": "verified {effect_key}",
}


def structlog(ev: Event, at: int) -> dict[str, Any]:
    out: dict[str, Any] = {"timestamp": _rfc3339(at), "level": "info", "logger": "ledger.worker",
                           "event": _STRUCTLOG[_kind(ev)].format(**_blank(ev))}
    lease = {"revision": ev["seq"]}
    if "epoch" in ev:
        lease["token"] = ev["epoch"]
    out["lease"] = lease
    out["job"] = ev["workflow_key"]
    out["worker"] = ev["worker"]
    if "effect_key" in ev:
        out["effect"] = {"key": ev["effect_key"], **({"sink": ev["sink"]} if "sink" in ev else {})}
    out["reporter"] = ev["reporter"]
    return out


def _blank(ev: Event) -> dict[str, Any]:
    return {"workflow_key": "", "worker": "", "effect_key": "", "sink": "", "rows": 0, **ev}


# zap: flat JSON, epoch seconds in "ts", a constant "msg".

_ZAP = {"lease_acquired": "lease acquired", "progress": "progress", "heartbeat_ok": "heartbeat ok",
        "heartbeat_lost": "heartbeat lost", "effect_attempted": "charge attempted",
        "rejected": "charge refused by fence", "effect_committed": "charge committed",
        "outcome_verified": "outcome verified"}


def _epoch_s(at: int) -> float:
    return _T0_S + 60 * at + 0.25


def zap(ev: Event, at: int) -> dict[str, Any]:
    out: dict[str, Any] = {"level": "info", "ts": _epoch_s(at), "caller": "lease/owner.go:88",
                           "msg": _ZAP.get(_kind(ev), _kind(ev).replace("_", " ")), "job": ev["workflow_key"],
                           "rev": ev["seq"]}
    if "epoch" in ev:
        out["token"] = ev["epoch"]
    out["worker"] = ev["worker"]
    if "effect_key" in ev:
        out["idempotencyKey"] = ev["effect_key"]
    if "sink" in ev:
        out["sink"] = ev["sink"]
    if "step_id" in ev:
        out["step_id"] = ev["step_id"]
    out["reporter"] = ev["reporter"]
    return out


# logfmt: slog's TextHandler, values quoted when they hold spaces, quotes or =.

_LOGFMT = {"lease_acquired": "claimed job", "progress": "step done", "effect_attempted": "charge sent",
           "rejected": "charge refused", "effect_committed": "charge committed",
           "outcome_verified": "charge verified"}


def _value(v: Any) -> str:
    text = str(v)
    if text and not any(c in text for c in ' ="\\\t\n') and text.isprintable():
        return text
    return json.dumps(text, ensure_ascii=False)


def logfmt(ev: Event, at: int) -> str:
    pairs: list[tuple[str, Any]] = [("time", _rfc3339(at)), ("level", "INFO"), ("msg", _LOGFMT[_kind(ev)]),
                                    ("job", ev["workflow_key"]), ("rev", ev["seq"])]
    if "epoch" in ev:
        pairs.append(("token", ev["epoch"]))
    pairs.append(("worker", ev["worker"]))
    if "effect_key" in ev:
        pairs.append(("idempotency_key", ev["effect_key"]))
    if "sink" in ev:
        pairs.append(("sink", ev["sink"]))
    if "step_id" in ev:
        pairs.append(("step_id", ev["step_id"]))
    pairs.append(("reporter", ev["reporter"]))
    if "note" in ev:
        pairs.append(("note", ev["note"]))
    return " ".join(f"{k}={_value(v)}" for k, v in pairs)


# ECS: nested objects and flat dotted keys, the kind in event.action, keys in labels (strings).

_ECS = {"lease_acquired": "lease-acquired", "progress": "export-progress", "effect_attempted": "publish-started",
        "rejected": "publish-rejected", "effect_committed": "publish-completed",
        "outcome_verified": "publish-verified"}


def ecs(ev: Event, at: int) -> dict[str, Any]:
    labels = {"job": ev["workflow_key"], "reporter": ev["reporter"]}
    if "epoch" in ev:
        labels["fencing_token"] = str(ev["epoch"])
    if "effect_key" in ev:
        labels["effect_key"] = ev["effect_key"]
    action = _ECS[_kind(ev)]
    return {"@timestamp": _rfc3339(at, millis=True), "log.level": "info",
            "message": f"{action.replace('-', ' ')} ({ev['workflow_key']})", "ecs.version": "8.11.0",
            "event": {"action": action, "dataset": "ledger.worker", "sequence": ev["seq"]},
            "labels": labels, "host": {"name": ev["worker"]}, "service": {"name": "ledger"}}


# A noisy log: zap-like evidence, three lines nobody needs around each.

_NOISE: tuple[Callable[[random.Random], str], ...] = (
    lambda r: "GET /healthz 200",
    lambda r: f"GET /api/orders/{r.randrange(1000, 99999)} 200 {r.randrange(1, 250)}ms",
    lambda r: f"POST /api/carts/{r.randrange(1000, 99999)}/items 201 {r.randrange(1, 250)}ms",
    lambda r: f"cache hit ratio 0.{r.randrange(10, 99)}",
    lambda r: f"metrics flushed ({r.randrange(100, 5000)} series)",
    lambda r: f"db pool: {r.randrange(0, 20)} idle, {r.randrange(0, 20)} busy",
    lambda r: "config reloaded",
)


def noise(rng: random.Random, at: int) -> dict[str, Any]:
    return {"level": rng.choice(("debug", "info")), "ts": _T0_S + 60 * at - rng.randrange(1, 59) + 0.5,
            "caller": "http/server.go:214", "msg": rng.choice(_NOISE)(rng)}


def noisy_lines(events: list[Event], seed: int = 7, per_event: int = 3) -> Iterator[str]:
    """Every event as a zap line, ``per_event`` noise lines before it (one JSON line each)."""
    rng = random.Random(seed)
    for at, ev in enumerate(events, 1):
        for _ in range(per_event):
            yield json.dumps(noise(rng, at))
        yield json.dumps(zap(ev, at))


def canonical(ev: Event, ts: Any) -> dict[str, Any]:
    """The twin's line: the event's fields under their own names, ``ts`` as the shape writes it."""
    out = {k: v for k, v in ev.items() if k not in ("rows", "note")}
    out["ts"] = ts
    return out


#: name -> (scenario, file suffix, the line of one event, the twin's ts of the ``at``-th event)
SHAPES: dict[str, tuple[str, str, Callable[[Event, int], Any], Callable[[int], Any]]] = {
    "structlog_nested_messages_with_ids": ("seed", ".jsonl", structlog, _rfc3339),
    "zap_epoch_seconds_ts_and_msg": ("fenced_payments", ".jsonl", zap, _epoch_s),
    "logfmt_quoted_and_escaped_values": ("zombie_reexecution", ".logfmt", logfmt, _rfc3339),
    "ecs_event_action_and_labels": ("ecs_takeover", ".jsonl", ecs, lambda at: _rfc3339(at, millis=True)),
    "noisy_three_irrelevant_lines_per_evidence_line": ("seed", ".jsonl", zap, _epoch_s),
}


def shaped_text(name: str) -> str:
    """The shaped log of fixture ``name``, as written to ``fixtures/``."""
    scenario, _suffix, render, _ts = SHAPES[name]
    events = SCENARIOS[scenario]
    if name.startswith("noisy_"):
        return "".join(line + "\n" for line in noisy_lines(events))
    lines = [render(ev, at) for at, ev in enumerate(events, 1)]
    return "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)


def canonical_text(name: str) -> str:
    scenario, _suffix, _render, ts = SHAPES[name]
    return "".join(json.dumps(canonical(ev, ts(at))) + "\n" for at, ev in enumerate(SCENARIOS[scenario], 1))


def write_fixtures(folder: Path) -> list[Path]:
    """Write each shape's log and its canonical twin (``<name>_canonical.jsonl``) into ``folder``;
    the vocabularies (``<name>.map.toml``) are written by hand and kept beside them."""
    written = []
    for name, (_scenario, suffix, _render, _ts) in SHAPES.items():
        for path, text in ((folder / f"{name}{suffix}", shaped_text(name)),
                           (folder / f"{name}_canonical.jsonl", canonical_text(name))):
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written


if __name__ == "__main__":
    import sys

    for p in write_fixtures(Path(sys.argv[1] if len(sys.argv) > 1 else "fixtures")):
        print(p)
