"""The installed package ships every file it reads at run time."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def test_package_data_ships_every_non_python_file():
    """A plain ``pip install .`` gets only what package-data names (store.sql was missed once)."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["auditor"]
    package = ROOT / "auditor"
    needed = [p.relative_to(package).as_posix() for p in package.rglob("*")
              if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    assert "store/store.sql" in needed and "detect/batch/detect.sql" in needed
    missing = [n for n in needed if not any(fnmatch.fnmatch(n, g) and n.count("/") == g.count("/") for g in globs)]
    assert missing == []


def test_a_small_audit_leaves_pandas_alone(tmp_path):
    """pyarrow imports pandas, when it is installed, at a process's first ``pa.array`` or
    ``pa.scalar``: a quarter of a second of the seed's cold start. The CLI's small-file path
    builds its Arrow values without them, so a notebook's or Spark user's environment (pandas
    installed) audits the seed as fast as a bare one."""
    import importlib.util
    import os
    import subprocess
    import sys

    if importlib.util.find_spec("pandas") is None:
        import pytest

        pytest.skip("pandas is not installed here, so nothing could import it")
    code = ("import sys; from auditor.cli.app import main; sys.argv = ['auditor'] + sys.argv[1:]\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "sys.exit(100 + code if 'pandas' in sys.modules else code)")
    for log in ("seed_split_brain.jsonl", "job_log_aliases.jsonl", "empty_strings_are_absent.jsonl"):
        done = subprocess.run([sys.executable, "-c", code, "audit", str(ROOT / "fixtures" / log),
                               "--json", str(tmp_path / "out.json"), "--html", str(tmp_path / "out.html")],
                              cwd=tmp_path, capture_output=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert done.returncode in (0, 1, 3), (log, done.stderr.decode()[-500:])
