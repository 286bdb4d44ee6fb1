"""The receiver's spool as the store sees it: its frame format, what it holds beyond the store, and
who holds the store.

``auditor serve`` acknowledges a request once its frame is fsynced in ``<db>.spool/`` and appends
it to the store later (``serve.spool``, ``serve.durable``); the store's ``sources`` row
``serve-spool:<number>`` marks the last frame appended. This module reads the spool without the
receiver, so ``auditor report --db`` never claims a pass while acknowledged evidence is still only
in the spool (``backlog``), and it keeps one receiver per store (``hold``).

A frame is ``magic, length, crc32, number`` then the payload (a JSON header line and the body).
Frames written since issue 44 (magic ``ASP2``) checksum the number and length with the payload; the
older ``ASP1`` frames checksum the payload only and are still read. Numbers are consecutive, so a
frame that cannot be read is found by its number missing between those that can (``Scan.lost``),
wherever it sits; only bytes after the last readable frame of a segment that end the file short
(a write cut by the process's death, never acknowledged) are not evidence.
"""

from __future__ import annotations

import fcntl
import os
import struct
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ..core.errors import StoreLocked

FRAME = struct.Struct("<4sIIQ")
MAGIC, OLD_MAGIC = b"ASP2", b"ASP1"
SOURCE, MARK = "otlp:serve", "serve-spool:"
HOLDER = "holder"  # the lock file in the spool directory


def spool_of(db: str | os.PathLike) -> Path:
    """The spool directory of the store ``db`` (``<db>.spool``)."""
    db = Path(db)
    return db.with_name(db.name + ".spool")


def frame(number: int, payload: bytes) -> bytes:
    """One frame's header for ``payload`` (``ASP2``: the checksum covers number and length too)."""
    return FRAME.pack(MAGIC, len(payload), _crc(number, payload), number)


def _crc(number: int, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(struct.pack("<IQ", len(payload), number)))


@dataclass(frozen=True)
class Entry:
    """One spooled request: ``meta`` (signal, content type, encoding, roles, ``at``; or a
    refusal's reason) and its body."""

    number: int
    meta: dict[str, Any]
    body: bytes


@dataclass(frozen=True)
class Damage:
    """Bytes of a segment that hold no readable frame (``path``, from ``offset``, ``length`` bytes)."""

    path: Path
    offset: int
    length: int

    def where(self) -> str:
        return f"{self.path.name} bytes {self.offset:,}-{self.offset + self.length - 1:,}"


@dataclass
class Scan:
    """A spool read through: ``entries`` in number order, the ``damage`` found, and the numbers
    of acknowledged requests no readable frame holds (``lost``), from ``after`` on."""

    entries: list[Entry] = field(default_factory=list)
    damage: list[Damage] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    tail_lost: int = 0  # damaged bytes after the last readable frame: at least one request each

    def where(self) -> str:
        """The damaged bytes, named (at most three places)."""
        places = ", ".join(d.where() for d in self.damage[:3])
        return places + (f" and {len(self.damage) - 3} more" if len(self.damage) > 3 else "")


def _segment(path: Path, data: bytes, scan: Scan, good: list[Entry]) -> None:
    """The frames of one segment into ``good``; unreadable bytes into the scan's damage list."""
    at, end = 0, len(data)
    while at < end:
        entry, size = _frame_at(data, at)
        if entry is not None:
            good.append(entry)
            at += size
            continue
        nxt = _next_frame(data, at + 1)
        if nxt is None:
            if not _torn(data, at):
                scan.damage.append(Damage(path, at, end - at))
                scan.tail_lost += 1
            return
        scan.damage.append(Damage(path, at, nxt - at))
        at = nxt


def _frame_at(data: bytes, at: int) -> tuple[Entry | None, int]:
    if at + FRAME.size > len(data):
        return None, 0
    magic, length, crc, number = FRAME.unpack_from(data, at)
    if magic not in (MAGIC, OLD_MAGIC) or at + FRAME.size + length > len(data):
        return None, 0
    payload = data[at + FRAME.size: at + FRAME.size + length]
    if crc != (_crc(number, payload) if magic == MAGIC else zlib.crc32(payload)):
        return None, 0
    head, _, body = payload.partition(b"\n")
    try:
        meta = orjson.loads(head)
    except orjson.JSONDecodeError:
        return None, 0
    return Entry(number, meta if isinstance(meta, dict) else {}, body), FRAME.size + length


def _next_frame(data: bytes, start: int) -> int | None:
    """The offset of the next readable frame at or after ``start``."""
    at = start
    while True:
        hits = [i for i in (data.find(MAGIC, at), data.find(OLD_MAGIC, at)) if i >= 0]
        if not hits:
            return None
        at = min(hits)
        if _frame_at(data, at)[0] is not None:
            return at
        at += 1


def _torn(data: bytes, at: int) -> bool:
    """The bytes from ``at`` to the end are a write cut short: a header cut, a frame whose length
    runs past the end of the file, or zeros (a file extended and never written)."""
    if at + FRAME.size > len(data) or not data[at:].strip(b"\0"):
        return True
    magic, length, _crc_, _number = FRAME.unpack_from(data, at)
    return magic in (MAGIC, OLD_MAGIC) and at + FRAME.size + length > len(data)


def scan(directory: Path, after: int = 0) -> Scan:
    """Every readable frame of the spool in ``directory`` numbered above ``after`` (the store's
    mark), and what is lost between them (see the module docstring)."""
    out = Scan()
    good: list[Entry] = []
    for path in sorted(Path(directory).glob("*.spool")):
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # stored and removed meanwhile
            continue
        _segment(path, data, out, good)
    good.sort(key=lambda e: e.number)
    seen: set[int] = set()
    for e in good:
        if e.number > after and e.number not in seen:
            seen.add(e.number)
            out.entries.append(e)
    if out.entries:
        top = out.entries[-1].number
        out.lost = [n for n in range(after + 1, top + 1) if n not in seen]
    return out


def store_mark(con) -> int:
    """The last spool entry the store holds (0 when none)."""
    # fetchall: a result left half-read blocks the connection's next relation (DuckDB 2)
    (row,) = con.execute("SELECT max(digest) FROM sources WHERE name = ? AND digest LIKE ?",
                         [SOURCE, MARK + "%"]).fetchall()
    return int(row[0][len(MARK):]) if row[0] else 0


def backlog(db: str | os.PathLike, mark: int, upto: int | None = None) -> dict[str, Any] | None:
    """What ``<db>.spool`` holds that the store at ``mark`` lacks, for the JSON document's ``spool``
    (None when nothing): acknowledged requests not yet appended (``pending_requests``, the oldest
    acknowledged at ``pending_since``) and requests whose frames cannot be read (``lost_requests``,
    ``damaged``). ``upto``: count only entries up to that number (the receiver's own view)."""
    directory = spool_of(db)
    if not directory.is_dir():
        return None
    found = scan(directory, mark)
    entries = [e for e in found.entries if upto is None or e.number <= upto]
    lost = len(found.lost) + found.tail_lost
    if not entries and not lost:
        return None
    since = min((_acked_at(e, directory) for e in entries), default=None)
    return {"pending_requests": len(entries),
            "pending_since": None if since is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since)),
            "lost_requests": lost,
            "damaged": [{"file": str(d.path), "offset": d.offset, "bytes": d.length} for d in found.damage]}


def _acked_at(entry: Entry, directory: Path) -> float:
    at = entry.meta.get("at")
    if isinstance(at, (int, float)):
        return float(at)
    try:  # a frame written before "at" was recorded: its segment's last write
        return min(p.stat().st_mtime for p in directory.glob("*.spool"))
    except (OSError, ValueError):
        return time.time()


class Hold:
    """An exclusive hold on a store's spool directory (``flock`` on ``<spool>/holder``), released
    by ``release`` or when the process ends however it ends (``kill -9`` included)."""

    def __init__(self, directory: Path, who: str) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / HOLDER
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 4096, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(self._fd)
            raise StoreLocked(f"{self.directory}: this store is held by {holder}; one receiver per store: stop "
                              "it first (a rolling deploy must stop the old receiver before the new one starts), "
                              "or send this evidence to it over OTLP/HTTP") from None
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{who} (pid {os.getpid()}, since "
                            f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())})\n".encode(), 0)

    def release(self) -> None:
        if self._fd >= 0:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing the descriptor lets go of the lock
            self._fd = -1


@contextmanager
def held_while(db: str | os.PathLike | None, who: str) -> Iterator[None]:
    """Hold ``db``'s spool while ``who`` writes the store, when it has one (a store a receiver
    writes); ``StoreLocked`` naming the holder when a receiver holds it."""
    directory = None if db is None else spool_of(db)
    hold = Hold(directory, who) if directory is not None and directory.is_dir() else None
    try:
        yield
    finally:
        if hold is not None:
            hold.release()


def iter_entries(directory: Path) -> Iterator[Entry]:
    """Every readable entry of the spool in ``directory``, in number order."""
    yield from scan(directory).entries
