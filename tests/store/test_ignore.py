"""[ignore] in the store (SPEC rev 3): lines read = events + duplicates + quarantined + ignored, each
entry listed with its count, first file and line and values; the stage's SQL decides ignored lines
before the Python normalizer only where it reads them as the normalizer does (pinned here against
``Store(careful=True)``, the reference), and spares the normalizer the rest."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auditor import analyze, audit, ingest_paths, report
from auditor.normalize.kinds import re2_of
from auditor.normalize.vocabulary import Vocabulary
from auditor.render.json import render_json
from auditor.store import Store

from ..conftest import examples, run_cli

FLAT = ('[fields]\nmsg = "kind"\nrev = "seq"\n[kinds]\n"lease acquired" = "lease_acquired"\n"step done" = "progress"\n'
        "[kind_patterns]\n'^charged \\S+$' = \"effect_committed\"\n"
        '[ignore]\nkinds = ["config reloaded", "Cache Warm"]\n'
        "kind_patterns = ['^GET /\\S* [0-9]{3}$', '^metrics ', '(?<!x)flushed$']\n")
NESTED = ('[fields]\n"event.action" = "kind"\n"event.sequence" = "seq"\n"labels.job" = "workflow_key"\n'
          '[kinds]\nlease-acquired = "lease_acquired"\n[ignore]\nkind_patterns = [\'^http-\', \'^gc-\']\n')
ALIAS = '[kinds]\n"lease acquired" = "lease_acquired"\n[ignore]\nkinds = ["noise"]\nkind_patterns = [\'^GET \']\n'

MESSAGES = ["lease acquired", "step done", "charged e-1", "config reloaded", "CONFIG RELOADED", "cache warm",
            "CacheWarm", "GET /healthz 200", "get /x 404", "GET /x 2000", "metrics flushed", "metricsflushed",
            "xflushed", "yflushed", " GET /a 200", "GET /a 200 ", "", "   ", "GÉT /a 200", "GET /\u00e9 200",
            "tab\tGET /a 200", "noise", "Noise", "progress", "lease_acquired", "ownership.progress", "a.noise",
            "http-get", "gc-pause", "lease-acquired", "HTTP-get", "msg"]
MEMBERS = ["msg", "Msg", "MSG", "mSg", "kind", "event", "message", "k_i_n_d", "event_id", "job", "rev", "token",
           "attrs", "event.action", "events", "\u212aind"]


@st.composite
def lines(draw):
    d = {}
    for _ in range(draw(st.integers(0, 5))):
        name = draw(st.sampled_from(MEMBERS))
        value = draw(st.one_of(st.sampled_from(MESSAGES), st.integers(0, 3), st.none(),
                               st.fixed_dictionaries({"action": st.sampled_from(MESSAGES)}),
                               st.fixed_dictionaries({"action": st.sampled_from(MESSAGES),
                                                      "Action": st.sampled_from(MESSAGES)}),
                               st.fixed_dictionaries({"dataset": st.just("x")})))
        d[name] = value
    text = json.dumps(d)
    if draw(st.booleans()) and "msg" in d:  # a member given twice, which only the text can say
        text = text[:-1] + (", " if d else "") + f'"msg": {json.dumps(draw(st.sampled_from(MESSAGES)))}' + "}"
    return text


def _document(tmp_path, text: str, vocabulary: str, careful: bool) -> str:
    log = tmp_path / "log.jsonl"
    log.write_text(text)
    path = tmp_path / "v.toml"
    path.write_text(vocabulary)
    store = Store(None, careful=careful, vocabulary=path, small=True)
    ingest_paths([log], store, idempotent=False)
    summary = store.input_summary(first=1000)
    store.close()
    return json.dumps([summary.lines_read, summary.events, summary.quarantined, summary.ignored,
                       [list(map(str, (q.line, q.reason))) for q in summary.quarantine],
                       [[e.table, e.entry, e.lines, e.line, e.samples] for e in summary.ignore]])


@pytest.mark.slow  # 60 stores per vocabulary: about 10 s each at load 4
@pytest.mark.parametrize("vocabulary", [FLAT, NESTED, ALIAS], ids=["flat", "nested", "alias"])
@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(lines(), min_size=1, max_size=25))
def test_the_stage_ignores_exactly_what_the_normalizer_ignores(tmp_path, vocabulary, log):
    text = "\n".join(log) + "\n"
    assert _document(tmp_path, text, vocabulary, careful=False) == _document(tmp_path, text, vocabulary, careful=True)


def test_the_stage_spares_the_normalizer_the_lines_it_can_decide(tmp_path, monkeypatch):
    import auditor.store.setup

    calls = []
    real = auditor.store.setup.normalize_line
    monkeypatch.setattr(auditor.store.setup, "normalize_line", lambda *a: calls.append(a[0]) or real(*a))
    log = tmp_path / "log.jsonl"
    evidence = {"msg": "lease acquired", "job": "k", "token": 1, "rev": 1}
    noise = [{"msg": "GET /healthz 200"}, {"msg": "config reloaded", "level": "info"},
             {"msg": "metrics flushed"}, {"msg": "yflushed"}, {"Msg": "GET /a 200"}]
    log.write_text("".join(json.dumps(d) + "\n" for d in [evidence, *noise]))
    path = tmp_path / "v.toml"
    path.write_text(FLAT)
    with audit([log], vocabulary=path) as got:
        assert (got.input.events, got.input.ignored) == (1, 5)
    # the evidence, the pattern RE2 cannot read (a lookbehind) and the other spelling: the normalizer's
    assert sorted(json.loads(c).get("msg") or json.loads(c).get("Msg") for c in calls) == [
        "GET /a 200", "lease acquired", "yflushed"]


def test_every_pattern_the_stage_reads_means_in_re2_what_it_means_in_python():
    """The rewriting keeps a pattern's matches on printable ASCII (DuckDB's regexp_matches against
    Python's re.search, case-insensitive), and refuses what it cannot keep."""
    import random
    import re

    import duckdb

    patterns = [r"^claimed job \S+", r"^(GET|POST) /api/\S+ \d{3}", r"\bfoo\b", r"a{,3}b", r"[^a-c\d]+z",
                r"x*?y", r"\Aab\Z", r"^$", r"a|b|", r"[.]", r"\W\s\D", r"(?i)Ab"]
    refused = [r"(?=x)", r"(a)\1", r"(?s).", r"(?<!x)y", r"a{2000}", "caf\u00e9", r"(?x) a"]
    assert [re2_of(p) for p in refused] == [None] * len(refused)
    rng = random.Random(35)
    alphabet = "abcxyzGETPOSTfo /.-_0129\\ \t"
    values = ["".join(rng.choice(alphabet[:-1]) for _ in range(rng.randint(0, 12))) for _ in range(3000)]
    con = duckdb.connect()
    for p in patterns:
        want = [bool(re.search(p, v, re.IGNORECASE)) for v in values]
        got = [r[0] for r in con.execute(
            "SELECT regexp_matches(v, ?, 'i') FROM (SELECT unnest(?::VARCHAR[]) AS v, "
            "generate_subscripts(?::VARCHAR[], 1) AS i) ORDER BY i", [re2_of(p), values, values]).fetchall()]
        assert got == want, p


def test_ignored_lines_add_up_across_files_ingests_and_reports(tmp_path):
    vocabulary = tmp_path / "v.toml"
    vocabulary.write_text(FLAT)
    logs = []
    for n in range(3):
        log = tmp_path / f"part-{n}.jsonl"
        log.write_text("".join(json.dumps(d) + "\n" for d in [
            {"msg": f"GET /x/{n} 200"}, {"msg": "lease acquired", "job": f"k{n}", "token": 1, "rev": 1},
            {"msg": "config reloaded"}, {"msg": f"GET /y/{n} 200"}]))
        logs.append(log)
    db = tmp_path / "store.duckdb"
    done = run_cli("ingest", *map(str, logs), "--db", str(db), "--map", str(vocabulary))
    assert done.returncode == 0, done.stderr
    assert f"{logs[0]}: 4 lines read = 1 events + 0 duplicates + 0 quarantined + 3 ignored".encode() in done.stdout
    again = run_cli("ingest", str(logs[0]), "--db", str(db), "--map", str(vocabulary))
    assert b"already ingested" in again.stdout
    with report(db) as got:
        inp = got.input
        assert (inp.lines_read, inp.events, inp.ignored) == (12, 3, 9)
        assert [(e.table, e.entry, e.lines, e.file, e.line, e.samples) for e in inp.ignore] == [
            ("kind_patterns", "^GET /\\S* [0-9]{3}$", 6, str(logs[0]), 1,
             ["GET /x/0 200", "GET /y/0 200", "GET /x/1 200", "GET /y/1 200", "GET /x/2 200", "GET /y/2 200"]),
            ("kinds", "config reloaded", 3, str(logs[0]), 3, ["config reloaded"])]
        doc = json.loads(render_json(got))
        assert doc["input"]["ignore"][1] == {"table": "kinds", "entry": "config reloaded", "lines": 3,
                                             "file": str(logs[0]), "line": 3, "samples": ["config reloaded"]}
    shown = run_cli("report", "--db", str(db))
    assert (f"  6 ignored by [ignore] kind_patterns '^GET /\\S* [0-9]{{3}}$' (first {logs[0]}:1; "
            '"GET /x/0 200", "GET /y/0 200", "GET /x/1 200", ...)').encode() in shown.stdout


def test_a_store_written_before_ignore_is_read_as_one_that_ignored_nothing(tmp_path):
    db = tmp_path / "old.duckdb"
    with Store(db) as store:  # the schema as revision 3 before [ignore] wrote it
        store.con.execute("DROP TABLE ignore_entries")
        store.con.execute("ALTER TABLE sources DROP COLUMN ignored")
        store.con.execute("ALTER TABLE sources DROP COLUMN given_derived_ids")  # added after [ignore]
    import duckdb

    con = duckdb.connect(str(db))
    con.execute("INSERT INTO sources VALUES (1, 'seed.jsonl', NULL, 'jsonl', 1, 1, 0, 0)")
    con.execute("INSERT INTO events (event_id, ord, seq, obs, workflow_key, kind, epoch, worker, source_id, line, "
                "position) VALUES ('e', 1, 1, 68719476737, 'k', 'lease_acquired', 1, 'w', 1, 1, 1)")
    con.close()
    with Store(db, read_only=True) as store:
        summary = store.input_summary()
        assert (summary.lines_read, summary.events, summary.ignored, summary.ignore) == (1, 1, 0, [])
        with analyze(store, require_events=True) as result:
            assert result.input.ignored == 0


def test_the_vocabulary_builds_the_fast_kinds_and_keeps_the_fast_path_off_attrs(tmp_path):
    from auditor.store.prefilter import stage_params

    assert stage_params(Vocabulary.default())["fast_ok"] is True
    v = Vocabulary.build([("attrs.job", "workflow_key")])
    assert stage_params(v)["fast_ok"] is False
    log = tmp_path / "log.jsonl"
    log.write_text('{"seq":1,"workflow_key":"k","kind":"lease_acquired","epoch":1,"attrs":{"job":"j"}}\n')
    from auditor import NoEvents

    for careful in (False, True):  # attrs.job names the key too: ambiguous, on either path
        store = Store(None, careful=careful, vocabulary=v)
        ingest_paths([log], store, idempotent=False)
        assert [q.reason for q in store.input_summary().quarantine] == [
            '"workflow_key" is given twice with different values ("workflow_key": "k" and "attrs.job": "j"); '
            "the line is ambiguous, keep one of them"]
        store.close()
    with pytest.raises(NoEvents):
        audit([log], vocabulary=v)


def test_the_reports_list_each_ignore_entry():
    from auditor.render.html import render_html
    from auditor.render.markdown import render_markdown, text

    from ..conftest import FIXTURES

    name = "noisy_three_irrelevant_lines_per_evidence_line"
    with audit([FIXTURES / f"{name}.jsonl"], vocabulary=FIXTURES / f"{name}.map.toml") as got:
        html, markdown = render_html(got), render_markdown(got)
    assert "64 lines read = 16 events + 0 duplicates + 0 quarantined + 48 ignored" in html
    assert "<td><code>[ignore] kinds &#34;config reloaded&#34;</code></td><td class=\"num\">4</td>" in html
    assert "- " + text(f"10 ignored by [ignore] kind_patterns '^metrics flushed ' (first {FIXTURES / name}.jsonl:3; "
                       '"metrics flushed (575 series)"') in markdown
    assert "\\[ignore\\] kind\\_patterns" in markdown  # escaped: no markup from a vocabulary
