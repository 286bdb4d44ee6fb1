"""The receiver's spool: an append-only, fsynced journal of accepted requests, so that 200 means kept.

A request is acknowledged only once its entry (the body as received, with the sender's roles, or
the reason a request was refused whole) is on disk: a thread of its own writes every entry that
waits, then one ``fdatasync`` for all of them (group commit: concurrent senders share the disk's
latency, a lone sender pays it once per request). Entries are numbered; the store writer
(``durable``) appends them in that order and marks the last number in the store in the same
transaction, and a segment whose entries are all in the store is deleted. At start the entries
after the store's mark are replayed, so each is stored exactly once, whatever instant the receiver
died at.

Layout: ``DIR/<first entry number>.spool`` segments of frames ``magic, length, crc32, number,
payload`` (``store.spooled``: the format, and how a replay finds a damaged frame and counts the
requests it held as lost); the payload is a JSON header line and the body. A frame cut short at
the end of a segment (the write under way when the process died, never acknowledged) is not
evidence.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from ..store.spooled import Entry, frame

_logger = logging.getLogger("auditor.serve")
SEGMENT_BYTES = 16 << 20


class SpoolError(OSError):
    """The spool could not be written: nothing of the batch is acknowledged."""


class Spool:
    """Group commit of entries to ``directory``; numbers start at ``next_number``.

    ``submit(meta, body, done)`` is thread safe and never blocks on the disk: ``done(number, error)``
    is called from the spool's thread, in number order, once the entry is on disk (error None) or
    could not be written (nothing of its batch is then on disk, and no number is used).
    """

    def __init__(self, directory: Path, next_number: int, segment_bytes: int = SEGMENT_BYTES) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._next = next_number
        self._segment_bytes = segment_bytes
        self._cond = threading.Condition()
        self._pending: list[tuple[dict[str, Any], bytes, Callable[[int, BaseException | None], None]]] = []
        self._closing = False
        self._closed_segments: list[tuple[Path, int]] = []  # (path, last number), oldest first
        self._fd = -1
        self._path: Path | None = None
        self._size = 0
        self._last_written = next_number - 1
        self._stored = next_number - 1  # entries up to this one are in the store
        self.written = 0       # entries on disk
        self.syncs = 0         # fdatasync calls (group commits)
        self._thread = threading.Thread(name="auditor.serve.spool", target=self._run, daemon=True)
        self._thread.start()

    def submit(self, meta: dict[str, Any], body: bytes, done: Callable[[int, BaseException | None], None]) -> None:
        """Queue an entry; ``done(number, error)`` once it is on disk (see the class docstring)."""
        with self._cond:
            if self._closing:
                done(-1, SpoolError("the receiver is shutting down"))
                return
            self._pending.append((meta, body, done))
            self._cond.notify()

    def committed(self, number: int) -> None:
        """Every entry up to ``number`` is in the store: delete the segments that hold only those
        (the spool's thread closes the active one once it is all stored and large enough)."""
        with self._cond:
            self._stored = max(self._stored, number)
            done = [s for s in self._closed_segments if s[1] <= number]
            self._closed_segments = [s for s in self._closed_segments if s[1] > number]
            if self._rotate_due():
                self._cond.notify()
        for path, _ in done:
            path.unlink(missing_ok=True)

    def close(self) -> None:
        """Write what waits, stop the thread; the segments stay until ``committed`` says they are
        stored (or for the replay at the next start). Idempotent."""
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join()
        self.committed(self._stored)

    def _rotate_due(self) -> bool:
        return self._fd >= 0 and (self._size >= self._segment_bytes or (
            self._last_written <= self._stored and self._size >= self._segment_bytes // 4))

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closing and not self._rotate_due():
                    self._cond.wait()
                batch, self._pending = self._pending, []
                closing = self._closing
            if batch:
                self._write(batch)
            with self._cond:
                if self._rotate_due() or (closing and not self._pending):
                    self._rotate()
                if closing and not self._pending:
                    return

    def _write(self, batch: list[tuple[dict[str, Any], bytes, Callable[[int, BaseException | None], None]]]) -> None:
        entries, frames = [], []
        number = self._next
        for meta, body, _done in batch:
            payload = orjson.dumps(meta) + b"\n" + body
            frames.append(frame(number, payload))
            frames.append(payload)
            entries.append(Entry(number, meta, body))
            number += 1
        data = b"".join(frames)
        try:
            if self._fd < 0:
                self._open(self._next)
            start = self._size
            try:
                _write_all(self._fd, data)
                os.fdatasync(self._fd)
            except OSError:
                os.ftruncate(self._fd, start)  # nothing of this batch counts
                raise
        except OSError as e:
            _logger.error("auditor serve: cannot write the spool in %s (%s); requests are refused until it can",
                          self.directory, e.strerror or e)
            for item in batch:
                item[2](-1, SpoolError(str(e)))
            return
        self._size += len(data)
        self._next = number
        self._last_written = number - 1
        self.written += len(batch)
        self.syncs += 1
        for entry, (_meta, _body, done) in zip(entries, batch):
            done(entry.number, None)

    def _open(self, first: int) -> None:
        self._path = self.directory / f"{first:020d}.spool"
        self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._size = os.fstat(self._fd).st_size
        dfd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dfd)  # the new name itself is durable
        finally:
            os.close(dfd)

    def _rotate(self) -> None:
        """Close the active segment (it stays until its entries are stored); the next write opens one."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            if self._size and self._last_written > self._stored:
                self._closed_segments.append((self._path, self._last_written))
            else:  # empty, or every entry in it is stored
                self._path.unlink(missing_ok=True)
            self._size = 0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def remove_segments(directory: Path, damaged: set[Path] = frozenset()) -> None:
    """Remove every segment of a spool whose entries are all in the store (after a replay); those
    with ``damaged`` bytes are moved to ``DIR/damaged/`` for whoever looks into the loss."""
    for path in directory.glob("*.spool"):
        if path in damaged:
            (directory / "damaged").mkdir(mode=0o700, exist_ok=True)
            path.replace(directory / "damaged" / path.name)
        else:
            path.unlink(missing_ok=True)
