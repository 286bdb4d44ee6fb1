"""Stage 1, read: find the input files (directories expanded, standard input spooled).

An unreadable directory, a link to nothing or a file that cannot be opened is an error before
anything is ingested: the evidence an operator pointed at is read in full, or the audit says what
it could not read.
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import os
import stat
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from ..core.errors import InputError, LimitExceeded
from ..core.limits import Limits, how_to_raise
from ..core.summary import SkippedPath
from .contract import Progress, Source  # noqa: F401 - the reader contract, as it was named here
from .formats import COMPRESSED, SUFFIXES


def discover(paths: Iterable[str | os.PathLike], limits: Limits | None = None,
             skipped: list[SkippedPath] | None = None) -> list[Source]:
    """Expand directories (every supported file below, sorted), standard input (``-``) and FIFOs.

    What a directory holds that is not a file to read (a FIFO, a socket, a device, a symbolic link
    loop) is appended to ``skipped`` with a reason, for the input summary to show.
    """
    limits = limits or Limits()
    out: list[Source] = []
    for p in paths:
        if str(p) == "-":
            out.append(_spool(sys.stdin.buffer, "<stdin>", limits))
            continue
        path = Path(p)
        kind = _kind(path)
        if kind == "dir":
            found = sorted(f for f in _below(path, skipped if skipped is not None else []) if is_log_file(f))
            for f in found:
                _check_readable(f, path)
            out.extend(Source(str(f), f, f.stat().st_size, limits) for f in found)
        elif kind == "file":
            _check_readable(path)
            out.append(Source(str(path), path, path.stat().st_size, limits))
        elif kind == "fifo":  # a stream, like standard input (a FIFO inside a directory is skipped)
            try:  # opened once: each open of a FIFO waits for, and takes, a writer
                stream = open(path, "rb")
            except OSError as e:
                raise InputError(f"{path}: cannot read this FIFO ({e.strerror or e}); check its permissions") from e
            with stream:
                out.append(_spool(stream, str(path), limits))
        elif kind == "loop":
            raise InputError(f"{path}: symbolic link loop (the link leads back to itself); point at "
                             "the log file itself")
        elif kind == "missing":
            raise InputError(f"{path}: no such file or directory; check the path")
        else:
            raise InputError(f"{path}: not a regular file or directory ({kind})")
    return out


#: Why a directory entry that is not a file is not read (see _kind).
_SKIP_REASONS = {
    "fifo": "a FIFO (named pipe): reading it could wait forever; pass it on its own to read it as a stream",
    "socket": "a socket, not a file",
    "device": "a device, not a file",
    "loop": "symbolic link loop (the link leads back to itself)",
}


def _kind(path: Path) -> str:
    """``file``, ``dir``, ``fifo``, ``socket``, ``device``, ``loop`` or ``missing`` (links followed)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as e:
        return "loop" if e.errno == errno.ELOOP else "missing"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "device"


def _below(top: Path, skipped: list[SkippedPath]) -> list[Path]:
    """Every file below ``top``, links to files included; the rest goes to ``skipped``.

    An unreadable directory or a link to nothing is an error rather than a silent skip: the
    evidence an operator pointed at must be read in full, or the audit says what it could not read.
    """
    def refuse(e: OSError) -> None:
        raise InputError(f"{e.filename}: cannot list this directory ({e.strerror}); check its "
                         f"permissions, or move it out of {top}")

    out: list[Path] = []
    odd: list[SkippedPath] = []
    for root, _dirs, files in os.walk(top, onerror=refuse):  # links to directories not followed, as rglob
        for name in files:
            f = Path(root, name)
            kind = _kind(f)
            if kind == "file":
                out.append(f)
            elif kind == "missing":
                if f.is_symlink() and is_log_file(f):
                    raise InputError(f"{f}: broken symbolic link (its target {os.readlink(f)} is missing); "
                                     f"restore the target, or remove the link from {top}")
            else:
                odd.append(SkippedPath(str(f), _SKIP_REASONS[kind]))
    skipped.extend(sorted(odd, key=lambda x: x.path))
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


def is_log_file(path: Path) -> bool:
    if path.name.lower().endswith(_NOT_LOGS):
        return False
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    if suffixes and suffixes[-1] in COMPRESSED:
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in SUFFIXES


def _spool(stream: IO[bytes], name: str, limits: Limits) -> Source:
    """Copy a stream to a temporary file, bounded: at most ``limits.max_input_bytes`` are read,
    and of an uncompressed stream each line is kept up to one byte past ``max_line_bytes`` (the
    reader then quarantines it as too long), so ``/dev/zero`` costs neither the disk nor memory.
    """
    fd, tmp = tempfile.mkstemp(prefix="auditor-stdin-")
    # The copy holds the raw input, payloads included: gone once read (read_source), or at exit
    # (interrupt.py turns SIGTERM and SIGHUP into an exit, so atexit runs then too).
    atexit.register(Path(tmp).unlink, missing_ok=True)
    try:
        with open(fd, "wb") as out:
            _copy_bounded(stream, out, name, limits)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Source(name, Path(tmp), os.path.getsize(tmp), limits, spooled=True)


def _copy_bounded(src: IO[bytes], dst: IO[bytes], name: str, limits: Limits) -> None:
    cap = limits.max_line_bytes + 1  # what the copy keeps of one line
    total = cur = 0  # bytes read; bytes of the current line so far
    raw = None  # a compressed stream is copied as it is: its lines are bounded when decompressed
    while block := src.read(1 << 20):
        total += len(block)
        if total > limits.max_input_bytes:
            raise LimitExceeded(f"{name}: more than {limits.max_input_bytes:,} bytes, the limit on one "
                                f"input; write it to a file first, or {how_to_raise('max_input_bytes')}")
        if raw is None:
            raw = block[:2] == b"\x1f\x8b" or block[:4] == b"\x28\xb5\x2f\xfd"
        if raw:
            dst.write(block)
            continue
        first = block.find(b"\n")
        if first < 0:
            dst.write(block[:max(0, cap - cur)])
            cur += len(block)
            continue
        last = block.rfind(b"\n")
        dst.write(block[:max(0, min(first, cap - cur))])
        middle = block[first:last + 1]  # whole lines between two newlines
        dst.write(middle if cap > len(middle) else b"\n".join(line[:cap] for line in middle.split(b"\n")))
        tail = block[last + 1:]
        dst.write(tail[:cap])
        cur = len(tail)


def digest_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)
    return h.hexdigest()
