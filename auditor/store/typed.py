"""The store's typed append: Python records the stage query's fast path would take, handed to it
as Arrow columns instead of JSON text (``Store.append_records``, the live doors' writer).

Which records qualify is one rule, ``typed``, that the live shortcut follows too
(``otel.convert``): every member a canonical field named as in the contract, no null, typed
values with nothing to fix, no optional field of SPEC sections 7 and 8, and values JSON carries
unchanged (strings that are not blank and cannot be read as an object or array, integers in 64
bits); ``split`` adds that ``attrs`` be an object of plain JSON values. Its columns are what the
fast path reads from the record's JSON line; the stage query then computes ``ts``, ``ts_utc``,
the derived ``event_id`` and the accounting from them exactly as for the line. Every other record
goes the JSON way, through the normalizer, and the live audit checks it the same way.
tests/store/test_store_typed.py pins the result to the careful store.

``prepare`` does the split where the records are made, ahead of the append: ``auditor serve``'s
decoder processes, off the receiver's GIL (the split is a third of the store writer's Python).
"""

from __future__ import annotations

import functools
import json
import math
from typing import Any, NamedTuple

from ..normalize.reference import _payload_key, _ts, redact
from ..core.fields import CORE_FIELDS, CORE_KINDS, EFFECT_KINDS, KINDS, REGISTRY, REPORTERS, SINK_RESULTS

_KINDS = frozenset(k for k in KINDS if k in CORE_KINDS)  # the stage's $kinds
_EFFECT_KINDS = frozenset(EFFECT_KINDS)
_SINK_RESULTS = frozenset(SINK_RESULTS)
_REPORTERS = frozenset(REPORTERS)
#: Strings the fast path keeps as written: not blank (DuckDB's trim removes spaces only: strip is
#: stricter), not readable as an object or array, no NUL.
_TEXT_FIELDS = frozenset(s.name for s in REGISTRY if s.revision == "1" and s.role in ("key", "text"))
#: Revision 1's fields: a record with a later one goes the JSON way.
_ALLOWED = frozenset((*CORE_FIELDS, "attrs"))
_MAX, _MIN = (1 << 63) - 1, -(1 << 63)
_DEPTH = 32
COLUMNS = ("line", "pos", "seq", "workflow_key", "kind", "epoch", "worker", "effect_key", "sink", "sink_result",
           "reporter", "step_id", "ts", "event_id", "attrs")


def _plain(v: Any, depth: int) -> int:
    """0 when ``v`` is not plain JSON that round-trips unchanged; 1 when it is; 2 when it also holds
    a payload-like key (redaction rewrites it)."""
    t = type(v)
    if t is str:
        return 1 if "\x00" not in v else 0
    if t is bool or v is None:
        return 1
    if t is int:
        return 1 if _MIN <= v <= _MAX else 0
    if t is float:
        return 1 if math.isfinite(v) else 0
    if depth >= _DEPTH:
        return 0
    found = 1
    if t is dict:
        for k, x in v.items():
            if type(k) is not str or "\x00" in k:
                return 0
            r = _plain(x, depth + 1)
            if not r:
                return 0
            if r == 2 or _payload_key(k):
                found = 2
        return found
    if t is list:
        for x in v:
            r = _plain(x, depth + 1)
            if not r:
                return 0
            found = max(found, r)
        return found
    return 0


_ATTRS_CACHE: dict[tuple, str | None] = {}


def _attrs_text(attrs: dict[str, Any], keep_payloads: bool) -> str | None | bool:
    """What the stage's ``auditor_attrs`` writes for this ``attrs`` object; False when the record
    must take the JSON way. Flat objects of strings (a span name, a tool call id) are cached."""
    flat = False
    if len(attrs) <= 4:
        try:  # join raises unless every value is a string: the test in C, per record
            "".join(attrs.values())
            flat = True
        except TypeError:
            pass
    if flat:
        key = (keep_payloads, *attrs.items())
        hit = _ATTRS_CACHE.get(key)
        if hit is not None:
            return hit
    r = _plain(attrs, 0)
    if not r:
        return False
    if r == 2 and not keep_payloads:
        attrs = redact(json.loads(json.dumps(attrs)), keep_payloads)  # redact rewrites in place: a copy
    text = json.dumps(attrs, sort_keys=True, ensure_ascii=False) if attrs else None
    # Not when a payload was hashed: the key holds the payload as given, and this memory lasts as
    # long as the process (serve's decoders: no ingest ends there to forget it, see forget_attrs).
    if flat and text is not None and (r == 1 or keep_payloads):
        if len(_ATTRS_CACHE) > 4096:
            _ATTRS_CACHE.clear()
        _ATTRS_CACHE[key] = text
    return text


def typed(fields: dict[str, Any], kind: Any) -> bool:
    """The one rule both engines' shortcuts follow: True when ``fields`` (a record's members, or a
    span's mapped ``ownership.*`` fields) of kind ``kind`` are taken as they are, by the stage's
    fast path (``split``'s columns) and by the live shortcut (``otel.convert``'s events) alike;
    False sends the record the checked way, through the normalizer, in both.

    Every member is a canonical field named as in the contract and given (not None, no optional
    field of SPEC sections 7 and 8); the kind is one of the five; ``seq`` (if given) and ``epoch``
    are integers in 64 bits (``epoch`` >= 0, or anything-free on ``outcome_verified``); the text
    fields are strings the normalizer and JSON keep as written (not blank, no NUL, not opening an
    object or array); ``workflow_key`` is given, and ``effect_key`` on effect kinds;
    ``sink_result`` and ``reporter`` are known values;
    ``ts`` is text that the normalizer does not read as epoch seconds. ``attrs`` are carried and
    never interpreted: only the store's columns need them plain (``split``)."""
    if type(kind) is not str or kind not in _KINDS or not _ALLOWED.issuperset(fields):
        return False
    for name, v in fields.items():  # one pass, as this runs per record: nothing None, text as written
        if v is None or (name in _TEXT_FIELDS and (type(v) is not str or not v or v.isspace() or v[0] in "{["
                                                   or "\x00" in v)):
            return False
    get = fields.get
    seq, epoch = get("seq"), get("epoch")
    if seq is not None and (type(seq) is not int or not _MIN <= seq <= _MAX):
        return False
    if kind != "outcome_verified":
        if type(epoch) is not int or not 0 <= epoch <= _MAX:
            return False
    elif epoch is not None and (type(epoch) is not int or not _MIN <= epoch <= _MAX):
        return False
    if "workflow_key" not in fields or (kind in _EFFECT_KINDS and "effect_key" not in fields):
        return False
    sink_result, reporter, ts = get("sink_result"), get("reporter"), get("ts")
    # ("-" in ts: not a number, no need to ask the normalizer; RFC 3339 text always has one)
    return ((sink_result is None or (type(sink_result) is str and sink_result in _SINK_RESULTS))
            and (reporter is None or (type(reporter) is str and reporter in _REPORTERS))
            and (ts is None or (type(ts) is str and "\x00" not in ts and ("-" in ts or _ts(ts)[1] is None))))


def split(records: list[tuple[int, int, dict[str, Any]]], keep_payloads: bool
          ) -> tuple[dict[str, list], list[tuple[int, int, dict[str, Any]]]]:
    """``records`` as ``(line, pos, record)`` -> (typed columns by ``COLUMNS``, the rest as given);
    ``pos`` is the record's place in its append, as the JSON way numbers it. A record is typed
    when ``typed`` says so and its ``attrs`` are plain JSON (``_attrs_text``)."""
    taken, texts, rest = [], [], []
    for item in records:
        rec = item[2]
        if type(rec) is not dict or not typed(rec, rec.get("kind")):
            rest.append(item)
            continue
        attrs = rec.get("attrs")
        text = None
        if attrs is not None:
            text = _attrs_text(attrs, keep_payloads) if type(attrs) is dict else False
            if text is False:
                rest.append(item)
                continue
        taken.append(item)
        texts.append(text)
    recs = [item[2] for item in taken]
    # a column at a time (comprehensions, not an append per field and record); the values as the
    # fast path reads them: no epoch on outcome_verified, no sink_result but on an attempt
    cols = {"line": [item[0] for item in taken], "pos": [item[1] for item in taken],
            "seq": [r.get("seq") for r in recs], "workflow_key": [r["workflow_key"] for r in recs],
            "kind": [r["kind"] for r in recs],
            "epoch": [None if r["kind"] == "outcome_verified" else r.get("epoch") for r in recs],
            "worker": [r.get("worker", "unknown") for r in recs], "effect_key": [r.get("effect_key") for r in recs],
            "sink": [r.get("sink") for r in recs],
            "sink_result": [r.get("sink_result") if r["kind"] == "effect_attempted" else None for r in recs],
            "reporter": [r.get("reporter") for r in recs], "step_id": [r.get("step_id") for r in recs],
            "ts": [r.get("ts") for r in recs], "event_id": [r.get("event_id") for r in recs], "attrs": texts}
    assert tuple(cols) == COLUMNS
    return cols, rest


@functools.cache
def schema() -> "pa.Schema":
    """The Arrow schema of typed records (``COLUMNS``)."""
    import pyarrow as pa

    ints = {"line", "pos", "seq", "epoch"}
    return pa.schema([(c, pa.int64() if c in ints else pa.string()) for c in COLUMNS])


def table(cols: dict[str, list]) -> "pa.Table":
    """``split``'s typed columns as an Arrow table (``pa.ArrowException`` or ``UnicodeError`` on a
    value Arrow cannot hold, a lone surrogate say: the caller sends those records the JSON way)."""
    import pyarrow as pa

    s = schema()
    return pa.table({c: pa.array(v, s.field(c).type) for c, v in cols.items()}, s)


class Prepared(NamedTuple):
    """A list of records split ahead of its append (``prepare``): ``typed`` (``table``) numbers each
    record by its 1-based place in the list (``line`` and ``pos`` alike: the store renumbers both),
    ``rest`` the places of the records that go the JSON way. ``Store.append_parts`` takes it when
    its own ``keep_payloads`` is the one the split was made with; ``typed`` None (Arrow refused a
    value) sends every record the JSON way."""

    typed: "pa.Table | None"
    rest: list[int]
    keep_payloads: bool


def prepare(records: list[dict[str, Any]], keep_payloads: bool = False) -> Prepared:
    """``records`` split for their append, where they are made (a decoder process)."""
    import pyarrow as pa

    cols, rest = split([(pos, pos, rec) for pos, rec in enumerate(records, 1)], keep_payloads)
    try:
        typed = table(cols)
    except (pa.ArrowException, UnicodeError):
        return Prepared(None, list(range(1, len(records) + 1)), keep_payloads)
    return Prepared(typed, [pos for _line, pos, _rec in rest], keep_payloads)
