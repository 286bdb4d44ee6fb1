"""The long lists of a big audit, written out as they are made and read back on demand.

Forty million events make two million findings, a million incidents and four million workflow
summaries: held as Python objects they take gigabytes, and the memory an audit needs would grow
with what it finds. A ``Spool`` holds each item as the one line of compact JSON the document
writes for it (orjson's encoding of the dataclass, see ``render.json``), in memory while the lines
are few and in an anonymous temporary file past ``IN_MEMORY``, with the offset where each line
ends. Reading an item decodes its line back into the dataclass (``decode``); the document copies
the lines as they are, so what it writes is what was encoded when the item was made.

Threading: fill a spool from one thread, then read it from any number (reads never move a shared
file position).
"""

from __future__ import annotations

import os
import re
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import orjson

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")

#: Lines held in memory before the spool moves to a temporary file.
IN_MEMORY = 16 << 20
#: Bytes read at a time when the lines are read in order.
BLOCK = 4 << 20


class Spool(Sequence, Generic[T]):
    """A sequence of items kept as JSON lines: ``append`` an item's line while the list is made,
    then read it as the list of items it stands for (``decode`` turns one line's value back into
    an item). Equal to any sequence of equal items; pickled as a plain list."""

    __slots__ = ("_decode", "_ends", "_memory", "_file", "_size", "_held", "__weakref__")

    def __init__(self, decode: Callable[[Any], T]) -> None:
        self._decode = decode
        self._ends = array("q")  # where each line ends (its newline excluded)
        self._memory: bytearray | None = bytearray()
        self._file = None
        self._size = 0  # bytes written, newlines included
        self._held: dict[int, T] = {}  # items appended one by one after the fact, kept as given

    @classmethod
    def of(cls, items: Iterable[T], decode: Callable[[Any], T]) -> "Spool[T]":
        """A spool of ``items``, each encoded as the document encodes it."""
        spool = cls(decode)
        spool.extend_items(items)
        return spool

    def append(self, item: T) -> None:
        """Add one item, as a list would: encoded as the document encodes it, and read back as the
        object given (an item of a grade the registry declares for a while may not decode)."""
        self.extend_items([item])
        self.hold(item)

    def extend_items(self, items: Iterable[Any]) -> None:
        """Add items, each encoded as the document encodes it (orjson). Each line is copied into
        one block as it is made: a bytes object from ``orjson.dumps`` keeps the buffer it was
        written in (16 KB for a finding, whatever its length), so a list of thirty thousand of
        them held 470 MB (bench/RESULTS.md)."""
        dumps, ends, at, block = orjson.dumps, self._ends, self._size, bytearray()
        for item in items:
            line = dumps(item)
            block += line
            block += b"\n"
            at += len(line)
            ends.append(at)
            at += 1
        if block:
            self._write(block, at)

    def hold(self, item: T) -> None:
        """Keep ``item`` as what the last line reads back as."""
        self._held[len(self) - 1] = item

    def append_line(self, line: bytes) -> None:
        """Add one item, given as its line of compact JSON (no newline in it)."""
        self.extend([line])

    def extend(self, lines: list[bytes]) -> None:
        """Add items, each given as its line of compact JSON."""
        if not lines:
            return
        ends, at = self._ends, self._size
        for line in lines:
            at += len(line)
            ends.append(at)
            at += 1
        self._write(b"\n".join(lines) + b"\n", at)

    def extend_block(self, block, ends: "np.ndarray") -> None:
        """Add items given as one ``block`` of lines, each followed by a newline; ``ends`` (int64)
        says where each line ends in the block (its newline excluded)."""
        if not len(ends):
            return
        base = self._size
        self._ends.frombytes((ends + base).astype("int64", copy=False).tobytes())
        self._write(block, base + len(block))

    def _write(self, block, size: int) -> None:
        self._size = size
        if self._memory is not None:
            self._memory += block
            if len(self._memory) > IN_MEMORY:
                self._file = tempfile.TemporaryFile(prefix="auditor-spool-")
                self._file.write(self._memory)
                self._memory = None
        else:
            self._file.write(block)

    def _read(self, start: int, stop: int) -> bytes:
        if self._memory is not None:
            with memoryview(self._memory) as view:
                return bytes(view[start:stop])
        self._file.flush()
        return os.pread(self._file.fileno(), stop - start, start)

    def __len__(self) -> int:
        return len(self._ends)

    def _start(self, i: int) -> int:
        return self._ends[i - 1] + 1 if i else 0

    def line(self, i: int) -> bytes:
        """The JSON line of item ``i`` (a non-negative index)."""
        return self._read(self._start(i), self._ends[i])

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        i = range(len(self))[index]  # IndexError past the end, negative indexes from it
        if i in self._held:
            return self._held[i]
        return self._decode(orjson.loads(self.line(i)))

    def __iter__(self) -> Iterator[T]:
        decode, loads, held = self._decode, orjson.loads, self._held
        i = 0
        for block in self.blocks():
            for line in block.split(b"\n"):
                yield held[i] if held and i in held else decode(loads(line))
                i += 1

    def containing(self, needles: Iterable[bytes]) -> Iterator[T]:
        """The items, in order, whose line holds one of ``needles`` (a superset the caller narrows:
        e.g. ``b'"workflow_key":' + orjson.dumps(key)``, which every item of that key holds, as its
        line is orjson's encoding). Only those lines are decoded: a report's few drawn keys read a
        million findings in the time of a byte search."""
        needles = list(dict.fromkeys(needles))
        if not needles:
            return
        # one pass per block: re factors the needles' common prefix out of the alternation
        found = re.compile(b"|".join(re.escape(n) for n in needles)).finditer
        decode, loads, held = self._decode, orjson.loads, self._held
        first = 0  # the index of the block's first line
        for block in self.blocks(BLOCK):
            starts = {block.rfind(b"\n", 0, m.start()) + 1 for m in found(block)}
            i, counted = first, 0  # the index of the line starting at ``counted``
            for start in sorted(starts):
                i += block.count(b"\n", counted, start)
                counted = start
                end = block.find(b"\n", start)
                line = block[start:] if end < 0 else block[start:end]
                yield held[i] if held and i in held else decode(loads(line))
            first = i + block.count(b"\n", counted) + 1

    def blocks(self, size: int = BLOCK) -> Iterator[bytes]:
        """The lines in order, in blocks of about ``size`` bytes, each whole lines joined by
        newlines (no newline at either end)."""
        n, start = len(self), 0
        ends = self._ends
        while start < n:
            # the first line ending at or past the block's size, by bisection over the ends
            lo, hi, first = start, n - 1, self._start(start)
            while lo < hi:
                mid = (lo + hi) // 2
                if ends[mid] - first >= size:
                    hi = mid
                else:
                    lo = mid + 1
            yield self._read(first, ends[lo])
            start = lo + 1

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        where = "in memory" if self._memory is not None else "in a temporary file"
        return f"{type(self).__name__}({len(self):,} items, {self._size:,} bytes {where})"

    def __reduce__(self):
        return list, (list(self),)

    def close(self) -> None:
        """Let the lines go (the temporary file is deleted); the spool reads as empty after."""
        if self._file is not None:
            self._file.close()
        self._file, self._memory, self._ends, self._size = None, bytearray(), array("q"), 0
        self._held = {}


def json_blocks(items: Sequence, size: int = BLOCK) -> Iterator[bytes]:
    """The document's lines of ``items`` in blocks as ``Spool.blocks`` gives them: a spool's own
    lines, or each item encoded by orjson (a plain list: a distributed audit's merge, a narrowed
    result)."""
    if isinstance(items, Spool):
        yield from items.blocks(size)
        return
    dumps, block = orjson.dumps, bytearray()  # copied as made: see Spool.extend_items
    for item in items:
        if block:
            block += b"\n"
        block += dumps(item)
        if len(block) >= size:
            yield bytes(block)
            block = bytearray()
    if block:
        yield bytes(block)
