"""A corpus of team log shapes with known truth, for ``auditor map`` (issue 43): simulated runs
(``auditor.simulate``, whose truth is every ``(grade, workflow_key, seq)`` the auditor must
report) rendered the way each team's logger writes, in that logger's own names, not ours.

Families (each the way its documentation says it writes):

- ``structlog``: ``JSONRenderer`` output, the message in ``event``, ``logger`` and ``timestamp``,
  bound values as they were bound (a nested ``lease`` dict with the revision, token and holder),
  messages that carry ids and several wordings per kind;
- ``zap``: production JSON (``level``, epoch-seconds ``ts``, ``caller``, ``msg``), ``zap.Object``
  groups (``lease``, ``worker``), numbers logged as strings (``zap.String("rev", ...)``);
- ``logrus``: ``JSONFormatter`` (``level``, ``msg``, ``time``), flat ``WithFields`` names;
- ``slog``: ``JSONHandler`` (``time``, ``level``, ``msg``), ``slog.Group`` nesting, ids in hex;
- ``logfmt``: slog's ``TextHandler``, the wordings of issue 45 (``posting ledger entry``);
- ``ecs``: ecs-logging (``@timestamp``, ``log.level``, ``message``, ``ecs.version``), the kind in
  ``event.action`` beside a constant ``event.kind``, ``event.sequence``, ``event.provider``,
  ``service.node.name``, string ``labels``;
- ``otel``: OTLP/JSON log records (``resourceLogs``/``scopeLogs``/``logRecords``, ``intValue``
  as strings, the message as the string ``body``);
- ``noisy``: a zap service where 3 of 4 lines are unrelated requests and metrics;
- ``etcd``: a coordinator's leader election in client-go's words (``successfully acquired lease
  NAME``, ``successfully renewed lease NAME``), the fencing token as the election key's create
  revision, the worker's copy (``leader_rev``) and the sink's (``fence``) never on one line;
- ``zookeeper``: logstash-logback-encoder JSON from a Curator lock recipe, the ``zxid`` in hex as
  the order and the lock znode's ``czxid`` (hex) as the token.

``corpus(folder)`` writes every shape run and returns them with their truth; ``bench/map_corpus.py``
prints the table and ``tests/normalize/test_map_corpus.py`` asserts it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from auditor.simulate import simulate
from auditor.simulate.parts import expected_json

Event = dict[str, Any]

#: The simulated runs every family renders: a fence that holds, none, and keys that include the epoch.
RUNS: tuple[tuple[str, int], ...] = (("fenced", 3), ("unfenced", 5), ("key-includes-epoch", 7))


def _word(ev: Event) -> str:
    """What happened, as a logger tells it: a refusal and a verification are their own."""
    if ev.get("sink_result") == "rejected":
        return "rejected"
    return ev["kind"]


def _pick(options: tuple[str, ...], ev: Event) -> str:
    """One of several wordings, fixed by the event (its seq), so each kind is said several ways."""
    return options[ev["seq"] % len(options)]


def _epoch_s(ev: Event) -> float:
    return round(datetime.fromisoformat(ev["ts"].replace("Z", "+00:00")).timestamp(), 3)


def _role(ev: Event) -> str:
    return ev["reporter"]


def _hexid(text: str, n: int = 12) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:n]


def _given(ev: Event, names: dict[str, str], convert: Callable[[Any], Any] = lambda v: v) -> dict[str, Any]:
    """The event's optional members a logger writes, under the logger's names, in the order given."""
    return {name: convert(ev[field]) for field, name in names.items() if field in ev}


# structlog --------------------------------------------------------------------------------------

_STRUCTLOG = {
    "lease_acquired": ("lease acquired for {workflow_key} by {worker}", "acquired lease {workflow_key}"),
    "progress": ("checkpoint {step_id} saved", "checkpoint written for {workflow_key}", "step {step_id} completed"),
    "effect_attempted": ("charging {effect_key}", "sending {effect_key} to the bank"),
    "rejected": ("{sink} refused {effect_key}: stale fencing token",),
    "effect_committed": ("charged {effect_key}", "ledger entry applied for {effect_key}"),
    "outcome_verified": ("verified {effect_key}",),
}


def structlog(ev: Event) -> dict[str, Any]:
    word = _word(ev)
    msg = _pick(_STRUCTLOG[word], ev).format(**{"step_id": "-", "effect_key": "", "sink": "", **ev})
    out: dict[str, Any] = {"job": ev["workflow_key"], "lease": {"revision": ev["seq"], "holder": ev["worker"]}}
    out["lease"].update(_given(ev, {"epoch": "token"}))
    out.update(_given(ev, {"effect_key": "idem", "sink": "destination", "step_id": "step"}))
    out["role"] = _role(ev)
    out.update({"event": msg, "level": "info", "logger": f"payments.{_role(ev)}", "timestamp": ev["ts"]})
    return out


# zap --------------------------------------------------------------------------------------------

_ZAP = {
    "lease_acquired": ("lease acquired", "became leader"),
    "progress": ("checkpoint stored", "heartbeat ok"),
    "effect_attempted": ("charge attempted", "calling payment provider"),
    "rejected": ("charge refused by fence",),
    "effect_committed": ("charge committed", "payment captured"),
    "outcome_verified": ("outcome verified",),
}


def zap(ev: Event) -> dict[str, Any]:
    out: dict[str, Any] = {"level": "info", "ts": _epoch_s(ev), "caller": "lease/owner.go:88",
                           "msg": _pick(_ZAP[_word(ev)], ev)}
    out["lease"] = {"name": ev["workflow_key"], "rev": str(ev["seq"]), **_given(ev, {"epoch": "epoch"}, str)}
    out["worker"] = {"id": ev["worker"], "pid": 4100 + len(ev["worker"])}
    out.update(_given(ev, {"effect_key": "dedupeKey", "sink": "target", "step_id": "step"}))
    out["component"] = _role(ev)
    return out


# logrus -----------------------------------------------------------------------------------------

_LOGRUS = {
    "lease_acquired": ("Claimed task", "Task claimed"),
    "progress": ("Checkpoint persisted", "Keepalive sent"),
    "effect_attempted": ("Submitting transfer", "Transfer submitted"),
    "rejected": ("Transfer rejected: fencing token is stale",),
    "effect_committed": ("Transfer applied", "Transfer posted to ledger"),
    "outcome_verified": ("Transfer reconciled",),
}


def logrus(ev: Event) -> dict[str, Any]:
    out: dict[str, Any] = {"task_id": ev["workflow_key"], "offset": ev["seq"], "instance": ev["worker"]}
    out.update(_given(ev, {"epoch": "generation", "effect_key": "request_key", "sink": "downstream",
                           "step_id": "step_name"}))
    out["source"] = _role(ev)
    out.update({"level": "info", "msg": _pick(_LOGRUS[_word(ev)], ev), "time": ev["ts"].replace("Z", "+00:00")})
    return dict(sorted(out.items()))  # logrus sorts its keys


# slog JSONHandler, ids in hex -------------------------------------------------------------------

_SLOG = {
    "lease_acquired": ("lock acquired", "ownership taken"),
    "progress": ("progress", "lease renewed"),
    "effect_attempted": ("writing record", "write started"),
    "rejected": ("write fenced",),
    "effect_committed": ("record written", "write done"),
    "outcome_verified": ("record verified",),
}


def slog(ev: Event) -> dict[str, Any]:
    out: dict[str, Any] = {"time": ev["ts"], "level": "INFO", "msg": _pick(_SLOG[_word(ev)], ev),
                           "run": ev["workflow_key"]}
    out["lease"] = {"seq": ev["seq"], **_given(ev, {"epoch": "epoch"})}
    out["owner"] = _hexid(ev["worker"], 8)
    if "effect_key" in ev:
        out["op"] = {"id": _hexid(ev["effect_key"], 16), **({"dst": ev["sink"]} if "sink" in ev else {})}
    out.update(_given(ev, {"step_id": "stage"}))
    out["role"] = _role(ev)
    return out


# logfmt (slog TextHandler) ----------------------------------------------------------------------

_LOGFMT = {
    "lease_acquired": ("claimed job", "job claimed"),
    "progress": ("checkpoint saved", "lease extended"),
    "effect_attempted": ("posting ledger entry",),
    "rejected": ("ledger refused entry",),
    "effect_committed": ("ledger entry posted",),
    "outcome_verified": ("ledger entry verified",),
}


def _value(v: Any) -> str:
    text = str(v)
    if text and not any(c in text for c in ' ="\\\t\n') and text.isprintable():
        return text
    return json.dumps(text, ensure_ascii=False)


def logfmt(ev: Event) -> str:
    pairs: list[tuple[str, Any]] = [("time", ev["ts"]), ("level", "INFO"), ("msg", _pick(_LOGFMT[_word(ev)], ev)),
                                    ("job", ev["workflow_key"]), ("rev", ev["seq"])]
    pairs += [*_given(ev, {"epoch": "token"}).items(), ("worker", ev["worker"]),
              *_given(ev, {"effect_key": "idempotency_key", "sink": "ledger", "step_id": "step"}).items()]
    return " ".join(f"{k}={_value(v)}" for k, v in pairs)


# ECS --------------------------------------------------------------------------------------------

_ECS = {
    "lease_acquired": ("lease-acquired",), "progress": ("checkpoint-saved", "lease-renewed"),
    "effect_attempted": ("payment-started",), "rejected": ("payment-rejected",),
    "effect_committed": ("payment-completed", "payment-captured"), "outcome_verified": ("payment-verified",),
}


def ecs(ev: Event) -> dict[str, Any]:
    action = _pick(_ECS[_word(ev)], ev)
    labels: dict[str, Any] = {"job": ev["workflow_key"]}
    labels.update(_given(ev, {"epoch": "fencing_token"}, str))
    labels.update(_given(ev, {"effect_key": "idempotency", "step_id": "step"}))
    out: dict[str, Any] = {"@timestamp": ev["ts"], "log.level": "info",
                           "message": f"{action.replace('-', ' ')} ({ev['workflow_key']})", "ecs.version": "1.6.0",
                           "event": {"action": action, "kind": "event", "category": ["process"],
                                     "sequence": ev["seq"], "provider": _role(ev)},
                           "service": {"name": "payments", "node": {"name": ev["worker"]}}, "labels": labels}
    if "sink" in ev:
        out["destination"] = {"address": ev["sink"]}
    return out


# OpenTelemetry log records (OTLP/JSON) ----------------------------------------------------------

_OTEL = {
    "lease_acquired": ("lease acquired",), "progress": ("checkpoint recorded", "heartbeat"),
    "effect_attempted": ("payment request sent",), "rejected": ("payment request rejected",),
    "effect_committed": ("payment applied",), "outcome_verified": ("payment verified",),
}


def _attr(key: str, v: Any) -> dict[str, Any]:
    value = {"intValue": str(v)} if isinstance(v, int) else {"stringValue": str(v)}
    return {"key": key, "value": value}


def otel(ev: Event) -> dict[str, Any]:
    named = {"workflow.key": ev["workflow_key"], "lease.revision": ev["seq"], **_given(ev, {"epoch": "lease.epoch"}),
             "worker.id": ev["worker"], **_given(ev, {"effect_key": "payment.idempotency_key",
                                                      "sink": "peer.service", "step_id": "workflow.step"})}
    attrs = [_attr(k, v) for k, v in named.items()]
    nanos = str(int(_epoch_s(ev) * 1000) * 1_000_000)
    record = {"timeUnixNano": nanos, "observedTimeUnixNano": nanos, "severityNumber": 9, "severityText": "INFO",
              "body": {"stringValue": _pick(_OTEL[_word(ev)], ev)}, "attributes": attrs}
    return {"resourceLogs": [{"resource": {"attributes": [_attr("service.name", "payments")]},
                              "scopeLogs": [{"scope": {"name": f"payments.{_role(ev)}"}, "logRecords": [record]}]}]}


# a noisy service: three unrelated lines per evidence line ---------------------------------------

_NOISE = ("GET /healthz 200", "GET /api/orders/{n} 200 {m}ms", "cache hit ratio 0.{m}",
          "metrics flushed ({n} series)", "db pool: {m} idle, 3 busy", "config reloaded")


def noisy(ev: Event) -> list[dict[str, Any]]:
    out = []
    for i in range(3):
        n = ev["seq"] * 7 + i
        out.append({"level": "debug", "ts": _epoch_s(ev) - 0.5 + i * 0.1, "caller": "http/server.go:214",
                    "msg": _NOISE[n % len(_NOISE)].format(n=1000 + n * 37 % 9000, m=10 + n % 89)})
    line = zap(ev)
    return out + [line]


# etcd / client-go leader election ---------------------------------------------------------------

def _create_rev(epoch: int) -> int:
    return 1000 + epoch * 40  # the election key's create revision: grows with each new leader


def etcd(ev: Event) -> dict[str, Any]:
    key, word = ev["workflow_key"], _word(ev)
    out: dict[str, Any] = {"ts": _epoch_s(ev), "caller": "", "msg": ""}
    if word == "lease_acquired":
        out.update(caller="leaderelection/leaderelection.go:258", msg=f"successfully acquired lease {key}",
                   identity=ev["worker"], leader_rev=_create_rev(ev["epoch"]))
    elif word == "progress":
        msg = _pick((f"successfully renewed lease {key}", "checkpoint saved"), ev)
        out.update(caller="worker/run.go:77", msg=msg, identity=ev["worker"], leader_rev=_create_rev(ev["epoch"]))
    elif word in ("effect_attempted",):
        out.update(caller="worker/run.go:120", msg="applying ledger entry", identity=ev["worker"],
                   leader_rev=_create_rev(ev["epoch"]), entry=ev["effect_key"])
    elif word == "outcome_verified":
        out.update(caller="audit/verify.go:40", msg="ledger entry verified", entry=ev["effect_key"])
    else:  # the sink: its own copy of the token, never on a worker's line
        msg = "rejected entry: fence token superseded" if word == "rejected" else "applied ledger entry"
        out.update(caller="ledger/apply.go:61", msg=msg, identity=ev["worker"], fence=_create_rev(ev["epoch"]),
                   entry=ev["effect_key"], ledger=ev.get("sink", "ledger"))
    if "step_id" in ev:
        out["step"] = ev["step_id"]
    out["lease"] = key
    out["revision"] = ev["seq"]
    return out


# ZooKeeper (Curator lock recipe, logstash-logback-encoder) ---------------------------------------

def _zxid(n: int) -> str:
    return hex((2 << 32) + n)


_ZK = {
    "lease_acquired": ("Acquired lock {path}",), "progress": ("Checkpoint saved for {path}", "Session heartbeat"),
    "effect_attempted": ("Publishing record",), "rejected": ("Record refused: stale lock holder",),
    "effect_committed": ("Record published",), "outcome_verified": ("Record verified",),
}


def zookeeper(ev: Event) -> dict[str, Any]:
    path = f"/locks/{ev['workflow_key']}"
    out: dict[str, Any] = {"@timestamp": ev["ts"], "@version": "1",
                           "message": _pick(_ZK[_word(ev)], ev).format(path=path),
                           "logger_name": f"com.acme.payments.{_role(ev).capitalize()}", "thread_name": "main",
                           "level": "INFO", "level_value": 20000, "lockPath": path, "zxid": _zxid(ev["seq"])}
    if "epoch" in ev:
        out["czxid"] = _zxid(ev["epoch"] * 1000)
    out["clientId"] = ev["worker"]
    if "effect_key" in ev:
        out["recordKey"] = ev["effect_key"]
    if "step_id" in ev:
        out["step"] = ev["step_id"]
    return out


@dataclass(frozen=True)
class Family:
    name: str
    suffix: str
    render: Callable[[Event], Any]
    key: Callable[[str], str] = lambda k: k  # the truth's workflow key as the shape writes it
    seq: Callable[[int], int] = lambda n: n  # the truth's seq as the shape writes it


FAMILIES: tuple[Family, ...] = (
    Family("structlog", ".jsonl", structlog), Family("zap", ".jsonl", zap), Family("logrus", ".jsonl", logrus),
    Family("slog_hex_ids", ".jsonl", slog), Family("logfmt", ".log", logfmt), Family("ecs", ".jsonl", ecs),
    Family("otel_records", ".json", otel), Family("noisy", ".jsonl", noisy), Family("etcd_election", ".jsonl", etcd),
    Family("zookeeper_hex_zxid", ".jsonl", zookeeper, lambda k: f"/locks/{k}", lambda n: int(_zxid(n), 16)),
)


@dataclass(frozen=True)
class ShapeRun:
    family: str
    mode: str
    seed: int
    path: Path
    truth: frozenset[tuple[str, str, int]]


def text(family: Family, events: list[Event]) -> str:
    lines: list[str] = []
    for ev in events:
        got = family.render(ev)
        for one in got if isinstance(got, list) else [got]:
            lines.append(one if isinstance(one, str) else json.dumps(one))
    return "".join(line + "\n" for line in lines)


def corpus(folder: Path, runs: int = 8, families: tuple[Family, ...] = FAMILIES) -> list[ShapeRun]:
    """Write every family's rendering of every simulated run into ``folder``."""
    out = []
    for mode, seed in RUNS:
        sim = simulate(runs, seed, mode)
        for family in families:
            path = folder / f"{family.name}-{mode}-{seed}{family.suffix}"
            path.write_text(text(family, sim.events), encoding="utf-8")
            truth = frozenset((g, family.key(k), family.seq(s)) for g, k, s in sim.truth)
            expected = folder / f"{family.name}-{mode}-{seed}.expected.json"
            expected.write_text(expected_json(sorted(truth, key=lambda t: (t[1], t[2], t[0]))), encoding="utf-8")
            out.append(ShapeRun(family.name, mode, seed, path, truth))
    return out


if __name__ == "__main__":
    import sys

    where = Path(sys.argv[1] if len(sys.argv) > 1 else "corpus")
    where.mkdir(parents=True, exist_ok=True)
    written = corpus(where)
    print(f"{len(written)} shape runs ({len(FAMILIES)} families x {len(RUNS)} runs) and their truth in {where}/")
