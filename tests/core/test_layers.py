"""The package is its pipeline: each stage imports only the stages below it (docs/ARCHITECTURE.md).

Every import of an auditor module, at the top of a file or inside a function, is read from the
source and checked against the layers below; one that goes up a layer fails with the file, the
line and the two layers. Inside a layer, modules import each other freely but never in a circle
(two modules that import each other, directly or through others, in one package too): that fails
with the modules and the lines.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
PACKAGE = ROOT / "auditor"

#: Bottom to top. A module belongs to the longest prefix listed; each may import only the
#: layers before its own (and its own package).
LAYERS: list[tuple[str, ...]] = [
    ("auditor.core",),
    ("auditor.rules",),
    ("auditor.ingest",),
    ("auditor.normalize",),
    ("auditor.store",),
    ("auditor.detect",),
    ("auditor.explain",),
    ("auditor.render",),
    ("auditor.pipeline",),
    ("auditor",),
    ("auditor.otel", "auditor.spark", "auditor.simulate"),
    ("auditor.serve",),
    ("auditor.cli",),
    ("auditor.__main__",),
]


def layer_of(module: str) -> tuple[int, str]:
    best = None
    for level, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and (best is None or len(name) > len(best[1])):
                best = (level, name)
    assert best is not None, f"{module} is in no layer: add it to LAYERS and docs/ARCHITECTURE.md"
    return best


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every auditor import in ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text())
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rsplit(".", 1)[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == "auditor" or target.startswith("auditor."):
                for alias in node.names:  # "from . import x" imports the module x
                    sub = f"{target}.{alias.name}"
                    is_module = (ROOT / Path(*sub.split("."))).with_suffix(".py").exists() or (
                        ROOT / Path(*sub.split(".")) / "__init__.py").exists()
                    out.append((node.lineno, sub if is_module else target))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("auditor")]
    return out


SOURCES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_import_goes_up_a_layer(path):
    here = module_name(path)
    level, name = layer_of(here)
    wrong = []
    for line, target in imports(path):
        their_level, their_name = layer_of(target)
        if their_name == name:
            continue  # within its own stage
        if their_level >= level:
            wrong.append(f"{path.relative_to(ROOT)}:{line}: {here} ({name}) imports {target} ({their_name}), "
                         "which is not below it")
    assert not wrong, "\n".join(wrong)


def test_every_stage_is_a_layer_and_the_top_is_small():
    """``ls auditor`` shows the pipeline: at most 8 modules at the top, the rest in packages that
    are layers."""
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 8, top
    for pkg in sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").exists()):
        layer_of(f"auditor.{pkg.name}")


def test_the_layer_test_catches_an_import_that_goes_up(tmp_path):
    """The check itself: an import of the store from core is refused."""
    bad = PACKAGE / "core" / "_layer_probe.py"
    bad.write_text("from ..store import Store\n")
    try:
        with pytest.raises(AssertionError, match=r"_layer_probe.py:1: auditor.core._layer_probe \(auditor.core\) "
                                                 r"imports auditor.store \(auditor.store\)"):
            test_no_import_goes_up_a_layer(bad)
    finally:
        bad.unlink()


def circles(paths: list[Path]) -> list[str]:
    """Every import circle among ``paths`` (a strongly connected set of modules, an import inside a
    function or under TYPE_CHECKING counted too), each as its modules and the lines that close it."""
    graph: dict[str, dict[str, int]] = {}
    for path in paths:
        here = module_name(path)
        graph[here] = {}
        for line, target in imports(path):
            if target != here:
                graph[here].setdefault(target, line)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[str] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while (w := stack.pop()) != v:
                part.append(w)
            part.append(v)
            if len(part) > 1:
                edges = [f"{a} imports {b} (line {graph[a][b]})" for a in sorted(part) for b in sorted(graph[a])
                         if b in part]
                found.append("; ".join(edges))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_anywhere():
    """No two modules import each other, even through others, inside a package too: a package
    imports its parts, and a part that needs something of its package's ``__init__`` or of a
    sibling that imports it takes it from a bottom module (``ingest/contract.py``,
    ``detect/batch/base.py``)."""
    found = circles(SOURCES)
    assert not found, "import circles:\n" + "\n".join(found)


def test_the_circle_check_catches_one_inside_a_package():
    a, b = PACKAGE / "core" / "_circle_probe_a.py", PACKAGE / "core" / "_circle_probe_b.py"
    a.write_text("from . import _circle_probe_b\n")
    b.write_text("def f():\n    from ._circle_probe_a import x\n")
    try:
        found = circles([*SOURCES, a, b])
        assert found == ["auditor.core._circle_probe_a imports auditor.core._circle_probe_b (line 1); "
                         "auditor.core._circle_probe_b imports auditor.core._circle_probe_a (line 2)"]
    finally:
        a.unlink()
        b.unlink()


#: The house's room sizes (issue 33): a module a newcomer can read in one sitting, a function that
#: fits on a screen and a half.
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 80


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_module_is_over_400_lines(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_MODULE_LINES, f"{path.relative_to(ROOT)} is {lines} lines: split it by what its parts do"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_function_is_over_80_lines(path):
    long = [f"{node.name} (line {node.lineno}, {node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, f"{path.relative_to(ROOT)}: {', '.join(long)}"
