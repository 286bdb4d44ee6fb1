"""The Spark engine against the single-node audit: the same JSON document but for ``engine``.

One Spark session for the module, on ``local[2]`` with four shuffle partitions, so that workflow
keys, duplicates and quarantined lines really are spread over several partitions and files.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from auditor import AuditorError, audit
from auditor.render.json import render_json

from .conftest import FIXTURES, ROOT

pytest.importorskip("pyspark", reason="the spark extra is not installed")

CORPUS = ROOT / "tests" / "corpus"


@pytest.fixture(scope="module")
def spark():
    from auditor.spark import SparkUnavailable, session

    try:
        spark = session("local[2]", partitions=4)
    except SparkUnavailable as e:
        pytest.skip(str(e))
    yield spark
    spark.stop()


def document(result) -> dict:
    return json.loads(render_json(result))


def outcome(run) -> dict | tuple[str, str]:
    """The document without its engine, or the error the audit raised."""
    try:
        doc = document(run())
    except AuditorError as e:
        return type(e).__name__, str(e)
    del doc["engine"]
    return doc


def spark_audit(spark, inputs, **kw):
    from auditor.spark import audit as spark_audit

    return spark_audit(inputs, spark=spark, **kw)


def without_names(doc: dict) -> dict:
    """A document with its file names left out: a URL or a DataFrame names its input otherwise."""
    doc = json.loads(json.dumps(doc))
    doc["input"]["files"] = len(doc["input"]["files"])
    for q in doc["input"]["quarantine"]:
        q["file"] = None
    return doc


@pytest.fixture(scope="module")
def fixture_outcomes(spark) -> dict[Path, dict]:
    """Every fixture audited on Spark, several at once: the session takes jobs from many threads,
    and on two cores most of a small audit's time is Spark's own latency, not work."""
    from concurrent.futures import ThreadPoolExecutor

    paths = sorted(FIXTURES.glob("*.jsonl"))
    with ThreadPoolExecutor(4) as pool:
        found = pool.map(lambda p: outcome(lambda: spark_audit(spark, [p])), paths)
        return dict(zip(paths, found))


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.jsonl")), ids=lambda p: p.stem)
def test_every_fixture_gives_the_single_node_document(fixture_outcomes, path):
    assert fixture_outcomes[path] == outcome(lambda: audit([path]))


@pytest.mark.parametrize("name", [
    "bom_crlf_blank_lines.jsonl", "duplicate_seqs_and_lines.jsonl", "truncated.csv.zst",
    "csv_invalid_utf8.csv", "parquet_uint64_and_struct_attrs.parquet", "empty.jsonl",
    "parquet_not_parquet.parquet",
])
def test_messy_input_is_read_and_refused_alike(spark, name):
    path = CORPUS / name
    assert outcome(lambda: spark_audit(spark, [path])) == outcome(lambda: audit([path]))


def test_a_simulated_log_in_three_files_with_duplicates_across_them(spark, tmp_path):
    """100k+ events over three files: file 3 repeats lines of files 1 and 2 (duplicates that meet
    only after the shuffle) and carries junk (quarantined, by file and physical line)."""
    from auditor.simulate import generate_log

    log = tmp_path / "sim.jsonl"
    generate_log(log, 100_000, seed=7, disorder=0.01)
    lines = log.read_bytes().splitlines(keepends=True)
    parts = [tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"]
    parts[0].write_bytes(b"".join(lines[:60_000]))
    parts[1].write_bytes(b"".join(lines[60_000:]))
    parts[2].write_bytes(b"".join(lines[59_000:61_000:3]) + b"not json\n\n" + b"".join(lines[:7])
                         + b'{"seq": 1, "workflow_key": "x", "kind": "progress", "epoch": "one"}\n')
    mine = spark_audit(spark, parts)
    theirs = audit(parts)
    doc = document(mine)
    assert doc["engine"] == "spark" and document(theirs)["engine"] == "duckdb"
    assert outcome(lambda: mine) == outcome(lambda: theirs)
    assert doc["input"]["duplicates"] == 674 and doc["input"]["quarantined"] == 2
    assert [(q["file"], q["line"]) for q in doc["input"]["quarantine"]] == [(str(parts[2]), 668),
                                                                            (str(parts[2]), 677)]
    assert mine.exit_code == theirs.exit_code == 1 and len(mine.findings) > 4_000


def test_files_on_a_hadoop_filesystem_url(spark, tmp_path):
    data = tmp_path / "logs"
    data.mkdir()
    for path in (FIXTURES / "seed_split_brain.jsonl", CORPUS / "truncated.jsonl.zst",
                 CORPUS / "parquet_uint64_and_struct_attrs.parquet"):
        (data / path.name).write_bytes(path.read_bytes())
    (data / "notes.txt").write_text("not a log, not read\n")
    mine = outcome(lambda: spark_audit(spark, [f"file://{data}"]))
    assert without_names(mine) == without_names(outcome(lambda: audit([data])))
    assert mine["input"]["files"][0].startswith("file:") and mine["input"]["files"][0].endswith(
        "parquet_uint64_and_struct_attrs.parquet")


def test_a_dataframe_of_lines_and_one_of_columns(spark):
    path = FIXTURES / "buffered_late_arrival.jsonl"
    single = without_names(outcome(lambda: audit([path])))
    lines = spark.read.text(str(path)).repartition(1)
    assert without_names(outcome(lambda: spark_audit(spark, lines))) == single
    columns = spark.read.json(str(path))
    found = outcome(lambda: spark_audit(spark, columns))
    assert found["findings"] == single["findings"] and found["incidents"] == single["incidents"]
    assert found["input"]["files"] == ["<dataframe>"]


def test_errors_are_the_single_node_ones(spark, tmp_path):
    missing = tmp_path / "missing.jsonl"
    assert outcome(lambda: spark_audit(spark, [missing])) == outcome(lambda: audit([missing]))
    junk = tmp_path / "junk.jsonl"
    junk.write_text("{}\nnope\n")
    assert outcome(lambda: spark_audit(spark, [junk]))[0] == "NoEvents"
    assert outcome(lambda: spark_audit(spark, [junk])) == outcome(lambda: audit([junk]))


def test_the_command_line_writes_the_same_document(spark, tmp_path):
    """In this process, so that it runs on the module's session (a JVM takes long to start here)."""
    from typer.testing import CliRunner

    from auditor.cli import app

    seed = FIXTURES / "seed_split_brain.jsonl"
    out = tmp_path / "spark.json"
    done = CliRunner().invoke(app, ["audit", str(seed), "--engine", "spark", "--json", str(out)])
    assert done.exit_code == 1, done.output
    doc = json.loads(out.read_text())
    assert doc.pop("engine") == "spark"
    assert doc == outcome(lambda: audit([seed]))


def _cli_without(tmp_path: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auditor", "audit", str(FIXTURES / "seed_split_brain.jsonl"),
                           "--engine", "spark", *args], cwd=ROOT, env=env, capture_output=True, timeout=120)


def test_without_pyspark_the_error_says_how_to_install_it(tmp_path):
    blocker = tmp_path / "blocker"
    (blocker / "pyspark").mkdir(parents=True)
    (blocker / "pyspark" / "__init__.py").write_text("raise ImportError('No module named pyspark')\n")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{blocker}"}
    done = _cli_without(tmp_path, env=env)
    assert done.returncode == 2
    assert done.stderr.decode().splitlines()[-1].startswith("Error: --engine spark needs pyspark")
    assert "pip install 'split-brain-auditor[spark]'" in done.stderr.decode()


def test_without_java_the_error_says_so(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PYSPARK_GATEWAY_PORT")}
    env["PATH"] = str(Path(sys.executable).parent)
    done = _cli_without(tmp_path, env=env)
    assert done.returncode == 2
    assert done.stderr.decode().splitlines()[-1].startswith("Error: --engine spark needs Java 17 or newer")


def test_importing_the_package_and_its_cli_leaves_pyspark_alone():
    code = "import sys, auditor, auditor.cli; sys.exit('pyspark' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_a_duplicate_event_id_with_a_later_time_does_not_move_freshness(spark, tmp_path):
    """The dropped copy carries the newest time of all lines read; freshness must ignore it."""
    seed = [json.loads(line) for line in (FIXTURES / "seed_split_brain.jsonl").read_text().splitlines()]
    for n, event in enumerate(seed):
        event["event_id"] = f"e{n}"
    first, later = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps(e) + "\n" for e in seed))
    later.write_text(json.dumps({**seed[-1], "ts": "2027-01-01T00:00:00Z"}) + "\n")
    mine = outcome(lambda: spark_audit(spark, [first, later]))
    assert mine == outcome(lambda: audit([first, later]))
    assert mine["input"]["duplicates"] == 1 and mine["incidents"][0]["freshness_seconds"] is not None
