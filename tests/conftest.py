"""Shared test helpers: a tiny event builder and a way to audit a list of events."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"


def vocabulary_of(log: Path) -> Path | None:
    """The vocabulary file kept beside a fixture log (``<stem>.map.toml``), read with --map."""
    path = log.with_name(log.name.split(".")[0] + ".map.toml")
    return path if path.exists() else None


class Audited(NamedTuple):
    """A log's single-node audit, done once per test process (``audited``): the result, closed
    (its findings, incidents and accounting stay), and its JSON document and HTML report, written
    while it was open."""

    result: Any
    json: str
    html: str


_AUDITED: dict[Path, "Audited | Exception"] = {}


def audited(log: Path) -> Audited:
    """``auditor.audit([log])`` with the vocabulary kept beside it, once per test process: the
    fixture sweeps (Spark's reference, the HTML report's, the expected findings', the finding
    builder's) read the same results, and each audit is most of such a test's time. Raises the
    ``AuditorError`` the audit raised. Read only: a test that needs the store audits on its own."""
    if log not in _AUDITED:
        from auditor import AuditorError, audit
        from auditor.render.html import render_html
        from auditor.render.json import render_json

        try:
            with audit([log], vocabulary=vocabulary_of(log)) as result:
                _AUDITED[log] = Audited(result, render_json(result), render_html(result))
        except AuditorError as e:
            _AUDITED[log] = e
    got = _AUDITED[log]
    if isinstance(got, Exception):
        raise got
    return got


def ev(spec: str, key: str = "k", **extra) -> dict:
    """One event from a compact spec: ``"<seq> <kind> <epoch> [worker] [effect_key]"``.

    Kinds: acq, prog, att, rej (an attempt the sink rejected), com, ver. ``ev("7 att 17 alpha
    release")`` is seq 7, effect_attempted under epoch 17 by alpha on effect key ``release``.
    """
    kinds = {"acq": "lease_acquired", "prog": "progress", "att": "effect_attempted",
             "rej": "effect_attempted", "com": "effect_committed", "ver": "outcome_verified"}
    parts = spec.split()
    seq, kind = int(parts[0]), parts[1]
    d: dict = {"seq": seq, "workflow_key": key, "kind": kinds[kind]}
    rest = parts[2:]
    if kind != "ver":
        d["epoch"] = int(rest.pop(0))
    if rest:
        d["worker"] = rest.pop(0)
    if rest:
        d["effect_key"] = rest.pop(0)
    if kind == "rej":
        d["sink_result"] = "rejected"
    d.update(extra)
    return d


def history(*specs: str, key: str = "k") -> list[dict]:
    return [ev(s, key) for s in specs]


def write_jsonl(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


@pytest.fixture
def audit_events(tmp_path):
    """Audit a list of event dicts through the real pipeline (a JSONL file, an in-memory DuckDB)."""
    from auditor import audit

    def run(events: list[dict], name: str = "events.jsonl", **kw):
        return audit([write_jsonl(tmp_path / name, events)], **kw)

    return run


def triples(result) -> list[tuple[str, str, int]]:
    return [(f.grade.value, f.workflow_key, f.seq) for f in result.findings]


def run_cli(*args: str, input: bytes | None = None, cwd: Path = ROOT):
    """The real console entry point in a subprocess."""
    import subprocess

    return subprocess.run([sys.executable, "-m", "auditor", *args], input=input, cwd=cwd,
                          capture_output=True, timeout=120)


@pytest.fixture(scope="session")
def spark_session():
    """One Spark session (``local[2]``, 4 shuffle partitions) for every test that needs one: a JVM
    takes tens of seconds to start here. Skipped without the spark extra or Java, except in CI
    (the environment variable ``CI`` set), where a missing Java is a failure, never a silent skip."""
    pytest.importorskip("pyspark", reason="the spark extra is not installed")
    from auditor.spark import SparkUnavailable, session

    try:
        # C1 only: a JIT that compiles Spark's code for peak speed burns CPU the suite's small
        # audits never earn back (24 fixtures: 108 CPU-s with it, 81 without, on this machine).
        spark = session("local[2]", partitions=4,
                        conf={"spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"})
    except SparkUnavailable as e:
        if os.environ.get("CI"):
            pytest.fail(str(e), pytrace=False)
        pytest.skip(str(e))
    yield spark
    spark.stop()


def pytest_configure(config):
    """Under pytest-xdist (``-n 2``), whole modules go to one worker (``--dist loadscope``), so a
    module-scoped fixture is computed once: with ``load`` each worker ran the Spark engine's
    every-fixture sweeps and started its own JVM. (``loadgroup`` would group the Spark tests alone,
    but xdist 3.8 under pytest 9 sends grouped tests to both workers.)"""
    if getattr(config.option, "dist", "no") == "load":
        config.option.dist = "loadscope"


#: The tests that audit on the suite's Spark session outside ``tests/spark/``.
SPARK_ELSEWHERE = ("tests/detect/test_lease_engines.py::test_spark",)


def pytest_xdist_make_scheduler(config, log):
    """``loadscope``, with every test that uses the Spark session in one scope: one worker starts
    one JVM (its start costs 20-30 CPU-s here, and a second took that from the other tests)."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SparkTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith("tests/spark/") or nodeid in SPARK_ELSEWHERE:
                return "spark"
            return super()._split_scope(nodeid)

    return SparkTogether(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``AUDITOR_TEST_TIMELINE=FILE``, each test's worker, start and end (setup to teardown)
    are appended to FILE: where a two-worker run spends its time, and how long a worker idles."""
    path = os.environ.get("AUDITOR_TEST_TIMELINE")
    start = time.time()
    yield
    if path:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(path, "a") as f:
            f.write(f"{worker}\t{start:.3f}\t{time.time():.3f}\t{item.nodeid}\n")


def examples(n: int) -> int:
    """Hypothesis examples for a property that audits each one: ``n``, sized so that the whole
    suite stays within CI's 15 minutes, times ``AUDITOR_EXAMPLES_SCALE`` (e.g. 4) for a longer run."""
    return max(1, round(n * float(os.environ.get("AUDITOR_EXAMPLES_SCALE", "1"))))


#: A line that cannot be read (epoch is not an integer), for ``lossy``.
BAD_LINE = '{"seq": 99, "workflow_key": "k", "kind": "progress", "epoch": "seventeen"}\n'


@pytest.fixture
def lossy(tmp_path) -> Path:
    """The rejected-attempt fixture (a fence that held: only findings below --fail-on) plus one
    line that cannot be read."""
    path = tmp_path / "lossy.jsonl"
    path.write_text((FIXTURES / "rejected_attempt.jsonl").read_text() + BAD_LINE)
    return path

