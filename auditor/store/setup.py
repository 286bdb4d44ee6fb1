"""What a store's DuckDB connection needs before the first statement: the Python functions the
stage query calls (``auditor_attrs``, ``auditor_normalize``) and the check that a ``--db`` path is
a DuckDB file and never an input. Split from ``store/__init__.py``, which holds the store itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from ..core.errors import StoreError
from ..core.arrow import strings
from ..ingest.formats import COMPRESSED, SUFFIXES
from ..normalize.reference import attrs_of, normalize_line
from ..normalize.vocabulary import Vocabulary

if TYPE_CHECKING:
    import pyarrow as pa


def attrs_udf(line: str, keep_payloads: bool) -> str | None:
    try:
        attrs = attrs_of(json.loads(line), keep_payloads)  # the fast path: canonical names only
    except (ValueError, RecursionError):
        return json.dumps({"attrs_error": "attrs could not be decoded"})
    if attrs is None:
        return None
    return json.dumps(attrs, sort_keys=True, ensure_ascii=False, default=str)


#: attrs_udf of values seen before in this ingest: (its argument, keep_payloads) -> its result. A
#: log repeats a few attrs (the 2M-event benchmark log has 11 distinct ones), and DuckDB hands the
#: function the rows of a CASE branch: vectors of a few hundred rows each, a thousand calls per
#: million lines, each decoding the same few values anew. The stage reads them back too
#: (``known_attrs``). At most ``_ATTRS_SEEN_MAX`` values, emptied when full.
_ATTRS_SEEN: dict[tuple[str, bool], str | None] = {}
_ATTRS_SEEN_MAX = 8192
#: Longer values are decoded each time: they are rarely repeated, and the memory holds them whole.
_ATTRS_SEEN_BYTES = 512
#: What the stage wraps an attrs value in before it calls the function (normalize.sql's ``picked``).
_ATTRS_OPEN, _ATTRS_CLOSE = '{"attrs":', "}"
_UNSEEN = object()


def forget_attrs() -> None:
    """Empty the attrs function's memory: it holds attrs as written, payloads before they are
    hashed, so it is kept for one ingest (``Store.transaction``) and no longer."""
    _ATTRS_SEEN.clear()


def _attrs(line: str, keep_payloads: bool) -> str | None:
    if len(line) > _ATTRS_SEEN_BYTES:
        return attrs_udf(line, keep_payloads)
    out = _ATTRS_SEEN.get((line, keep_payloads), _UNSEEN)
    if out is _UNSEEN:
        out = attrs_udf(line, keep_payloads)
        if len(_ATTRS_SEEN) >= _ATTRS_SEEN_MAX:
            _ATTRS_SEEN.clear()
        _ATTRS_SEEN[line, keep_payloads] = out
    return out


def known_attrs(keep_payloads: bool) -> "pa.Table":
    """The attrs values decoded so far in this ingest, as the stage statement joins them
    (``attrs_known``: ``raw``, an attrs value's JSON text as the stage reads it, and ``attrs``,
    what the function made of it): a value seen in an earlier statement is not handed to Python
    again. A log repeats a few attrs, and each call of the function, a vector of a few hundred
    rows, cost 1.5 ms with the GIL held: 0.73 s of Python per million lines (bench/RESULTS.md).
    The function's own memory: held in this process only, and forgotten with the ingest."""
    import pyarrow as pa

    raws, outs = [], []
    for (line, keep), out in list(_ATTRS_SEEN.items()):
        if keep == keep_payloads and line.startswith(_ATTRS_OPEN) and line.endswith(_ATTRS_CLOSE):
            raws.append(line[len(_ATTRS_OPEN):-len(_ATTRS_CLOSE)])
            outs.append(out)
    # built from buffers (core.arrow): pa.array and pa.table import pandas, a quarter of a second
    # of a small audit
    return pa.Table.from_arrays([strings(raws), strings(outs)], names=["raw", "attrs"])


def attrs_batch(lines: "pa.Array", keep_payloads: "pa.Array") -> "pa.Array":
    """``attrs_udf`` over one vector of values, each distinct value decoded once: the same few
    attrs repeat across a log, and arrow matches them up without a Python step per line."""
    import pyarrow as pa

    keeps = set(keep_payloads.to_pylist()) if len(lines) >= 1024 else ()
    if len(keeps) != 1:  # a small vector (no pyarrow.compute for a small log), or mixed flags
        return strings([None if line is None else _attrs(line, bool(keep))
                        for line, keep in zip(lines.to_pylist(), keep_payloads.to_pylist())])
    import pyarrow.compute as pc

    distinct = pc.unique(lines)
    keep = bool(keeps.pop())
    attrs = pa.array([None if line is None else _attrs(line, keep) for line in distinct.to_pylist()], pa.string())
    return pc.take(attrs, pc.index_in(lines, value_set=distinct))


def normalize_udf(box: list[Vocabulary]):
    """``normalize_line`` over one arrow vector of lines (the stage's slow path)."""
    def normalize_batch(lines: "pa.Array", keep_payloads: "pa.Array") -> "pa.Array":
        vocabulary = box[0]
        return strings([None if line is None else normalize_line(line, vocabulary, bool(keep))
                        for line, keep in zip(lines.to_pylist(), keep_payloads.to_pylist())])
    return normalize_batch


#: Database file -> the vocabulary box its registered normalize function reads (this process).
VOCABULARY_BOXES: dict[str, list] = {}


def register(con: duckdb.DuckDBPyConnection, name: str, fn: Any, **options: Any) -> bool:
    """Register an arrow UDF ``VARCHAR, BOOLEAN -> VARCHAR``; False when the database has it
    already (a second Store on a file this process has open: DuckDB shares the database)."""
    try:
        con.create_function(name, fn, ["VARCHAR", "BOOLEAN"], "VARCHAR", type="arrow",
                            side_effects=False, **options)
    except duckdb.CatalogException:
        return False
    return True


#: The first bytes of files that are surely not a DuckDB store, and what they are.
_FOREIGN = ((b"PAR1", "a Parquet file"), (b"\x1f\x8b", "a gzip file"), (b"\x28\xb5\x2f\xfd", "a zstd file"),
            (b"SQLite format 3", "an SQLite database"))
#: Suffixes of inputs: a new --db named so is surely a mix-up of input and store.
_INPUT_SUFFIXES = frozenset(SUFFIXES) | frozenset(COMPRESSED)


def refuse_foreign(path: Path) -> None:
    """Raise ``StoreError`` unless ``path`` is absent or a DuckDB file ("DUCK" at byte 8).

    DuckDB itself opens a Parquet or JSON path without complaint and writes nothing the next
    run finds: an ingest that exits 0 and keeps nothing. A file with other content is never
    written into: it may be an input.
    """
    advice = "point --db at a file written by 'auditor ingest', or at a new path"
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except FileNotFoundError:
        if path.suffix.lower() in _INPUT_SUFFIXES:
            raise StoreError(f"{path}: cannot open the DuckDB store (a {path.suffix} name is for "
                             f"input, not a store); name the store .duckdb") from None
        return
    except IsADirectoryError:
        raise StoreError(f"{path}: cannot open the DuckDB store (it is a directory); {advice}") from None
    except OSError as e:
        if not os.access(path, os.F_OK):
            return
        raise StoreError(f"{path}: cannot open the DuckDB store ({e.strerror or e}); {advice}") from e
    if head[8:12] == b"DUCK":
        return
    what = next((name for magic, name in _FOREIGN if head.startswith(magic)),
                "an empty file" if not head else "not a DuckDB file")
    raise StoreError(f"{path}: cannot open the DuckDB store (it is {what}); {advice}")
