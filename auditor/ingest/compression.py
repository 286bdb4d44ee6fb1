"""Stage 1, read: undo gzip and zstd, member after member, reporting damage late.

A log copied off a crashed host is often cut short; the lines before the cut are evidence, so
the decompressor hands out every byte it can decode before it says what went wrong.
"""

from __future__ import annotations

import io
import zlib
from pathlib import Path
from typing import IO

from ..core.errors import InputError, LimitExceeded
from ..core.limits import RATIO_FLOOR, Limits, how_to_raise


class DamagedStream(InputError):
    """A gzip or zstd stream is cut short (``truncated``) or corrupt; the bytes before it were read."""

    def __init__(self, message: str, truncated: bool) -> None:
        super().__init__(message)
        self.truncated = truncated


def compression_of(path: Path) -> str | None:
    with open(path, "rb") as f:
        return compression_of_head(f.read(4))


def compression_of_head(magic: bytes) -> str | None:
    """The compression a file's first four bytes announce (gzip, zstd), or None."""
    if magic[:2] == b"\x1f\x8b":
        return "gzip"
    if magic == b"\x28\xb5\x2f\xfd":
        return "zstd"
    return None


def open_bytes(path: Path, limits: Limits | None = None, name: str | None = None) -> IO[bytes]:
    """A binary stream of the file's content, decompressed when it is gzip or zstd.

    A compressed stream hands out every byte it can decode; at a cut or a corruption, the read
    after the last good byte raises ``DamagedStream``. Past ``limits.max_input_bytes`` of output,
    or ``limits.max_ratio`` times the compressed bytes read, a read raises ``LimitExceeded``
    (``name`` is the file as the user knows it, for the message).
    """
    kind = compression_of(path)
    if kind is None:
        return open(path, "rb")
    return _Decompressed(path, kind, limits or Limits(), name or str(path))


class _Decompressed(io.RawIOBase):
    """gzip or zstd content, member after member (frame after frame), that reports damage late.

    ``gzip.open`` drops the block it was decoding when the file is cut short, and zstandard's
    stream reader ends a truncated frame silently: a log copied off a crashed host is exactly
    such a file, and the lines before the cut are evidence. Output per call is bounded (gzip by
    ``max_length``, zstd by feeding pieces sized to the ratio seen so far) so a highly compressed
    file does not balloon, and the limits are checked after every step.
    """

    def __init__(self, path: Path, kind: str, limits: Limits, name: str) -> None:
        self._f = open(path, "rb")
        self._kind = kind
        self._limits, self._name = limits, name
        self._step = (1 << 20) if kind == "gzip" else (16 << 10)
        self._read_in = self._made = 0  # compressed bytes read, decompressed bytes made
        self._d = self._decoder()
        self._errors: tuple[type[Exception], ...] = (zlib.error,)
        if kind == "zstd":
            import zstandard

            self._errors = (zstandard.ZstdError,)
        self._fed = False   # the current member/frame has consumed input and not yet ended
        self._in = b""      # compressed bytes not yet consumed
        self._out = bytearray()
        self._end = False
        self._damage: tuple[str, bool] | None = None  # message, truncated

    def _decoder(self):
        if self._kind == "gzip":
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj()

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        want = -1 if size is None else size
        while (want < 0 or len(self._out) < want) and not self._end:
            self._decode_some()
        take = len(self._out) if want < 0 else min(want, len(self._out))
        if take:
            with memoryview(self._out) as view:
                chunk = bytes(view[:take])
            del self._out[:take]
            return chunk
        if self._damage is not None:
            raise DamagedStream(*self._damage)
        return b""

    def readinto(self, buffer) -> int:
        chunk = self.read(len(buffer))
        buffer[:len(chunk)] = chunk
        return len(chunk)

    def _decode_some(self) -> None:
        if not self._in:
            self._in = self._f.read(self._step)
            self._read_in += len(self._in)
            if not self._in:
                self._end = True
                if self._fed:
                    self._damage = (f"the {self._kind} stream is cut short (the file is truncated)", True)
                return
        if self._kind == "gzip" and not self._fed:
            self._in = self._in.lstrip(b"\0")  # zero padding after a member, as gzip allows
            if not self._in:
                return
        try:
            if self._kind == "gzip":
                out = self._d.decompress(self._in, 4 << 20)
                rest = self._d.unconsumed_tail
            else:
                # No output bound in zstd's decompressobj: a piece is sized so that, at the ratio
                # seen so far, it makes about 4 MiB (a bomb's first pieces are 512 bytes).
                piece = 512 if not self._made else min(16 << 10, max(512, (4 << 20) * self._read_in // self._made))
                out, rest = self._d.decompress(self._in[:piece]), self._in[piece:]
        except self._errors as e:
            self._end, self._in = True, b""
            self._damage = (f"the {self._kind} stream is corrupt ({e})", False)
            return
        self._made += len(out)
        self._check_limits(self._read_in - len(rest))
        self._out += out
        self._fed = True
        if self._d.eof:  # a member or frame ended: the next one (if any) starts in unused_data
            rest = self._d.unused_data + rest
            self._d, self._fed = self._decoder(), False
        self._in = rest

    def _check_limits(self, consumed: int) -> None:
        made, lim = self._made, self._limits
        if made > lim.max_input_bytes:
            raise LimitExceeded(
                f"{self._name}: decompresses to more than {_mb(lim.max_input_bytes)}, the limit on one "
                f"input; nothing from this file was used; {how_to_raise('max_input_bytes')}")
        if made > RATIO_FLOOR and made > lim.max_ratio * consumed:
            raise LimitExceeded(
                f"{self._name}: decompresses to more than {lim.max_ratio} times its size "
                f"({_mb(made)} from {_mb(consumed)} so far), a likely decompression bomb; nothing "
                f"from this file was used; if it is a real log, {how_to_raise('max_ratio')}")

    def close(self) -> None:
        self._f.close()
        super().close()


def _mb(n: int) -> str:
    if n < (1 << 20):
        return f"{n / (1 << 10):,.1f} KiB"
    return f"{n / (1 << 20):,.1f} MiB" if n < (1 << 30) else f"{n / (1 << 30):,.1f} GiB"
