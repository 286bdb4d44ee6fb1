"""The installed package ships every file it reads at run time."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_package_data_ships_every_non_python_file():
    """A plain ``pip install .`` gets only what package-data names (store.sql was missed once)."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["auditor"]
    package = ROOT / "auditor"
    needed = [p.relative_to(package).as_posix() for p in package.rglob("*")
              if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    assert "store.sql" in needed and "detect/detect.sql" in needed
    missing = [n for n in needed if not any(fnmatch.fnmatch(n, g) and n.count("/") == g.count("/") for g in globs)]
    assert missing == []
