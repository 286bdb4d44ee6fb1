"""What the simulation is made of, as data: its modes and injections, the steps of a run, the
lease timing, a run's bookkeeping, and the files it writes."""

from __future__ import annotations

import gzip
import io
import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import IO


class SimulateError(ValueError):
    """A simulation option is out of range or unknown."""


class Mode(StrEnum):
    """How the tool gateway and the destinations protect an effect."""

    FENCED = "fenced"  # stable key per (run_id, step_id); the gateway checks the epoch
    UNFENCED = "unfenced"  # no epoch check, no idempotency key: every request is applied
    KEY_INCLUDES_EPOCH = "key-includes-epoch"  # epoch checked, but the key changes with it


class Injection(StrEnum):
    """Where the first owner of a run is preempted."""

    COMMIT_BEFORE_CHECKPOINT = "commit_before_checkpoint"  # effect recorded, checkpoint never written
    SLOW_MODEL_CALL = "slow_model_call"  # the lease expires while a model call is in flight
    LATE_ACK = "late_ack"  # a request sent before the new grant is answered after it
    LATE_CHECKPOINT = "late_checkpoint"  # a checkpoint of the old epoch lands after the new grant
    CRASH = "crash"  # the owner dies before any effect: a clean handover (scale logs only)
STEPS = ("plan", "charge", "receipt")
SINKS = {"charge": "bank", "receipt": "mailer"}
CHARGE_CENTS = 5000
TTL_MS = 10_000
WORKERS = tuple(f"worker-{i:02d}" for i in range(1, 13))


T0 = datetime(2026, 9, 6, 2, 0, tzinfo=UTC)
EPOCH_STRIDE = 64  # epochs of one run stay below base + this (generate_log chains runs on a key)


@dataclass(frozen=True, slots=True)
class LeaseTiming:
    """Heartbeat-driven leases (seed 000): the coordinator grants ``lease_ms`` at each claim and
    each successful heartbeat, and reclaims the job once ``lease_until`` has passed; the owner
    heartbeats every ``heartbeat_ms`` (within half a second), one heartbeat in ``LATE_ONE_IN`` is
    late by up to ``jitter_ms`` (GC, a busy event loop), and ``miss_share`` of them never arrive. A lease shorter than
    ``misses * H + J`` lets an ordinary delay revoke a worker that is still running."""

    lease_ms: int
    heartbeat_ms: int
    jitter_ms: int
    miss_share: float = 0.0

    def __post_init__(self) -> None:
        if self.lease_ms <= 0 or self.heartbeat_ms <= 0 or self.jitter_ms < 0:
            raise SimulateError("lease and heartbeat period must be positive, jitter 0 or more")
        if not 0.0 <= self.miss_share < 1.0:
            raise SimulateError(f"missed heartbeat share is {self.miss_share}, expected 0 <= share < 1")


#: One heartbeat in this many is delayed by up to the jitter; the others are on time.
LATE_ONE_IN = 5


#: Where a simulated job runs its long tool call, for lease health's grouping.
TOOLS = ("browser", "search", "code")


def rfc3339(ms: int) -> str:
    """Simulated milliseconds since T0 as an RFC 3339 time."""
    return f"{T0 + timedelta(milliseconds=ms):%Y-%m-%dT%H:%M:%S}.{ms % 1000:03d}Z"


@dataclass(slots=True)
class Run:
    """One run (one workflow key): the lease store's, checkpoint store's and sinks' view of it."""

    index: int
    run_id: str
    workflow_key: str
    mode: Mode
    injection: Injection | None
    first_epoch: int
    epoch: int = 0  # the lease store's current epoch: the highest granted
    holder: str | None = None
    checkpoint: int = -1  # index in STEPS of the last accepted checkpoint
    applied: Counter[str] = field(default_factory=Counter)  # effect key -> times the sink applied it
    applied_steps: set[str] = field(default_factory=set)
    # What the truth needs, as the log saw it:
    key_epochs: dict[str, set[int]] = field(default_factory=dict)  # effect key -> committing epochs
    step_commits: dict[str, set[tuple[int, str]]] = field(default_factory=dict)  # step -> (epoch, key)
    pending: dict[tuple[int, str], list[tuple[int, bool, bool]]] = field(default_factory=dict)  # open
    # attempts: (seq, stale, unauthorized)
    cents: int = 0
    # SPEC section 8, the coordinator's view as the log records it (None: no mandate).
    mandate: str | None = None
    expires_ms: int = 0
    revoked: bool = False
    failed: bool = False  # a revalidation said terminate, no grant since
    resume_pending: bool = False  # an acquisition after the first, not revalidated since
    acquisitions: int = 0
    revalidates: bool = True  # whether this run's new owners revalidate before acting
    lease_until: int = 0  # the coordinator's expiry of the current epoch's lease (lease timing only)
    revoked_live: int = 0  # takeovers of an owner that was still running (lease timing only)
    running: set[int] = field(default_factory=set)  # epochs whose worker has not finished
    done: bool = False  # some owner finished every step: the job is released, never reclaimed


def open_text(path: str | Path) -> IO[str]:
    """A text file to write, gzip-compressed when the path ends in ``.gz``."""
    if str(path).endswith(".gz"):  # mtime 0: the same simulation gives the same bytes
        return io.TextIOWrapper(gzip.GzipFile(str(path), "wb", mtime=0), encoding="utf-8")
    return open(path, "w", encoding="utf-8")


def expected_json(triples: Iterable[tuple[str, str, int]]) -> str:
    """The ``--expect`` document, one ``[grade, workflow_key, seq]`` per line."""
    rows = ",\n".join("  " + json.dumps(list(t)) for t in triples)
    return '{"findings": [\n' + rows + "\n]}\n" if rows else '{"findings": []}\n'
