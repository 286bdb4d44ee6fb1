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
from auditor.render.html import render_html
from auditor.render.json import render_json

from ..conftest import FIXTURES, ROOT, audited, examples, vocabulary_of

pytest.importorskip("pyspark", reason="the spark extra is not installed")

CORPUS = ROOT / "tests" / "corpus"
#: Every fixture log (JSONL, CSV, Parquet, OTLP), read with the vocabulary kept beside it, if any.
LOGS = sorted(p for p in FIXTURES.iterdir() if not p.name.endswith((".expected.json", ".map.toml")))
#: The every-fixture sweep's logs: every log that is not JSON lines or has a vocabulary, and every
#: other JSON-lines log (a small Spark audit costs about 2.5 CPU-s, and the suite must stay within
#: CI's 15 minutes); every log with AUDITOR_EXAMPLES_SCALE=2 or more. Each fixture's single-node
#: document is checked by the other sweeps either way.
SWEPT = [p for n, p in enumerate(LOGS)
         if examples(1) >= 2 or n % 2 == 0 or p.suffix != ".jsonl" or vocabulary_of(p) is not None]
PARTITIONS = 4

pytestmark = pytest.mark.slow  # real processes and sessions: the end-to-end part of the suite


@pytest.fixture(scope="module")
def spark(spark_session):
    """The suite's one session (conftest), of ``PARTITIONS`` shuffle partitions."""
    return spark_session


def document(result) -> dict:
    return json.loads(render_json(result))


def outcome(run, html: bool = False) -> dict | tuple[str, str]:
    """The document without its engine (with the HTML report under ``html``, which draws the
    result's timelines), or the error the audit raised."""
    try:
        result = run()
        doc = document(result)
        if html:
            doc["html"] = render_html(result)
    except AuditorError as e:
        return type(e).__name__, str(e)
    del doc["engine"]
    return doc


def reference(path: Path) -> dict | tuple[str, str]:
    """``outcome`` of the single-node audit of ``path`` with its vocabulary, with the HTML report
    (``audited``: done once per test process, shared with the other fixture sweeps)."""
    try:
        done = audited(path)
    except AuditorError as e:
        return type(e).__name__, str(e)
    doc = json.loads(done.json)
    del doc["engine"]
    doc["html"] = done.html
    return doc


def spark_audit(spark, inputs, **kw):
    from auditor.spark import audit as spark_audit

    return spark_audit(inputs, spark=spark, **kw)


def without_names(doc):
    """A document with its file names left out (the input's, each quarantined line's, each
    finding's and stale event's ``file``): a URL or a DataFrame names its input otherwise."""
    if isinstance(doc, list):
        return [without_names(x) for x in doc]
    if not isinstance(doc, dict):
        return doc
    out = {k: None if k == "file" else without_names(v) for k, v in doc.items()}
    if isinstance(out.get("input"), dict):
        out["input"]["files"] = len(doc["input"]["files"])
    return out


@pytest.fixture(scope="module")
def fixture_outcomes(spark) -> dict[Path, dict]:
    """Every fixture audited on Spark, several at once: the session takes jobs from many threads,
    and on two cores most of a small audit's time is Spark's own latency, not work."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        found = pool.map(lambda p: outcome(lambda: spark_audit(spark, [p], vocabulary=vocabulary_of(p)), html=True),
                         SWEPT)
        return dict(zip(SWEPT, found))


@pytest.mark.parametrize("path", SWEPT, ids=lambda p: p.name)
def test_every_fixture_gives_the_single_node_document(fixture_outcomes, path):
    assert fixture_outcomes[path] == reference(path)


@pytest.mark.parametrize("name", [
    "bom_crlf_blank_lines.jsonl", "duplicate_seqs_and_lines.jsonl", "truncated.csv.zst",
    "csv_invalid_utf8.csv", "parquet_uint64_and_struct_attrs.parquet", "empty.jsonl",
    "parquet_not_parquet.parquet",
])
def test_messy_input_is_read_and_refused_alike(spark, name):
    path = CORPUS / name
    assert outcome(lambda: spark_audit(spark, [path])) == outcome(lambda: audit([path]))


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_a_field_named_twice_in_a_header_is_read_alike(spark, tmp_path, suffix):
    """The reader hands such rows over as objects with the header's own names (a VARCHAR the
    stage must get as BLOB, as every other row): the Spark engine used to fail on them."""
    path = tmp_path / f"twice.{suffix}"
    if suffix == "csv":
        path.write_text("seq,workflow_key,kind,epoch,Epoch,effect_key\n1,k,lease_acquired,1,,\n"
                        "2,k,lease_acquired,2,2,\n3,k,effect_committed,2,1,x\n")
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_arrays(
            [pa.array([1, 2, 3]), pa.array(["k"] * 3), pa.array(["lease_acquired", "lease_acquired", "effect_committed"]),
             pa.array([1, 2, 2]), pa.array([None, 2, 1]), pa.array([None, None, "x"])],
            names=["seq", "workflow_key", "kind", "epoch", "Epoch", "effect_key"]), path)
    got = outcome(lambda: spark_audit(spark, [path]))
    assert got == outcome(lambda: audit([path]))
    assert (got["verdict"], got["input"]["quarantined"]) == ("incomplete", 1)


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
    assert without_names(found["findings"]) == single["findings"]
    assert without_names(found["incidents"]) == single["incidents"]
    assert found["input"]["files"] == ["<dataframe>"] and {f["file"] for f in found["findings"]} == {"<dataframe>"}


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

    from auditor.cli.app import app

    seed = FIXTURES / "seed_split_brain.jsonl"
    out = tmp_path / "spark.json"
    done = CliRunner().invoke(app, ["audit", str(seed), "--engine", "spark", "--json", str(out)])
    assert done.exit_code == 1, done.output
    doc = json.loads(out.read_text())
    assert doc.pop("engine") == "spark"
    assert doc == outcome(lambda: audit([seed]))


def test_the_command_line_with_every_reporting_option_writes_what_duckdb_writes(spark, tmp_path):
    """--map, --key, --since, --allow-quarantined and every rendering: the same files, the same exit."""
    from typer.testing import CliRunner

    from auditor.cli.app import app

    logs = [str(FIXTURES / name) for name in ("seed_split_brain.jsonl", "job_log_mapped_vocabulary.jsonl",
                                              "event_id_conflict.jsonl")]
    written = {}
    for engine in ("duckdb", "spark"):
        out = tmp_path / engine
        out.mkdir()
        done = CliRunner().invoke(app, [
            "audit", *logs, "--engine", engine, "--map", str(FIXTURES / "job_log_mapped_vocabulary.map.toml"),
            "--key", "ledger/*", "--key", "8f1b*", "--since", "2", "--allow-quarantined", "1",
            "--json", str(out / "doc.json"), "--html", str(out / "report.html"),
            "--junit", str(out / "junit.xml"), "--markdown", str(out / "summary.md")])
        doc = json.loads((out / "doc.json").read_text())
        assert doc.pop("engine") == engine
        written[engine] = (done.exit_code, done.output, doc,
                           *((out / name).read_text() for name in ("report.html", "junit.xml", "summary.md")))
    assert written["spark"] == written["duckdb"]
    exit_code, _, doc, html, *_ = written["spark"]
    assert exit_code == 1 and doc["scope"]["keys"] == ["ledger/*", "8f1b*"]
    assert doc["evidence_lost"]["event_id_conflicts"] == 1 and "<svg" in html


@pytest.mark.parametrize("args, message", [
    (["--db", "x.duckdb"], "--db keeps a DuckDB store, which --engine spark does not build"),
    (["--engine", "duckdb", "--spark-master", "local[2]"], "--spark-master needs --engine spark"),
    (["--engine", "flink"], "--engine 'flink' is not an engine; use one of duckdb, spark"),
])
def test_what_the_spark_engine_cannot_do_is_refused_before_anything_is_read(tmp_path, args, message):
    from typer.testing import CliRunner

    from auditor.cli.app import app

    engine = [] if "--engine" in args else ["--engine", "spark"]
    done = CliRunner().invoke(app, ["audit", str(FIXTURES / "seed_split_brain.jsonl"), *engine, *args])
    assert done.exit_code == 2 and done.output.startswith(f"Error: {message}"), done.output
    assert not (tmp_path / "x.duckdb").exists()


def partition_of(spark, key: str) -> int:
    """The workflow-key partition Spark's hash partitioning puts ``key`` in (stage 2)."""
    return spark.createDataFrame([(key,)], "k string").selectExpr(f"pmod(hash(k), {PARTITIONS})").first()[0]


def test_event_id_conflicts_are_found_across_files_keys_and_partitions(spark, tmp_path):
    """One id used by events of two keys that Spark audits in different partitions, from two
    files; another reused within one key; an exact copy across the files (a duplicate, not a
    conflict). Each conflict is lost evidence: incomplete, until --allow-quarantined covers them."""
    from auditor import Scope

    keys = [f"tenant-{n}/export" for n in range(40)]
    a = keys[0]
    b = next(k for k in keys if partition_of(spark, k) != partition_of(spark, a))
    first = [dict(ev, event_id=f"{ev['workflow_key']}#{ev['seq']}") for ev in (
        {"seq": 1, "workflow_key": a, "kind": "lease_acquired", "epoch": 1, "worker": "w1"},
        {"seq": 2, "workflow_key": a, "kind": "progress", "epoch": 1, "worker": "w1"},
        {"seq": 3, "workflow_key": a, "kind": "lease_acquired", "epoch": 2, "worker": "w2"},
        {"seq": 1, "workflow_key": b, "kind": "lease_acquired", "epoch": 7, "worker": "w7"})]
    second = [
        {"seq": 2, "workflow_key": b, "kind": "progress", "epoch": 7, "worker": "w7", "event_id": f"{a}#2"},
        {"seq": 4, "workflow_key": a, "kind": "progress", "epoch": 2, "worker": "w2", "event_id": f"{a}#3"},
        first[3]]
    files = [tmp_path / "one.jsonl", tmp_path / "two.jsonl"]
    for path, events in zip(files, (first, second)):
        path.write_text("".join(json.dumps(e) + "\n" for e in events))
    mine = outcome(lambda: spark_audit(spark, files), html=True)
    assert mine == outcome(lambda: audit(files), html=True)
    assert mine["verdict"] == "incomplete" and mine["input"]["duplicates"] == 1
    conflicts = [d for d in mine["diagnostics"] if d["kind"] == "event_id_conflict"]
    assert [(d["workflow_key"], d["seq"]) for d in conflicts] == sorted([(a, 2), (a, 3)])
    assert f"two.jsonl:1 ({b}, seq 2, progress)" in conflicts[0]["detail"]
    for options in ({"allow_quarantined": 2}, {"scope": Scope.parse([b])},
                    {"scope": Scope.parse([b]), "allow_quarantined": 1}):
        mine = outcome(lambda: spark_audit(spark, files, **options))
        assert mine == outcome(lambda: audit(files, **options)), options
        assert mine["verdict"] == ("pass" if options.get("allow_quarantined") == 2 else "incomplete")


@pytest.mark.parametrize("scope", [
    {"keys": ["ledger/*"]}, {"keys": ["reports/*"], "since": "11"}, {"until": "7"},
    {"since": "2026-07-26T02:07:00Z"}, {"keys": ["no/such/*"]},
], ids=str)
def test_a_scope_narrows_the_report_and_its_timelines_alike(spark, scope):
    from auditor import Scope

    seed = FIXTURES / "seed_split_brain.jsonl"
    narrowed = Scope.parse(**scope)
    mine = outcome(lambda: spark_audit(spark, [seed], scope=narrowed), html=True)
    assert mine == outcome(lambda: audit([seed], scope=narrowed), html=True)
    if scope == {"keys": ["no/such/*"]}:
        assert mine[0] == "ScopeError"


def test_a_spark_result_draws_the_report_timelines_and_closes(spark):
    from auditor import ResultClosed

    seed = FIXTURES / "seed_split_brain.jsonl"
    with audit([seed]) as theirs, spark_audit(spark, [seed]) as mine:
        assert mine.timelines == theirs.timelines and set(mine.timelines) == {
            "ledger/export/2026-07-26", "reports/index/2026-07-26"}
    mine.close()  # idempotent
    assert mine.verdict.value == "fail" and render_html(mine) == render_html(theirs)
    for read in (mine.events_frame, mine.quarantine_frame, lambda: mine.timeline("ledger/export/2026-07-26")):
        with pytest.raises(ResultClosed, match="a Spark audit leaves its events in Spark"):
            read()


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


def test_an_event_id_reused_with_a_later_time_is_a_conflict_that_moves_freshness(spark, tmp_path):
    """The copy differs (its ts): one id, two events, both kept; its time is the log's newest."""
    seed = [json.loads(line) for line in (FIXTURES / "seed_split_brain.jsonl").read_text().splitlines()]
    for n, event in enumerate(seed):
        event["event_id"] = f"e{n}"
    first, later = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text("".join(json.dumps(e) + "\n" for e in seed))
    later.write_text(json.dumps({**seed[-1], "ts": "2027-01-01T00:00:00Z"}) + "\n")
    mine = outcome(lambda: spark_audit(spark, [first, later]))
    assert mine == outcome(lambda: audit([first, later]))
    assert mine["input"]["duplicates"] == 0 and mine["evidence_lost"]["event_id_conflicts"] == 1
    assert mine["incidents"][0]["freshness_seconds"] > 86_400 * 100


#: Every messy JSON-lines file of the corpus, and fixtures with [ignore] entries, duplicates and
#: vocabularies, each read in three pieces by as many tasks (issue 46; each
#: piece is a scratch store of its own, and three pieces have two boundaries to get right).
SPLIT = sorted(CORPUS.glob("*.jsonl")) + [p for p in LOGS if p.suffix == ".jsonl"][::6]


@pytest.fixture(scope="module")
def split_outcomes(spark) -> dict[Path, dict]:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        found = pool.map(lambda p: outcome(lambda: spark_audit(spark, [p], vocabulary=vocabulary_of(p),
                                                               split_bytes=max(64, p.stat().st_size // 3)),
                                           html=True), SPLIT)
        return dict(zip(SPLIT, found))


@pytest.mark.parametrize("path", SPLIT, ids=lambda p: p.name)
def test_a_file_read_in_pieces_by_many_tasks_gives_the_single_node_document(split_outcomes, path):
    assert split_outcomes[path] == reference(path)


def test_pieces_are_counted_and_the_shuffle_sized_from_the_input(spark, tmp_path):
    from auditor.spark import run

    path = FIXTURES / "seed_split_brain.jsonl"
    _result, stats = run([path], spark=spark, split_bytes=100)
    assert stats.pieces > path.stat().st_size // 200
    assert [name for name, _s in stats.files] == [str(path)]
    assert stats.shuffle_partitions == PARTITIONS  # set for the session (conftest): it wins


def test_spark_settings_and_the_auditors_own_reach_a_new_session(monkeypatch, tmp_path):
    from auditor.spark.cluster import conf_of, settings

    monkeypatch.setenv("AUDITOR_MEMORY_LIMIT", "300MB")
    monkeypatch.setenv("AUDITOR_MAX_LINE_BYTES", "1M")
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    conf = conf_of(["spark.executor.memory=1g", "spark.sql.shuffle.partitions = 8", "spark.executor.memory=2g"])
    assert conf == {"spark.executor.memory": "2g", "spark.sql.shuffle.partitions": "8"}
    got = settings(conf, str(archive), "spark://h:7077")
    assert got["spark.executorEnv.AUDITOR_MEMORY_LIMIT"] == "300MB"
    assert got["spark.executorEnv.AUDITOR_MAX_LINE_BYTES"] == "1M"
    assert got["spark.archives"] == f"{archive}#auditor-env"
    assert got["spark.executorEnv.PYSPARK_PYTHON"] == "./auditor-env/bin/python"
    with pytest.raises(AuditorError, match="expected KEY=VALUE with a Spark setting"):
        conf_of(["executor.memory"])
    with pytest.raises(AuditorError, match="no such file; pack the environment first"):
        settings({}, str(tmp_path / "missing.tar.gz"), None)


# Issue 45 item 10 (--quiet on --engine spark leaves the JVM's start-up warnings in a log file, and
# prints nothing) is held by docs/SCALE.md's example, run by tests/docs/test_docs.py: a command with
# --quiet shown without output must print nothing on stdout or stderr (one JVM started, not two).


def test_a_failure_on_the_executors_is_one_line_naming_its_cause(tmp_path):
    from auditor.spark.cluster import SparkFailed, explain

    cases = {
        'java.io.IOException: Cannot run program "/opt/venv/bin/python": error=2, No such file':
            "an executor cannot run the Python '/opt/venv/bin/python'",
        "pyspark.errors.PythonException: ModuleNotFoundError: No module named 'auditor'":
            "an executor's Python cannot import 'auditor'",
        "Job aborted: java.lang.OutOfMemoryError: Java heap space\n\tat java.util.Arrays.copyOf":
            "an executor ran out of memory; raise it (--spark-conf spark.executor.memory=4g)",
        "Python worker exited unexpectedly (crashed)": "an executor's Python was killed",
        "_duckdb.OutOfMemoryException: Out of Memory Error: failed to pin block of size 256.0 KiB "
        "(30.4 MiB/30.5 MiB used)": "DuckDB in an executor ran out of the memory it was given "
                                    "(30.4 MiB/30.5 MiB used); raise AUDITOR_MEMORY_LIMIT",
    }
    for text, said in cases.items():
        e = explain(RuntimeError(text + "\n" + "\tat x.y\n" * 300))
        assert isinstance(e, SparkFailed)
        assert str(e).startswith(f"Spark: {said}") and "\n" not in str(e)
        trace = str(e).rsplit("(Spark's trace: ", 1)[1].rstrip(")")
        assert text.splitlines()[0] in Path(trace).read_text()
        Path(trace).unlink()
