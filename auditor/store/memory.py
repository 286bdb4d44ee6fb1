"""How much memory DuckDB may use: a share of what this machine has available, and more when a
statement needs it.

DuckDB keeps the store's pages, hash tables and sorts within its ``memory_limit`` and writes what
does not fit to its temporary directory. A fixed limit fails both ways: too high on a small
machine (or container), and a hard wall for the few operators that cannot spill (an audit of 40
million events stopped at a fixed 800 MB). So the limit is ``SHARE`` of the memory available when
the store opens (``/proc/meminfo``'s MemAvailable, or a cgroup's limit when that is lower), never
under ``FLOOR``; ``AUDITOR_MEMORY_LIMIT`` sets it instead. Should a statement still run out, the
store raises the limit (``raised``: doubled, up to ``CEILING`` of the memory available) and runs
it again: an audit spends more memory rather than fail.
"""

from __future__ import annotations

import os
import re

ENV = "AUDITOR_MEMORY_LIMIT"
#: DuckDB's share of the available memory; the audit's Python side (a batch of keys at a time,
#: whatever the log's size) comes on top.
SHARE = 1 / 32
#: Never less than this (DuckDB needs some room for any hash table).
FLOOR = 256 << 20
#: How far a statement that runs out of memory may raise the limit: this share of what is available.
CEILING = 1 / 2
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def size_bytes(size: str) -> float:
    """A DuckDB memory size (``800MB``, ``1.5 GiB``) in bytes; infinity for one it does not
    read (DuckDB decides what it means: nothing is lowered under it)."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([a-zA-Z]*)\s*", size)
    unit = _UNITS.get(m.group(2).lower()) if m else None
    return float("inf") if unit is None else float(m.group(1)) * unit


def available() -> int:
    """Bytes of memory this process could still be given: the kernel's MemAvailable, or the
    room left under the cgroup's limit (a container) when that is less."""
    found = []
    try:
        with open("/proc/meminfo") as f:
            found += [int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")]
    except OSError:
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            top = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if top != "max":
            found.append(max(int(top) - used, 0))
    except (OSError, ValueError):
        pass
    if not found:  # not Linux: the physical memory, as a last resort
        try:
            found.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
        except (AttributeError, OSError, ValueError):
            found.append(8 << 30)
    return min(found)


def limit() -> str:
    """DuckDB's memory limit for a store opened now: ``AUDITOR_MEMORY_LIMIT``, or ``SHARE`` of the
    memory available (at least ``FLOOR``), in whole megabytes."""
    given = os.environ.get(ENV, "").strip()
    if given:
        return given
    return f"{max(FLOOR, int(available() * SHARE)) >> 20}MiB"


def raised(current: str) -> str | None:
    """The limit to try a statement again under after it ran out of ``current``: double it, up to
    ``CEILING`` of the memory available; None when it cannot go higher, or when
    ``AUDITOR_MEMORY_LIMIT`` set it (a limit the user gave is kept)."""
    if os.environ.get(ENV, "").strip():
        return None
    now = size_bytes(current)
    top = available() * CEILING
    if now == float("inf") or now >= top:
        return None
    return f"{int(min(now * 2, top)) >> 20}MiB"
