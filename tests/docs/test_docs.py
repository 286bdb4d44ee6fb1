"""The documentation runs: README.md and every docs/*.md page are checked as sqlite-utils checks its own.

A console example is a fenced block with lines that start with ``$ auditor``, ``$ .venv/bin/auditor``
or ``$ python``. Each ``$`` line is run for real, with bash, in a temporary directory that shows the
repository's files (every top-level entry is linked there, so ``fixtures/...`` reads as from the
repository root while the files a command writes land in the temporary directory), with
``auditor`` and ``.venv/bin/auditor`` being ``sys.executable -m auditor`` and ``python`` being
``sys.executable``. The lines under a ``$`` line, up to the next one, are its output (standard
output and standard error together), compared exactly after the normalisations the pages state:
trailing spaces are ignored and a line ``...`` stands for any number of lines left out.

A command ends with the exit code its line states (``# exit 1``), else 0. A command with no output
shown is checked by its exit code alone, so it may not state 2 (the audit could not run): an example
of an error shows its ``Error:`` line.

Markers, an HTML comment on the line before a block (invisible on the rendered page):

- ``<!-- slow: why -->``: the block takes long even among the console examples (a simulated run, a
  Spark session), which are all ``@pytest.mark.slow`` (each line is a real subprocess); a block with
  ``--engine spark`` needs Spark whether marked or not, and is skipped without pyspark or Java
  (outside CI: with the environment variable ``CI`` set, as ``.ci/run`` sets it, it fails instead);
- ``<!-- not run: why -->``: required before a ```` ```text ```` block that holds ``$ auditor`` lines
  (a server that runs until stopped, a cluster): those are never run;
- ``<!-- file: PATH -->``: the block's text is the file PATH (relative to the page), byte for byte.

A ```` ```pycon ```` block is a doctest, run in this process from the repository root; the blocks of
one page share one namespace, top to bottom.

Every relative link in the pages names a file that exists inside the repository, and every
``#anchor`` a heading of its page.
"""

from __future__ import annotations

import difflib
import doctest
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: What the README may be at most: a front door, not a manual.
README_LINES = 250

PROMPT = re.compile(r"^\$ (auditor|\.venv/bin/auditor|python)( |$)")
EXIT = re.compile(r"\s+#\s*exit\s+(\d+)\s*$")
FENCE = re.compile(r"^(`{3,}|~{3,})\s*([^`\s]*)")
MARKER = re.compile(r"^<!--\s*(slow|not run|file):\s*(.+?)\s*-->$")
#: One command's budget: most examples take a few seconds, a simulated run or a Spark session minutes.
TIMEOUT = 300


@dataclass
class Block:
    page: Path
    line: int                       # 1-based line of the opening fence
    info: str                       # the fence's language, "" when none
    lines: list[str]
    markers: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def is_console(self) -> bool:
        return self.info != "text" and any(PROMPT.match(line) for line in self.lines)

    @property
    def needs_spark(self) -> bool:
        return any("--engine spark" in line for line in self.lines if line.startswith("$ "))


@dataclass
class Step:
    command: str
    exit_code: int
    output: list[str]
    line: int


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, with the marker on the line before it, if any."""
    out: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group(1), m.group(2)
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        markers = {}
        before = start - 1
        while before >= 0 and MARKER.match(lines[before].strip()):
            kind, why = MARKER.match(lines[before].strip()).groups()
            markers[kind] = why
            before -= 1
        out.append(Block(page, start + 1, info, body, markers))
        i += 1
    return out


def steps(block: Block) -> list[Step]:
    """The ``$`` lines of a console block, each with the output shown under it."""
    out: list[Step] = []
    lines = iter(enumerate(block.lines, start=block.line + 1))
    for number, line in lines:
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\"):
                command = command[:-1] + " " + next(lines)[1].strip()
            m = EXIT.search(command)
            out.append(Step(command, int(m.group(1)) if m else 0, [], number))
        elif out:
            out[-1].output.append(line)
    for step in out:
        while step.output and not step.output[-1].strip():
            step.output.pop()
    return out


ALL = [b for page in PAGES for b in blocks(page)]
CONSOLE = [b for b in ALL if b.is_console]


def _param(block: Block):
    # Every console example is slow: each ``$`` line starts the real command line in a subprocess
    # (about 40 s for the pages' examples together, minutes with the Spark and simulator ones), so
    # ``pytest -m "not slow"`` keeps only the link, file, Python and front-door checks (a few seconds).
    return pytest.param(block, id=block.where, marks=[pytest.mark.slow])


def matches(expected: list[str], actual: list[str]) -> bool:
    """``expected`` equals ``actual`` line for line, where a line ``...`` stands for any lines."""
    expected = [line.rstrip() for line in expected]
    actual = [line.rstrip() for line in actual]
    # reach[j]: the first j actual lines can be matched by the expected lines seen so far
    reach = [True] + [False] * len(actual)
    for want in expected:
        if want == "...":
            for j in range(1, len(reach)):
                reach[j] = reach[j] or reach[j - 1]
        else:
            reach = [False] + [reach[j - 1] and actual[j - 1] == want for j in range(1, len(reach))]
    return reach[-1]


@pytest.fixture(scope="module")
def spark_ready():
    why = None
    try:
        import pyspark  # noqa: F401
    except ImportError:
        why = "the spark extra is not installed"
    if why is None and shutil.which("java") is None:
        why = "no Java runtime: Spark needs Java 17 or newer"
    if why and os.environ.get("CI"):  # in CI a missing Java is a failure, never a silent skip
        pytest.fail(why, pytrace=False)
    if why:
        pytest.skip(why)


def workdir(tmp: Path) -> dict[str, str]:
    """``tmp`` made to look like the repository root, and the environment the commands run in."""
    for entry in ROOT.iterdir():
        if not entry.name.startswith("."):
            (tmp / entry.name).symlink_to(entry)
    tools = tmp / ".docs-bin"
    venv = tmp / ".venv" / "bin"
    tools.mkdir()
    venv.mkdir(parents=True)
    for path, text in ((tools / "auditor", f'exec "{sys.executable}" -m auditor "$@"\n'),
                       (venv / "auditor", f'exec "{sys.executable}" -m auditor "$@"\n'),
                       (tools / "python", f'exec "{sys.executable}" "$@"\n')):
        path.write_text("#!/bin/sh\n" + text)
        path.chmod(0o755)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AUDITOR_", "FORCE_COLOR", "COLUMNS", "PYTEST_"))}
    env.update(PATH=f"{tools}{os.pathsep}{env.get('PATH', '')}", PYTHONUNBUFFERED="1", NO_COLOR="1")
    return env


@pytest.mark.parametrize("block", [_param(b) for b in CONSOLE])
def test_console_example(block: Block, tmp_path: Path, request):
    if block.needs_spark:
        request.getfixturevalue("spark_ready")
    env = workdir(tmp_path)
    if block.needs_spark:  # the JVM's C1 compiler only, as the suite's own session (conftest)
        env["JDK_JAVA_OPTIONS"] = "-XX:TieredStopAtLevel=1"
    for step in steps(block):
        run = subprocess.run(["bash", "-c", step.command], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT)
        actual = run.stdout.splitlines()
        while actual and not actual[-1].strip():
            actual.pop()
        where = f"{block.page.relative_to(ROOT)}:{step.line}: $ {step.command}"
        if not step.output and "--quiet" in step.command.split():
            # --quiet prints nothing, on stdout or stderr (with --engine spark: not the JVM's warnings)
            assert actual == [], f"{where}\n--quiet printed:\n{run.stdout}"
        if step.output and not matches(step.output, actual):
            diff = "\n".join(difflib.unified_diff(step.output, actual, "shown", "printed", lineterm=""))
            pytest.fail(f"{where}\nthe output differs from the page's:\n{diff}")
        assert run.returncode == step.exit_code, (
            f"{where}\nexit {run.returncode}, the page says {step.exit_code}; it printed:\n{run.stdout}")


def test_every_example_says_what_it_checks():
    """No command is checked by exit 2 alone, and every block of commands that is not run says why."""
    wrong = []
    for block in CONSOLE:
        for step in steps(block):
            if step.exit_code == 2 and not step.output:
                wrong.append(f"{block.where}: `$ {step.command}` states exit 2 and shows no output: "
                             "show the Error: line it prints")
            if step.exit_code not in (0, 1, 2, 3):
                wrong.append(f"{block.where}: exit {step.exit_code} is none of the auditor's codes")
    for block in ALL:
        held = any(PROMPT.match(line) for line in block.lines)
        if block.info == "text" and held and "not run" not in block.markers:
            wrong.append(f"{block.where}: a text block of commands needs <!-- not run: why --> on the line before")
    assert not wrong, "\n".join(wrong)
    assert len(CONSOLE) >= 10, "the pages hold fewer console examples than they did"


@pytest.mark.parametrize("block", [pytest.param(b, id=b.where) for b in ALL if "file" in b.markers])
def test_a_block_that_shows_a_file_is_that_file(block: Block):
    path = (block.page.parent / block.markers["file"]).resolve()
    assert path.is_relative_to(ROOT) and path.is_file(), f"{block.where}: {block.markers['file']} is no file here"
    assert path.read_text(encoding="utf-8").splitlines() == block.lines, (
        f"{block.where} differs from {path.relative_to(ROOT)}")


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.info == "pycon" for b in blocks(p))],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_python_examples(page: Path, monkeypatch):
    """A page's pycon blocks, top to bottom, share one namespace, as a reader reads them."""
    monkeypatch.chdir(ROOT)
    names: dict = {}
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for block in (b for b in blocks(page) if b.info == "pycon"):
        test = doctest.DocTestParser().get_doctest("\n".join(block.lines) + "\n", names, block.where,
                                                   str(block.page), block.line)
        runner.run(test, out=lambda text, where=block.where: pytest.fail(f"{where}:\n{text}"), clear_globs=False)
        names = test.globs
    assert runner.failures == 0 and runner.tries > 0


# Links.

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def slugs(page: Path) -> set[str]:
    """The anchors GitHub gives the headings of ``page`` (a repeated heading gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    inside = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            inside = not inside
        if inside or not line.startswith("#"):
            continue
        text = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", text.replace("`", "")).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(page: Path) -> list[tuple[int, str]]:
    out = []
    inside = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        if FENCE.match(line):
            inside = not inside
            continue
        if not inside:
            out += [(number, target) for target in LINK.findall(line)]
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_points_at_a_file_in_the_repository(page: Path):
    wrong = []
    for number, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:: outside, not checked here
            continue
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.is_relative_to(ROOT):
            wrong.append(f"{page.name}:{number}: {target} leaves the repository")
        elif not where.exists():
            wrong.append(f"{page.name}:{number}: {target}: no such file")
        elif anchor and where.suffix == ".md" and anchor not in slugs(where):
            wrong.append(f"{page.name}:{number}: {target}: no heading #{anchor} in {where.name}")
    assert not wrong, "\n".join(wrong)


def test_the_readme_is_a_front_door():
    """Short, and its second set-up command is the one CI runs, verbatim."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(readme) <= README_LINES, f"README.md has {len(readme)} lines; move the reference into docs/"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()[-1]
    assert ci in readme, "the README's second set-up command is no longer what .ci/run runs"
    linked = {Path(t.partition("#")[0]).name for _, t in links(ROOT / "README.md")}
    missing = [p.name for p in PAGES[1:] if p.name not in linked]
    assert not missing, f"README.md links no docs page {missing}"
