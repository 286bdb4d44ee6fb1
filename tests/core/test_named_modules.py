"""Every module, SQL file or template a docstring or a comment names exists (issue 47).

Modules move (``store.py`` became ``store/``, ``health_live.py`` became ``detect/lease/live.py``)
and prose that names the old place sends a reader nowhere. Two checks over the package:

- a file named in a docstring, a Python comment or a SQL comment (``x.py``, ``a/b.sql``,
  ``report.html.j2``) exists: a bare name anywhere in the repository, a path under ``auditor/`` or
  the repository's root;
- a dotted name in a docstring (````store.typed.prepare````) starts with a module or package of
  ``auditor`` (``store``, ``typed``, ...), or with one of ``OTHER_NAMES``: other libraries, OTel
  attribute namespaces, variables.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from ..conftest import ROOT

PACKAGE = ROOT / "auditor"
_SKIP = (".venv", ".git", "__pycache__", "node_modules")
FILES = [p for p in ROOT.rglob("*") if p.is_file() and not any(s in p.parts for s in _SKIP)]
PATHS = {str(p.relative_to(ROOT)) for p in FILES} | {str(p.relative_to(PACKAGE)) for p in FILES
                                                       if PACKAGE in p.parents}
BASENAMES = {p.name for p in FILES}
MODULES = {p.stem for p in PACKAGE.rglob("*.py")} | {p.name for p in PACKAGE.rglob("*") if p.is_dir()}

#: A file's name: ``x.py``, ``a/b.sql``, ``_timeline.html.j2`` (not ``spark.sql.shuffle``, a setting).
FILE = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+(?:\.html|\.css)?\.(?:py|sql|j2))(?![\w.]*\w)")
#: A dotted name in double back-quotes: ````store.typed.prepare````.
DOTTED = re.compile(r"``([a-z_][a-z0-9_]*)\.([A-Za-z_][\w.]*)``")
#: First parts of dotted names that are not the package's modules.
OTHER_NAMES = frozenset({
    "auditor",  # the public API (auditor.audit) and the names of our metrics, logger and attributes
    "dataclasses", "duckdb", "google", "gzip", "orjson", "pa", "random", "re", "typer", "weakref", "zlib",
    "gen_ai", "service",  # OTel attribute namespaces
    "attrs", "evidence_lost", "input",  # paths into an event's attrs and into the JSON document
    "self", "e", "provider", "logger_provider", "object", "source", "strconv",  # variables, types, Go
})


def _texts(path: Path):
    """``(line, text, is_docstring)`` of every docstring and comment of ``path``."""
    src = path.read_text()
    if path.suffix == ".sql":
        for i, line in enumerate(src.splitlines(), 1):
            if "--" in line:
                yield i, line[line.index("--"):], False
        return
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc:
                yield getattr(node, "lineno", 1), doc, True
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type == tokenize.COMMENT:
            yield tok.start[0], tok.string, False


def missing_names(path: Path) -> list[str]:
    wrong = []
    where = path.relative_to(ROOT)
    for line, text, is_doc in _texts(path):
        for m in FILE.finditer(text):
            name = m.group(1)
            if (name not in PATHS) if "/" in name else (name not in BASENAMES):
                wrong.append(f"{where}:{line}: names {name}, which does not exist")
        if is_doc:
            for m in DOTTED.finditer(text):
                first = m.group(1)
                if first not in MODULES and first not in OTHER_NAMES and not FILE.fullmatch(m.group(0).strip("`")):
                    wrong.append(f"{where}:{line}: names ``{m.group(1)}.{m.group(2)}``, and {first} is no module "
                                 "of the package (name where it lives now, or add it to OTHER_NAMES)")
    return wrong


SOURCES = sorted([*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.sql")])


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_every_module_a_docstring_or_comment_names_exists(path):
    wrong = missing_names(path)
    assert not wrong, "\n".join(wrong)


def test_the_check_catches_a_module_that_moved(tmp_path):
    probe = PACKAGE / "core" / "_names_probe.py"
    probe.write_text('"""Split from ``store_typed.prepare`` and health_live.py."""\n# see detect/authorize.py\n')
    try:
        assert missing_names(probe) == [
            "auditor/core/_names_probe.py:1: names health_live.py, which does not exist",
            "auditor/core/_names_probe.py:1: names ``store_typed.prepare``, and store_typed is no module of the "
            "package (name where it lives now, or add it to OTHER_NAMES)",
            "auditor/core/_names_probe.py:2: names detect/authorize.py, which does not exist"]
    finally:
        probe.unlink()
