"""DuckDB's memory limit follows the machine (auditor.store.memory), and a statement that runs out
is run again under a higher one."""

from __future__ import annotations

import duckdb
import pytest

from auditor import store
from auditor.store import memory


def _limit(con) -> str:
    return con.execute("SELECT current_setting('memory_limit')").fetchone()[0]


def test_the_limit_is_a_share_of_the_memory_available(monkeypatch):
    monkeypatch.delenv(memory.ENV, raising=False)
    monkeypatch.setattr(memory, "available", lambda: 24 << 30)
    assert memory.limit() == "768MiB"  # 24 GiB / 32
    monkeypatch.setattr(memory, "available", lambda: 4 << 30)
    assert memory.limit() == "256MiB"  # 128 MiB is under the floor
    monkeypatch.setattr(memory, "available", lambda: (10 << 30) + 12345)
    assert memory.limit() == "320MiB"  # whole MiB, rounded down


def test_the_variable_sets_the_limit_and_keeps_it(monkeypatch):
    monkeypatch.setenv(memory.ENV, " 1.5GB ")
    assert memory.limit() == "1.5GB"
    with store.Store(None) as s:
        assert _limit(s.con) == "1.3 GiB"  # DuckDB's reading of 1.5e9 bytes
        assert not s.more_memory()  # a limit the user gave is never raised
        assert _limit(s.con) == "1.3 GiB"


def test_a_raised_limit_doubles_up_to_half_the_memory_available(monkeypatch):
    monkeypatch.delenv(memory.ENV, raising=False)
    monkeypatch.setattr(memory, "available", lambda: 24 << 30)
    assert memory.raised("768MiB") == "1536MiB"
    assert memory.raised("8GiB") == "12288MiB"  # 16 GiB would pass the ceiling, 12 GiB
    assert memory.raised("12GiB") is None
    assert memory.raised("no idea") is None  # DuckDB's own reading: nothing to double


def test_available_memory_is_read_from_this_machine():
    found = memory.available()
    with open("/proc/meminfo") as f:
        total = next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))
    assert 0 < found <= total


def test_the_store_opens_with_the_adaptive_limit(monkeypatch):
    monkeypatch.delenv(memory.ENV, raising=False)
    # what is available, fixed: it moves while another process (a second test worker) runs
    monkeypatch.setattr(memory, "available", lambda: 24 << 30)
    with store.Store(None) as s:
        assert s.memory_limit == memory.limit() == "768MiB"  # 1/32 of 24 GiB
        assert memory.size_bytes(s.memory_limit) >= memory.FLOOR
        mib = int(s.memory_limit.removesuffix("MiB"))
        assert _limit(s.con) == (f"{mib / 1024:.1f} GiB" if mib >= 1024 else f"{mib:.1f} MiB")


@pytest.mark.slow
def test_a_statement_that_runs_out_runs_again_under_a_higher_limit(monkeypatch):
    # A list aggregate holds its whole group in memory: 32 MiB cannot, the raised limit can.
    monkeypatch.delenv(memory.ENV, raising=False)
    monkeypatch.setattr(memory, "FLOOR", 32 << 20)
    monkeypatch.setattr(memory, "SHARE", 0.0)
    big = "SELECT len(list(i)) FROM range(12000000) t(i)"
    with store.Store(None) as s:
        assert s.memory_limit == "32MiB"
        with pytest.raises(duckdb.OutOfMemoryException):
            s.con.execute(big).fetchall()
        tries = []

        def run():
            tries.append(s.memory_limit)
            return s.con.execute(big).fetchall()

        assert s.adapting(run) == [(12_000_000,)]
        assert tries[:2] == ["32MiB", "64MiB"] and len(tries) >= 2
        assert s.memory_limit == tries[-1] and _limit(s.con) != "32.0 MiB"
