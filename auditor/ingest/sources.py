"""Stage 1, read: find the input files (directories expanded, standard input spooled).

An unreadable directory, a link to nothing or a file that cannot be opened is an error before
anything is ingested: the evidence an operator pointed at is read in full, or the audit says what
it could not read.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError

Progress = Callable[[int], None]  # called with the number of input bytes just consumed

_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".log": "jsonl",
             ".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
_COMPRESSED = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}
#: The Collector's file exporter writes one export request per line, ``{"resourceSpans": ...``.


@dataclass(frozen=True, slots=True)
class Source:
    """One input: a file, or standard input spooled to a temporary file."""

    name: str      # as the user will recognise it
    path: Path     # where the bytes are
    size: int


def discover(paths: Iterable[str | os.PathLike]) -> list[Source]:
    """Expand directories (every supported file below, sorted) and standard input (``-``)."""
    out: list[Source] = []
    for p in paths:
        if str(p) == "-":
            out.append(_spool_stdin())
            continue
        path = Path(p)
        if path.is_dir():
            found = sorted(f for f in _below(path) if _supported(f))
            for f in found:
                _check_readable(f, path)
            out.extend(Source(str(f), f, f.stat().st_size) for f in found)
        elif path.is_file():
            _check_readable(path)
            out.append(Source(str(path), path, path.stat().st_size))
        elif path.exists():
            raise InputError(f"{path}: not a regular file or directory")
        else:
            raise InputError(f"{path}: no such file or directory; check the path")
    return out


def _below(top: Path) -> list[Path]:
    """Every file below ``top``, links to files included.

    An unreadable directory or a link to nothing is an error rather than a silent skip: the
    evidence an operator pointed at must be read in full, or the audit says what it could not read.
    """
    def refuse(e: OSError) -> None:
        raise InputError(f"{e.filename}: cannot list this directory ({e.strerror}); check its "
                         f"permissions, or move it out of {top}")

    out = []
    for root, _dirs, files in os.walk(top, onerror=refuse):  # links to directories not followed, as rglob
        for name in files:
            f = Path(root, name)
            if f.is_file():
                out.append(f)
            elif f.is_symlink() and not f.exists() and _supported(f):
                raise InputError(f"{f}: broken symbolic link (its target {os.readlink(f)} is missing); "
                                 f"restore the target, or remove the link from {top}")
    return out


def _check_readable(path: Path, within: Path | None = None) -> None:
    """Fail before anything is ingested when a file cannot be opened (permissions, mostly)."""
    try:
        with open(path, "rb"):
            pass
    except OSError as e:
        where = f", or move it out of {within}" if within is not None else ""
        raise InputError(f"{path}: cannot read this file ({e.strerror or e}); check its "
                         f"permissions{where}") from e


#: Files a directory scan leaves out although their suffix is supported: the expected findings
#: (``--expect``) kept beside a log are JSON, not a log. Named explicitly, a file is always read.
_NOT_LOGS = (".expected.json",)


def _supported(path: Path) -> bool:
    if path.name.lower().endswith(_NOT_LOGS):
        return False
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if suffixes and suffixes[-1] in _COMPRESSED:
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in _SUFFIXES


def _spool_stdin() -> Source:
    tmp = tempfile.NamedTemporaryFile(prefix="auditor-stdin-", delete=False)
    # The copy holds the raw input, payloads included: gone once read (read_source), or at exit.
    atexit.register(Path(tmp.name).unlink, missing_ok=True)
    with tmp:
        shutil.copyfileobj(sys.stdin.buffer, tmp, 1 << 20)
    return Source("<stdin>", Path(tmp.name), os.path.getsize(tmp.name))


def digest_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()
