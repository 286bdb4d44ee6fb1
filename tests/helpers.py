"""Helpers shared by test modules of several stages (each stage's own stay in its module)."""

from __future__ import annotations

import ctypes
import dataclasses
import os
from pathlib import Path

from auditor import audit
from auditor.core.model import Event
from auditor.detect.live.detector import detect_events
from auditor.otel.convert import event_from_record
from auditor.simulate import shapes

from .conftest import FIXTURES, ev, write_jsonl


def event(d: dict, file: str | None = None, line: int | None = None, position: int | None = None) -> Event:
    """A canonical dict as an ``Event`` (read from ``file:line``), through the live door's one
    converter (as the span processor reads it: e.g. ``epoch`` on ``outcome_verified`` is ignored).
    Its ``position`` is ``line`` unless told: one file, one event a line."""
    return dataclasses.replace(event_from_record(d), file=file, line=line,
                               position=line if position is None else position)


def engine_findings(engine: str, specs: list, tmp_path) -> list:
    """Every finding of a one-key history by ``engine``; the live one is fed the same events, in
    seq order, with the file and line the batch one reads them from."""
    dicts = [ev(s) if isinstance(s, str) else s for s in specs]
    path = write_jsonl(tmp_path / "h.jsonl", dicts)
    if engine == "batch":
        with audit([path]) as result:
            return result.findings
    events = [event(d, file=str(path), line=n) for n, d in enumerate(dicts, 1)]
    events.sort(key=lambda e: (e.seq, e.line))
    return detect_events(events)


def without_dac_override():
    """Run the child without root's power to read any file, so permissions bite as for everyone."""
    if os.geteuid() != 0:
        return None
    libc = ctypes.CDLL(None, use_errno=True)

    def drop() -> None:
        for cap in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
            if libc.prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP: gone after exec
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    return drop


# Logs as teams write them (SPEC section 2, revision 3): a shaped fixture, its canonical twin and
# its vocabulary, by the shape's name in ``auditor.simulate.shapes.SHAPES``.

def shaped(name: str) -> Path:
    return FIXTURES / f"{name}{shapes.SHAPES[name][1]}"


def twin(name: str) -> Path:
    return FIXTURES / f"{name}_canonical.jsonl"


def vocabulary(name: str) -> Path:
    return FIXTURES / f"{name}.map.toml"


def without_places(doc):
    """A document without what differs between two files of one evidence: file names, lines."""
    if isinstance(doc, list):
        return [without_places(x) for x in doc]
    if isinstance(doc, dict):
        return {k: without_places(v) for k, v in doc.items() if k not in ("file", "line", "files")}
    return doc
