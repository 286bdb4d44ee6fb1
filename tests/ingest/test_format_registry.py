"""The input-format registry (``auditor.ingest.formats.FORMATS``) is the one place a format is
declared: every format in it is recognised from its content, discovered by its suffixes in a
directory, accepted by ``--format``, has a fixture that audits, and is documented."""

from __future__ import annotations

import functools
import gzip
import re
import shutil
from pathlib import Path

import pytest
import typer

from auditor import audit
from auditor.cli.options import input_format
from auditor.core.errors import InputError
from auditor.ingest import detect_format, discover
from auditor.ingest.formats import FORMATS, NAMES
from auditor.ingest.sources import Source

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p for d in ("fixtures", "tests/corpus") for p in (ROOT / d).iterdir()
                  if p.is_file() and not p.name.endswith((".json", ".toml", ".py", ".md")))


def _format_of(path: Path) -> str | None:
    try:
        return detect_format(Source(path.name, path, path.stat().st_size))
    except InputError:  # a corpus file made to be unreadable
        return None


def _vocabulary(path: Path) -> Path | None:
    """The ``--map`` file kept beside a fixture, if any."""
    found = path.with_name(path.name.split(".")[0] + ".map.toml")
    return found if found.exists() else None


@functools.cache
def _example(name: str) -> Path:
    """A fixture whose format (by name and content) is ``name`` and that audits cleanly (with its
    vocabulary file, when it has one)."""
    for path in EXAMPLES:
        if _format_of(path) != name or "truncated" in path.name or "not_" in path.name:
            continue
        return path
    pytest.fail(f"no fixture in fixtures/ or tests/corpus/ is in the {name} format: add one")


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_every_format_has_a_fixture_that_audits_with_format_named(fmt):
    path = _example(fmt.name)
    named = audit([path], fmt=fmt.name, vocabulary=_vocabulary(path))
    auto = audit([path], vocabulary=_vocabulary(path))
    try:
        assert named.input.events > 0, path
        assert named.input.quarantined == auto.input.quarantined
        assert [(f.id, f.grade) for f in named.findings] == [(f.id, f.grade) for f in auto.findings]
    finally:
        named.close()
        auto.close()


#: CSV is what a nameless file is read as when no other format recognises its content.
@pytest.mark.parametrize("fmt", [f for f in FORMATS if f.name != "csv"], ids=lambda f: f.name)
def test_every_format_is_recognised_by_content_without_a_name(fmt, tmp_path):
    path = _example(fmt.name)
    anonymous = tmp_path / "upload"
    shutil.copyfile(path, anonymous)
    assert _format_of(anonymous) == fmt.name


def test_a_nameless_file_is_never_read_as_csv_but_standard_input_still_may_be(tmp_path):
    """SPEC rev 3.1: a file whose suffix names no format is JSONL or logfmt by its first line, never
    CSV (its lines are then quarantined as not JSON, each named, rather than its first line taken as
    a header); standard input, which has no name, still falls back to CSV."""
    anonymous = tmp_path / "upload"
    shutil.copyfile(_example("csv"), anonymous)
    assert _format_of(anonymous) == "jsonl"
    assert detect_format(Source("<stdin>", anonymous, anonymous.stat().st_size)) == "csv"
    (tmp_path / "three.txt").write_text('time=1 msg="claimed job" job=J rev=1\nmsg=x job=J rev=2\nmsg=y job=J rev=3\n')
    assert _format_of(tmp_path / "three.txt") == "logfmt"


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f.suffixes], ids=lambda f: f.name)
def test_every_suffix_is_found_in_a_directory_compressed_or_not(fmt, tmp_path):
    data = _example(fmt.name).read_bytes()
    for suffix in fmt.suffixes:
        (tmp_path / f"plain{suffix}").write_bytes(data)
        (tmp_path / f"packed{suffix}.gz").write_bytes(gzip.compress(data))
    (tmp_path / "notes.txt").write_text("not a log\n")
    found = sorted(Path(s.name).name for s in discover([tmp_path]))
    assert found == sorted([f"plain{s}" for s in fmt.suffixes] + [f"packed{s}.gz" for s in fmt.suffixes])


def test_format_option_takes_exactly_the_registry():
    assert NAMES == ("auto",) + tuple(f.name for f in FORMATS)
    for name in NAMES:
        assert input_format(name) == name
    with pytest.raises(typer.Exit) as refused:
        input_format("xml")
    assert refused.value.exit_code == 2


CLI_DOC = (ROOT / "docs" / "CLI.md").read_text()


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_every_format_and_suffix_is_documented(fmt):
    synopsis = re.search(r"--format (auto\|[a-z|]+)\]", CLI_DOC).group(1).split("|")
    assert synopsis == list(NAMES), "docs/CLI.md's synopsis lists other formats than --format takes"
    option = next(line for line in CLI_DOC.splitlines() if line.startswith("| `--format FORMAT`"))
    assert f"`{fmt.name}`" in option, f"docs/CLI.md's option table does not name {fmt.name}"
    for suffix in fmt.suffixes:
        assert f"`{suffix}`" in CLI_DOC, f"docs/CLI.md does not say a directory is read for {suffix} files"
