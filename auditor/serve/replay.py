"""The receiver's start: the spool's acknowledged requests the store lacks, appended before the port opens.

Every number from the store's mark on is accounted for: a readable frame is decoded again as when
it was accepted and appended; a frame that cannot be read (a flipped bit, a torn sector: its
checksum fails) is one quarantined item naming the damaged bytes, so ``auditor report --db`` says
incomplete and why; a request that cannot be decoded again (whatever the decoder raises) is
quarantined with its reason and its body kept in ``<spool>/quarantine/<number>.request``. None of
them stops a start. Segments with damaged bytes are moved to ``<spool>/damaged/``.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..core.errors import StoreLocked
from ..store.spooled import Entry, Scan, scan
from .decode import decode_request
from .durable import Item, Keeper, open_store, store_position
from .spool import remove_segments

_logger = logging.getLogger("auditor.serve")


def replay(receiver) -> tuple[int, int]:
    """Append the spool's entries the store of ``receiver`` lacks; ``(last entry number, last line)``."""
    config, spool_dir = receiver.config, receiver.spool_dir
    try:
        store = open_store(receiver.db, receiver._vocabulary, config.store_wait, schema=True)  # noqa: SLF001
    except StoreLocked:
        raise StoreLocked(f"{receiver.db}: another process is using this DuckDB store (an auditor report or "
                          f"ingest); the receiver waited {config.store_wait:g} s for it (--store-wait SECONDS); "
                          "start it again once that process is done") from None
    try:
        mark, line = store_position(store)
    finally:
        store.close()
    found = scan(spool_dir, mark) if spool_dir.is_dir() else Scan()
    todo = items_of(found, mark, lambda e: _item(receiver, e))
    last = todo[-1].number if todo else mark
    if todo:
        lost = len(found.lost) + found.tail_lost
        _logger.warning("auditor serve: %d acknowledged requests were not yet in the store; appending them from the "
                        "spool%s", len(todo) - lost, f" ({lost} lost to damaged spool frames: {found.where()}; "
                        "quarantined)" if lost else "")
        keeper = Keeper(receiver.db, receiver._vocabulary, line, lambda n: None, 1 << 62, config.store_wait)  # noqa: SLF001
        for item in todo:
            keeper.put(item)
        left = keeper.close(config.store_wait)
        if left or keeper.stored_number < last:
            raise StoreLocked(f"{receiver.db}: the store could not be written within {config.store_wait:g} s "
                              f"(--store-wait); the spool {spool_dir} keeps every acknowledged request; run again "
                              "once the store is free")
        line = keeper._line  # noqa: SLF001 - the line numbering goes on
    if spool_dir.is_dir():
        remove_segments(spool_dir, {d.path for d in found.damage})
    return last, line


def items_of(found: Scan, mark: int, decode) -> list[Item]:
    """One item per number from ``mark + 1`` on: each readable entry decoded, each lost one quarantined."""
    entries = {e.number: e for e in found.entries}
    top = max([mark, *entries])
    out = []
    for n in range(mark + 1, top + 1):
        entry = entries.get(n)
        out.append(decode(entry) if entry is not None else Item(n, [], None, [_lost(n, found)]))
    for _ in range(found.tail_lost):
        top += 1
        out.append(Item(top, [], None, [_lost(None, found)]))
    return out


def _lost(number: int | None, found: Scan) -> str:
    which = f"acknowledged request {number}" if number is not None else "an acknowledged request"
    return (f"{which} was lost: its spool frame cannot be read (checksum mismatch in {found.where()}, kept in "
            "the spool's damaged/ directory); its records are not in the store")


def _item(receiver, entry: Entry) -> Item:
    """A spooled entry decoded again, as when it was accepted (same roles, same bounds); one that
    cannot be is quarantined with its reason, its body kept beside the spool."""
    meta = entry.meta
    if "refused" in meta:
        return Item(entry.number, [], None, [str(meta["refused"])])
    try:
        decoded = decode_request(meta["signal"], entry.body, meta["ctype"], meta["encoding"],
                                 receiver.config.max_body_bytes, False, frozenset(meta["roles"]),
                                 receiver.config.max_key_bytes, receiver._vocab_path,  # noqa: SLF001
                                 **_bounds(receiver.config))
        return Item(entry.number, *carry(meta["signal"], decoded))
    except Exception as e:  # noqa: BLE001 - one request never stops a start
        kept = _keep(receiver.spool_dir, entry)
        return Item(entry.number, [], None, [
            f"{meta.get('signal', 'an')} request {entry.number} refused whole on replay: it could not be decoded "
            f"({type(e).__name__}); its body is kept in {kept}"])


def _bounds(config) -> dict:
    return {"max_members": config.max_gzip_members, "time_limit": config.decode_seconds}


def _keep(spool_dir: Path, entry: Entry) -> Path:
    directory = spool_dir / "quarantine"
    directory.mkdir(mode=0o700, exist_ok=True)
    path = directory / f"{entry.number:020d}.request"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, entry.body)
        os.fsync(fd)
    finally:
        os.close(fd)
    return path


def carry(signal: str, decoded) -> tuple[list, object, list[str]]:
    """``(records, their split or None, refusal reasons)`` of a decoded request; a request refused
    whole is one reason (one quarantined item)."""
    if decoded[0] == "error":
        _, status, _ctype, message = decoded
        return [], None, [f"{signal} request refused whole ({status}): {message}"]
    _, records, reasons, prepared = decoded
    return records, prepared, reasons
