"""SPEC section 2, "Logs as teams write them": dotted paths, kinds from a message, [ignore], and the
vocabulary files that are refused (with the file, the line and the entry) before any input is read."""

from __future__ import annotations

import json

import pytest

from auditor.normalize.reference import Ignored, Rejected, normalize, parse_line
from auditor.normalize.vocabulary import Vocabulary, VocabularyError

from ..conftest import FIXTURES, run_cli


def vocab(tmp_path, text: str) -> Vocabulary:
    path = tmp_path / "v.toml"
    path.write_text(text)
    return Vocabulary.load(path)


def read(line: dict | str, v: Vocabulary) -> dict:
    return normalize(parse_line(line if isinstance(line, str) else json.dumps(line)), v)


BASE = {"seq": 1, "workflow_key": "k", "kind": "progress"}


# Paths.

def test_a_path_reads_nested_objects_and_flat_dotted_keys_alike(tmp_path):
    v = vocab(tmp_path, '[fields]\n"lease.token" = "epoch"\n')
    assert read({**BASE, "lease": {"token": 7}}, v)["epoch"] == 7
    assert read({**BASE, "lease.token": 7}, v)["epoch"] == 7
    assert read({**BASE, "Lease": {"Token": "7"}}, v)["epoch"] == 7  # names as the contract matches them
    with pytest.raises(Rejected, match=r'"epoch" is given twice with different values \("lease.token": 7 and '
                                       r'"lease.token": 8\)'):
        read({**BASE, "lease": {"token": 7}, "lease.token": 8}, v)
    assert read({**BASE, "lease": {"token": 7}, "lease.token": "7"}, v)["epoch"] == 7  # they agree


def test_an_unquoted_toml_dotted_key_is_the_same_entry(tmp_path):
    quoted = vocab(tmp_path, '[fields]\n"lease.token" = "epoch"\n')
    dotted = vocab(tmp_path, "[fields]\nlease.token = \"epoch\"\n")
    top = vocab(tmp_path, "lease.token = \"epoch\"\n")
    table = vocab(tmp_path, "[fields.lease]\ntoken = \"epoch\"\n")
    assert quoted.fields == dotted.fields == top.fields == table.fields
    assert quoted.containers == dotted.containers == frozenset({"lease"})


def test_a_container_is_never_a_field_or_alias_and_unmapped_members_stay_in_attrs(tmp_path):
    """``event`` holds ``event.action``: it is not the built-in alias of kind. What the path does
    not read stays in attrs where it was."""
    v = vocab(tmp_path, '[fields]\n"event.action" = "kind"\n[kinds]\n"lease-acquired" = "lease_acquired"\n')
    out = read({"seq": 1, "workflow_key": "k", "epoch": 3,
                "event": {"action": "lease-acquired", "dataset": "ledger", "sub": {"x": 1}}}, v)
    assert (out["kind"], out["attrs"]) == ("lease_acquired", {"event": {"dataset": "ledger", "sub": {"x": 1}}})
    # as a string, "event" is still the alias (it holds nothing)
    assert read({"seq": 1, "workflow_key": "k", "epoch": 3, "event": "progress"}, v)["kind"] == "progress"


def test_a_path_to_an_object_is_an_object_valued_field(tmp_path):
    v = vocab(tmp_path, '[fields]\n"lease.token" = "epoch"\n"run.worker" = "worker"\n')
    with pytest.raises(Rejected, match='"epoch" is an object, expected a single value'):
        read({**BASE, "lease": {"token": {"n": 7}}}, v)
    out = read({**BASE, "epoch": 1, "run": {"worker": ["a", "b"]}}, v)  # descriptive: dropped, kept
    assert (out["worker"], out["dropped"]) == ("unknown", ["worker"])


# Kinds from a message.

def test_exact_values_and_patterns_case_insensitive_with_what_aliases_imply(tmp_path):
    v = vocab(tmp_path, '[fields]\nmsg = "kind"\n[kinds]\n"Claimed job" = "lease_acquired"\n'
                        "[kind_patterns]\n'^fence refused write for \\S+$' = \"result_rejected\"\n"
                        "'^heartbeat (missed|lost)' = \"heartbeat_lost\"\n")
    base = {"seq": 1, "job": "k", "token": 1, "idempotency_key": "e"}
    assert read({**base, "msg": "CLAIMED JOB"}, v)["kind"] == "lease_acquired"
    got = read({**base, "msg": "Fence refused write for J-7"}, v)
    assert (got["kind"], got["sink_result"]) == ("effect_attempted", "rejected")
    got = read({**base, "msg": "heartbeat missed twice"}, v)
    assert (got["kind"], got["heartbeat"]) == ("progress", "lost")


def test_a_value_two_kinds_claim_is_ambiguous_and_none_is_unknown_naming_map(tmp_path):
    v = vocab(tmp_path, '[fields]\nmsg = "kind"\n[kind_patterns]\n\'^charge \' = "effect_attempted"\n'
                        "'committed$' = \"effect_committed\"\n")
    base = {"seq": 1, "job": "k", "token": 1, "idempotency_key": "e"}
    with pytest.raises(Rejected) as e:
        read({**base, "msg": "charge committed"}, v)
    assert str(e.value) == ('"msg" is "charge committed", which [kind_patterns] \'^charge \' reads as effect_attempted '
                            "and [kind_patterns] 'committed$' as effect_committed; the line is ambiguous, make the "
                            "--map entries exclusive")
    with pytest.raises(Rejected) as e:
        read({**base, "msg": "GET /healthz"}, v)
    assert str(e.value) == ('"msg" is "GET /healthz", not a kind the auditor knows; map it with --map FILE ([kinds] '
                            '"GET /healthz" = "progress"); or, if it is not about ownership, declare it irrelevant: '
                            '[ignore] kinds = ["GET /healthz"]')


def test_the_most_specific_entry_wins_an_exact_value_over_any_pattern(tmp_path):
    """SPEC revision 3.1: an exact ``[kinds]`` value (or a built-in kind name) that a pattern of
    another kind also matches loads and is its exact kind; values no exact entry names are read by
    the pattern; only two patterns of different kinds on one value are ambiguous, for that line."""
    v = vocab(tmp_path, '[fields]\nmsg = "kind"\n[kinds]\n"claimed job" = "lease_acquired"\n'
                        "[kind_patterns]\n'^claimed' = \"progress\"\n'commit' = \"progress\"\n"
                        "'^claimed .* twice' = \"effect_attempted\"\n")
    base = {"seq": 1, "job": "k", "token": 1, "idempotency_key": "e"}
    assert read({**base, "msg": "Claimed Job"}, v)["kind"] == "lease_acquired"
    assert read({**base, "msg": "claimed jobs"}, v)["kind"] == "progress"
    assert read({**base, "msg": "effect_committed"}, v)["kind"] == "effect_committed"  # a built-in name
    assert read({**base, "msg": "committing batch"}, v)["kind"] == "progress"
    with pytest.raises(Rejected) as e:
        read({**base, "msg": "claimed x twice"}, v)
    assert str(e.value) == ('"msg" is "claimed x twice", which [kind_patterns] \'^claimed\' reads as progress '
                            "and [kind_patterns] '^claimed .* twice' as effect_attempted; the line is ambiguous, "
                            "make the --map entries exclusive")


def test_the_built_in_kind_names_stay_themselves_in_a_vocabulary_of_messages(tmp_path):
    v = vocab(tmp_path, '[fields]\nmsg = "kind"\n[kind_patterns]\n\'^lease\' = "lease_acquired"\n')
    assert read({"seq": 1, "job": "k", "token": 1, "msg": "lease_acquired"}, v)["kind"] == "lease_acquired"
    assert read({"seq": 1, "job": "k", "token": 1, "kind": "progress"}, v)["kind"] == "progress"


# [ignore].

def test_ignored_lines_need_no_key_or_epoch_and_a_kind_entry_wins(tmp_path):
    v = vocab(tmp_path, '[fields]\nmsg = "kind"\n[kinds]\n"cache warmed" = "progress"\n'
                        '[ignore]\nkinds = ["Cache Warmed", "config reloaded"]\nkind_patterns = [\'^GET /\']\n')
    with pytest.raises(Ignored) as e:
        read({"msg": "GET /healthz 200"}, v)
    assert (e.value.value, e.value.entry) == ("GET /healthz 200", ("kind_patterns", "^GET /"))
    with pytest.raises(Ignored) as e:
        read({"msg": "CONFIG RELOADED", "epoch": "not a number", "job": ["nested"]}, v)
    assert e.value.entry == ("kinds", "config reloaded")
    assert read({"seq": 1, "job": "k", "token": 1, "msg": "cache warmed"}, v)["kind"] == "progress"


def test_nothing_is_ignored_unless_a_vocabulary_says_so():
    with pytest.raises(Rejected, match="not a kind the auditor knows"):
        read({"seq": 1, "workflow_key": "k", "kind": "GET /healthz", "epoch": 1}, Vocabulary.default())


# Refused before any input is read: a test per error, with the file, the line and the entry.

@pytest.mark.parametrize("text, error", [
    ("[fields]\nmsg = \"kind\n", "2: not a TOML file (Illegal character '\\n', column 12); write [fields], "
     "[kinds], [kind_patterns] and [ignore] tables of name = \"canonical name\" lines (docs/FORMAT.md)"),
    ("[fields]\n\n[kinds]\ndone = ", "4: not a TOML file (Invalid value at the end of the file); write [fields], "
     "[kinds], [kind_patterns] and [ignore] tables of name = \"canonical name\" lines (docs/FORMAT.md)"),
    ("[kinds]\n\"caf\udcff\" = \"progress\"\n", "2: not a TOML file (byte 0xff is not UTF-8); save the file as UTF-8"),
    ("[kind_patterns]\n'^claimed (' = \"lease_acquired\"\n",
     "2: [kind_patterns] ^claimed ( '^claimed (' is not a regular expression Python reads (missing ), unterminated "
     "subpattern at position 9); fix the pattern (TOML literal strings, in single quotes, keep backslashes)"),
    ("[ignore]\nkind_patterns = [\n  '^GET /',\n  '[unclosed',\n]\n",
     "4: [ignore] kind_patterns '[unclosed' is not a regular expression Python reads (unterminated character set "
     "at position 0); fix the pattern (TOML literal strings, in single quotes, keep backslashes)"),
    ('[fields]\n"items[0].token" = "epoch"\n',
     "2: [fields] items[0].token = \"epoch\": a path cannot go into a list; map a member of an object (write the "
     "list's item as its own field in your logger)"),
    ('[fields]\n"lease.token" = "fencing"\n',
     '2: [fields] lease.token = "fencing": not a canonical field; use one of seq, workflow_key, kind, epoch, worker, '
     "effect_key, sink, sink_result, reporter, step_id, ts, event_id, lease_until, heartbeat, reason, authority_id, "
     "expires_at, scope, decision"),
    ("[kind_patterns]\n'^claimed' = \"acquired\"\n",
     '2: [kind_patterns] ^claimed = "acquired": not a kind the auditor knows; use one of lease_acquired, progress, '
     "effect_attempted, effect_committed, outcome_verified, authority_granted, authority_revoked, resumed, "
     "revalidated, effect_compensated"),
    ('[fields]\n"" = "kind"\n',
     '2: [fields] "" is not a usable field name; name the member of your log that holds the field'),
    ('[fields]\n"lease..token" = "epoch"\n',
     "2: [fields] lease..token is not a usable field name; a path names members joined by single dots (lease.token)"),
    # conflicting entries: one pattern two kinds, a path given two fields
    ("[kind_patterns]\n'^Done$' = \"progress\"\n'^done$' = \"effect_committed\"\n",
     '3: [kind_patterns] ^done$ = "effect_committed": the same pattern already means "progress"; remove this line'),
    ('[fields]\n"lease.token" = "epoch"\n[fields.lease]\ntoken = "seq"\n',
     '2: [fields] lease.token = "seq": "lease.token" already means "epoch"; remove this line'),
    ("[ignore]\nmessages = ['x']\n",
     "2: [ignore] messages is not an [ignore] entry; write kinds = [\"...\"] (exact values) or kind_patterns = "
     "['...'] (regular expressions)"),
    ("[ignore]\nkinds = [1, 2]\n", '2: [ignore] kinds is [1, 2], expected a list of strings: kinds = ["..."]'),
])
def test_bad_vocabularies_are_refused_with_file_line_entry_and_fix(tmp_path, text, error):
    path = tmp_path / "v.toml"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(VocabularyError) as e:
        Vocabulary.load(path)
    assert str(e.value) == f"{path}:{error}"
    done = run_cli("audit", str(FIXTURES / "seed_split_brain.jsonl"), "--map", str(path))
    assert (done.returncode, done.stderr.decode().strip()) == (2, f"Error: {e.value}")


@pytest.mark.parametrize("command", [
    ["audit", "missing.jsonl"], ["audit", "missing.jsonl", "--engine", "spark"],
    ["ingest", "missing.jsonl", "--db", "new.duckdb"], ["serve", "--port", "1", "--db", "new.duckdb"],
])
def test_every_door_refuses_a_bad_map_before_it_reads_any_input(tmp_path, command):
    """The vocabulary's error, not the missing input's nor the port's, and no store is created."""
    bad = tmp_path / "bad.toml"
    bad.write_text("[kind_patterns]\n'^claimed (' = \"lease_acquired\"\n")
    args = [str(tmp_path / a) if a.endswith((".jsonl", ".duckdb")) else a for a in command]
    done = run_cli(*args, "--map", str(bad))
    assert done.returncode == 2
    assert done.stderr.decode().startswith(f"Error: {bad}:2: [kind_patterns] ^claimed ( '^claimed (' is not a regular")
    assert not (tmp_path / "new.duckdb").exists()
