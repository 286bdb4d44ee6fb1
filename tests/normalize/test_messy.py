"""SPEC rev 2, "real logs are messy": the normalizer's rules and reasons, exactly, and --map."""

from __future__ import annotations

import json
import re

import duckdb
import pytest

from auditor import Vocabulary, VocabularyError, audit
from auditor.normalize.reference import Rejected, normalize, parse_line
from auditor.store import Store

from ..conftest import FIXTURES, run_cli, write_jsonl

BASE = {"seq": 1, "workflow_key": "k", "kind": "progress", "epoch": 1}
NESTED = ('"{}" is {}, expected a single value; its content is not stored (write the value itself, or '
          'move the structure into "attrs")')


def _members(line: str):
    return parse_line(line)


@pytest.mark.parametrize("line, reason", [
    ('{"seq": 1, "workflow_key": {"prompt": "p"}, "kind": "progress", "epoch": 1}',
     NESTED.format("workflow_key", "an object")),
    ('{"seq": 1, "workflow_key": "k", "kind": "progress", "epoch": 1, "epoch": 2}',
     '"epoch" is given twice with different values ("epoch": 1 and "epoch": 2); the line is ambiguous, '
     "keep one of them"),
    ('{"seq": 1, "workflow_key": "k", "kind": "progress", "epoch": 1, "EPOCH": 2}',
     '"epoch" is given twice with different values ("epoch": 1 and "EPOCH": 2); the line is ambiguous, '
     "keep one of them"),
    ('{"seq": 1, "workflowKey": "k", "workflow_key": "j", "kind": "progress", "epoch": 1}',
     '"workflow_key" is given twice with different values ("workflowKey": "k" and "workflow_key": "j"); '
     "the line is ambiguous, keep one of them"),
    # SPEC rev 3: built-in aliases that disagree are ambiguous too (neither is the field itself)
    ('{"seq": 1, "workflow_key": "k", "kind": "progress", "token": 2, "fencing_token": 1}',
     '"epoch" is given twice with different values ("token": 2 and "fencing_token": 1); the line is '
     "ambiguous, keep one of them"),
    ('{"seq": 1, "workflow_key": " ", "kind": "progress", "epoch": 1}',
     '"workflow_key" is missing; add the unit that must have one effect owner (or job_id / run_id)'),
    ('{"seq": 1, "workflow_key": true, "kind": "progress", "epoch": 1}',
     '"workflow_key" is true, expected a string or an integer'),
    ('{"seq": 1, "workflow_key": "k", "kind": "result_committed", "epoch": 1}',
     '"kind" is "result_committed", not a kind the auditor knows; map it with --map FILE '
     '([kinds] result_committed = "effect_committed")'),
    ('{"seq": 1, "workflow_key": "k", "kind": "job done", "epoch": 1}',
     '"kind" is "job done", not a kind the auditor knows; map it with --map FILE '
     '([kinds] "job done" = "progress")'),
    ('{"seq": 1, "workflow_key": "k", "kind": "", "epoch": 1}',
     '"kind" is missing; expected one of lease_acquired, progress, effect_attempted, effect_committed, '
     "outcome_verified, authority_granted, authority_revoked, resumed, revalidated, effect_compensated"),
    ('{"seq": "\u0662", "workflow_key": "k", "kind": "progress", "epoch": 1}',
     '"seq" is "\u0662", expected an integer in int64 range'),
    ('{"seq": 1, "workflow_key": "k", "kind": "progress", "epoch": "+-2"}',
     '"epoch" is "+-2", expected an integer in int64 range'),
    ('{"seq": 1, "workflow_key": "k", "kind": "progress", "epoch": ""}',
     '"epoch" is missing; every progress needs the owner epoch it was produced under'),
    ('{"seq": 1, "workflow_key": "k", "kind": "effect_committed", "epoch": 1, "effect_key": ""}',
     '"effect_key" is missing; every effect_committed needs the effect key it concerns'),
    ("[1]", "line is JSON but not an object; write one JSON object per line"),
    # ...but an object in the alias that would be read is refused, as in the field
    ('{"seq": 1, "job": {"name": "export"}, "kind": "progress", "epoch": 1}',
     '"workflow_key" is an object, expected a single value; its content is not stored (write the value '
     'itself, or move the structure into "attrs")'),
])
def test_quarantine_reasons_exact(line, reason):
    with pytest.raises(Rejected) as e:
        normalize(_members(line))
    assert str(e.value) == reason


@pytest.mark.parametrize("given, kept", [
    ({"workflow_key": "", "job_id": "J"}, {"workflow_key": "J"}),
    ({"Seq": "+2", "workflowKey": 42, "Epoch": " 3 "}, {"seq": 2, "workflow_key": "42", "epoch": 3}),
    ({"reporter": "Scheduler"}, {"reporter": "Scheduler"}),
    ({"reporter": " SINK "}, {"reporter": "sink"}),
    ({"kind": "effect_attempted", "effect_key": 7, "sink_result": "timeout"},
     {"kind": "effect_attempted", "effect_key": "7", "sink_result": "unknown"}),
    ({"kind": "effect_attempted", "effect_key": "x", "sink_result": ""},
     {"kind": "effect_attempted", "effect_key": "x", "sink_result": None}),
    ({"kind": "outcome_verified", "effect_key": "x", "epoch": {"any": "thing"}},
     {"kind": "outcome_verified", "epoch": None}),
    ({"ts": "not a time"}, {"ts": "not a time", "ts_epoch": None}),  # the store drops it
    ({"ts": 1785031500}, {"ts_epoch": 1785031500.0}),
    ({"ts": "1785031500123"}, {"ts_epoch": 1785031500.123}),
    ({"sink": "", "step_id": "  ", "worker": "", "event_id": ""},
     {"sink": None, "step_id": None, "worker": "unknown", "event_id": None}),
    ({"epoch": 1, "epoch ": 1}, {"epoch": 1}),  # one name twice with one value: not ambiguous
    # an alias is read only when the field is absent or empty: an object there, unused, costs nothing
    ({"workflow_key": "k", "job": {"name": "export"}}, {"workflow_key": "k"}),
    ({"epoch": 2, "token": ["a", "b"]}, {"epoch": 2}),
    # SPEC rev 3: an unread alias goes to attrs (a per-run run_id beside a workflow_key is no conflict)
    ({"workflow_key": "k", "run_id": "r-7"}, {"workflow_key": "k", "attrs": {"run_id": "r-7"}}),
    # values are compared after normalization: 7 is "7", SINK is sink, one instant written twice
    ({"epoch": 7, "Epoch": "7"}, {"epoch": 7}),
    ({"reporter": "SINK", "Reporter": "sink"}, {"reporter": "sink"}),
    ({"ts": "2026-07-26T02:00:00Z", "TS": "2026-07-26T02:00:00+00:00"}, {"ts": "2026-07-26T02:00:00Z"}),
    # SPEC rev 3: an object or array in a descriptive field is dropped and reported; the event stays
    ({"worker": ["w"]}, {"worker": "unknown", "dropped": ["worker"]}),
    ({"reporter": ["sink"], "step_id": [1], "ts": {"at": 1}, "sink": {"name": "s"}},
     {"reporter": None, "step_id": None, "ts": None, "sink": None, "dropped": ["reporter", "sink", "step_id", "ts"]}),
    ({"worker": {"name": "a"}, "Worker": "b"}, {"worker": "b", "dropped": None}),
    ({"kind": "effect_attempted", "effect_key": "x", "sink_result": "timeout"},
     {"sink_result": "unknown", "dropped": ["sink_result"]}),
    ({"heartbeat": "maybe"}, {"heartbeat": None, "dropped": ["heartbeat"]}),
    # SPEC rev 3: authority fields never cost a line
    ({"kind": "authority_granted", "epoch": ""}, {"kind": "authority_granted", "authority_id": None}),
    ({"kind": "authority_revoked"}, {"kind": "authority_revoked", "authority_id": None}),
    ({"kind": "revalidated", "decision": "maybe"}, {"decision": None, "dropped": ["decision"]}),
    ({"kind": "revalidated"}, {"decision": None, "dropped": ["decision"]}),
    ({"kind": "effect_committed", "effect_key": "x", "authority_id": {"id": 1}},
     {"authority_id": None, "dropped": ["authority_id"]}),
    # a field the kind does not use never costs the line: a value it cannot read is dropped
    ({"kind": "progress", "effect_key": {"k": 1}}, {"effect_key": None, "dropped": ["effect_key"]}),
])
def test_rules_keep_the_event(given, kept):
    out = normalize({**BASE, **given}.items() if "Seq" not in given else
                    {**{k: v for k, v in BASE.items() if k not in ("seq", "workflow_key", "epoch")}, **given}.items())
    assert {k: out[k] for k in kept} == kept


def test_objects_in_canonical_fields_are_never_stored(tmp_path):
    log = FIXTURES / "nested_and_ambiguous_fields.jsonl"
    db = tmp_path / "a.duckdb"
    html = tmp_path / "a.html"
    done = run_cli("audit", str(log), "--db", str(db), "--json", "-", "--html", str(html))
    assert done.returncode == 1, done.stderr
    secret = "SECRET-PROMPT-TEXT"
    assert secret in log.read_text()
    assert secret not in (done.stdout + done.stderr).decode()
    assert secret not in html.read_text()
    con = duckdb.connect(str(db), read_only=True)
    for (table,) in con.execute("SELECT table_name FROM information_schema.tables").fetchall():
        assert not con.execute(f"SELECT count(*) FROM {table} t WHERE t::VARCHAR LIKE '%SECRET%'").fetchone()[0]


def test_ts_as_epoch_seconds_and_millis_parse_like_rfc3339():
    a, b = audit([FIXTURES / "seed_split_brain.jsonl"]), audit([FIXTURES / "ts_epoch_seconds_and_millis.jsonl"])
    sql = "SELECT seq, ts_utc FROM events ORDER BY seq"
    assert b.store.con.execute(sql).fetchall() == a.store.con.execute(sql).fetchall()


def test_derived_ids_hash_field_names(tmp_path):
    r = audit([write_jsonl(tmp_path / "a.jsonl", [{**BASE, "sink": "x"}, {**BASE, "step_id": "x"}])])
    ids = [e.event_id for e in r.timeline("k")]
    assert len(set(ids)) == 2 and r.input.duplicates == 0


def test_event_id_conflict_keeps_both_and_says_where():
    log = FIXTURES / "event_id_conflict.jsonl"
    r = audit([log])
    (d,) = [d for d in r.diagnostics if d.kind.value == "event_id_conflict"]
    assert d.detail == (f'event_id "ev-3" names 2 different events, all kept: {log}:3 '
                        f"(ledger/export/2026-07-26, seq 3, progress); {log}:8 (ledger/export/2026-07-26, "
                        "seq 8, effect_committed); give each event its own id, or leave event_id out to have "
                        "it derived")
    assert (r.input.events, r.input.duplicates) == (16, 1)


def test_unmapped_job_log_names_map_then_map_reads_it():
    log = FIXTURES / "job_log_mapped_vocabulary.jsonl"
    unmapped = Store()
    from auditor import ingest_paths

    ingest_paths([log], unmapped)
    reasons = {q.reason for q in unmapped.input_summary(first=100).quarantine}
    assert reasons == {'"epoch" is missing; every lease_acquired needs the owner epoch it was produced under',
                       '"epoch" is missing; every progress needs the owner epoch it was produced under',
                       '"epoch" is missing; every effect_attempted needs the owner epoch it was produced under',
                       '"kind" is "result_committed", not a kind the auditor knows; map it with --map FILE '
                       '([kinds] result_committed = "effect_committed")',
                       '"kind" is "job_done", not a kind the auditor knows; map it with --map FILE '
                       '([kinds] job_done = "progress")'}
    done = run_cli("audit", str(log), "--map", str(FIXTURES / "job_log_mapped_vocabulary.map.toml"))
    assert done.returncode == 1, done.stderr
    assert b"14 lines read = 14 events + 0 duplicates + 0 quarantined" in done.stdout


@pytest.mark.parametrize("text, error", [
    ("[kinds]\nresult_committed = 3\n", '2: [kinds] result_committed is 3, expected a string: result_committed = "..."'),
    ('[kinds]\nresult_committed = "effect_commited"\n',
     '2: [kinds] result_committed = "effect_commited": not a kind the auditor knows; use one of lease_acquired, '
     "progress, effect_attempted, effect_committed, outcome_verified, authority_granted, authority_revoked, "
     "resumed, revalidated, effect_compensated"),
    ('[fields]\nlease_token = "epok"\n',
     '2: [fields] lease_token = "epok": not a canonical field; use one of seq, workflow_key, kind, epoch, worker, '
     "effect_key, sink, sink_result, reporter, step_id, ts, event_id, lease_until, heartbeat, reason, "
     "authority_id, expires_at, scope, decision"),
    ('[fields]\ntoken = "seq"\n', '2: [fields] token = "seq": "token" already means "epoch"; remove this line'),
    ('[kinds]\nprogress = "lease_acquired"\n',
     '2: [kinds] progress = "lease_acquired": "progress" already means "progress"; remove this line'),
    ("[aliases]\n", '1: unknown table [aliases]; a vocabulary file has [fields], [kinds], [kind_patterns] and '
                    '[ignore] tables, or name = "canonical name" entries at the top'),
    ("kinds = 1\n", "1: kinds is not a table; write [kinds] on its own line"),
    # SPEC rev 3: two entries that give one value two kinds, and a top-level entry that maps onto nothing
    ('[kinds]\n"Claimed job" = "lease_acquired"\n# the same value, another case\n"claimed job" = "progress"\n',
     '4: [kinds] claimed job = "progress": "claimed job" already means "lease_acquired"; remove this line'),
    ('result_committed = "effect_committed"\ncharge = "payment"\n',
     '2: charge = "payment": neither a kind nor a canonical field; use a kind (lease_acquired, progress, '
     "effect_attempted, effect_committed, outcome_verified, authority_granted, authority_revoked, resumed, "
     "revalidated, effect_compensated) or a field (seq, workflow_key, kind, epoch, worker, effect_key, sink, "
     "sink_result, reporter, step_id, ts, event_id, lease_until, heartbeat, reason, authority_id, expires_at, "
     "scope, decision)"),
])
def test_bad_vocabulary_files_say_file_line_entry_and_fix(tmp_path, text, error):
    path = tmp_path / "v.toml"
    path.write_text(text)
    with pytest.raises(VocabularyError) as e:
        Vocabulary.load(path)
    assert str(e.value) == f"{path}:{error}"
    done = run_cli("audit", str(FIXTURES / "seed_split_brain.jsonl"), "--map", str(path))
    assert (done.returncode, done.stderr.decode().strip()) == (2, f"Error: {path}:{error}")


def test_top_level_entries_in_the_specs_own_syntax_are_read(tmp_path):
    """SPEC rev 3: an entry at the top level is a kind or a field by its right-hand side; a
    [kinds] right-hand side may be a built-in alias, carrying what it implies."""
    path = tmp_path / "v.toml"
    path.write_text('charge_done = "effect_committed"\nlease_token = "epoch"\n'
                    '[kinds]\n"fence refused write" = "result_rejected"\n"heartbeat lost" = "heartbeat_lost"\n')
    v = Vocabulary.load(path)
    assert v.kind_of("charge_done") == ("effect_committed", {})
    assert v.field_of("lease_token")[0] == "epoch"
    assert v.kind_of("Fence refused write") == ("effect_attempted", {"sink_result": "rejected"})
    assert v.kind_of("heartbeat lost") == ("progress", {"heartbeat": "lost"})


def test_not_toml_is_a_clear_error(tmp_path):
    path = tmp_path / "v.toml"
    path.write_text("[kinds\n")
    with pytest.raises(VocabularyError, match=re.escape(f"{path}:1: not a TOML file")):
        Vocabulary.load(path)


def test_vocabulary_in_the_span_processor():
    from opentelemetry.sdk.trace import TracerProvider

    from auditor.otel import AuditSpanProcessor

    found = []
    processor = AuditSpanProcessor(found.append, reorder_window_millis=0,
                                   vocabulary=Vocabulary.build(kinds={"result_committed": "effect_committed"}))
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    for seq, kind, epoch in ((1, "lease_acquired", 1), (2, "lease_acquired", 2), (3, "result_committed", 1)):
        with tracer.start_as_current_span("s", attributes={
                "ownership.event": kind, "ownership.seq": seq, "ownership.epoch": epoch,
                "ownership.workflow_key": "k", "ownership.effect_key": "x"}):
            pass
    provider.shutdown()
    assert [(f.grade.value, f.seq) for f in found] == [("stale_commit", 3)]


def test_directory_scan_skips_expected_files(tmp_path):
    (tmp_path / "a.jsonl").write_text((FIXTURES / "seed_split_brain.jsonl").read_text())
    (tmp_path / "a.expected.json").write_text((FIXTURES / "seed_split_brain.expected.json").read_text())
    r = audit([tmp_path])
    assert r.input.files == [str(tmp_path / "a.jsonl")] and r.input.quarantined == 0


def test_csv_blank_rows_are_not_lines_read():
    r = audit([FIXTURES / "csv_blank_and_empty_cells.csv"])
    assert (r.input.lines_read, r.input.events, r.input.quarantined) == (16, 16, 0)
    assert json.loads((FIXTURES / "csv_blank_and_empty_cells.expected.json").read_text())["findings"] == [
        [f.grade.value, f.workflow_key, f.seq] for f in r.findings]


def test_unknown_reporter_counts_as_worker_for_confidence(tmp_path):
    seed = [json.loads(line) for line in (FIXTURES / "seed_split_brain.jsonl").read_text().splitlines()]
    for e in seed:
        if e["seq"] in (8, 9):
            e["reporter"] = "scheduler"
    r = audit([write_jsonl(tmp_path / "a.jsonl", seed)])
    assert [(i.confidence.value, i.severity.value) for i in r.incidents] == [("medium", "double_commit")]
    assert {f.reporter for f in r.findings if f.seq in (8, 9)} == {"scheduler"}
