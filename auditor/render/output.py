"""Writing a report file whole or not at all.

A report is written to a temporary file beside its destination and renamed over it once complete:
a full disk, a file size limit or an interrupt leaves the previous file (or none), never a
truncated report that looks finished.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

from ..core.errors import OutputError


def write_atomic(path: str | os.PathLike, content: str | bytes | Callable[[IO[str]], None],
                 inputs: Iterable[str | os.PathLike] = ()) -> None:
    """Write ``content`` (text, bytes, or a function writing text to a file) to ``path`` atomically.

    Raises ``OutputError`` naming ``path`` when it cannot be written (nothing is left behind), or
    when it is one of ``inputs``: a report never replaces the evidence it was made from.
    """
    path = Path(path)
    for given in inputs:
        if str(given) != "-" and _same(path, Path(given)):
            raise OutputError(f"{path}: is one of the inputs; write the report to another file")
    binary = isinstance(content, bytes)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise OutputError(f"{path}: cannot write the report ({e.strerror or e}); check that its "
                          "folder exists and is writable") from e
    try:
        with open(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as out:
            if callable(content):
                content(out)
            else:
                out.write(content)
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        else:  # mkstemp makes 0600: give the report the permissions any new file would get
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise OutputError(f"{path}: cannot write the report ({e.strerror or e}); nothing was "
                              "written; free space or choose another place") from e
        raise


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and os.path.samefile(a, b)
    except OSError:
        return False
