"""``auditor map`` judged by the audit it gives unedited (issue 43): for every shape run of the
corpus (``corpus_shapes.py``), suggest a vocabulary from the log, audit the log with it as written,
and compare the findings (grade, workflow key, seq) with the simulation's truth.

    .venv/bin/python bench/map_corpus.py [--runs N] [--keep DIR]

Prints one row per shape run: exact or not, the findings missed and invented, the lines
quarantined, the exit code, and ``FALSE PASS`` where the audit passed (exit 0) over a truth with a
finding at or above ``stale_attempt``. Exit 1 when fewer than 90% are exact or any passes falsely.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from auditor import audit  # noqa: E402
from auditor.core.errors import NoEvents  # noqa: E402
from auditor.core.model import Grade  # noqa: E402
from auditor.normalize.suggest import suggest  # noqa: E402
from auditor.normalize.suggest.writer import render  # noqa: E402
from corpus_shapes import ShapeRun, corpus  # noqa: E402

_ORDER = list(Grade)


@dataclass(frozen=True)
class Row:
    run: ShapeRun
    exact: bool
    missed: int
    invented: int
    quarantined: int
    exit_code: int
    false_pass: bool


def serious(truth) -> bool:
    """Whether the truth holds a finding at or above ``stale_attempt`` (the default --fail-on)."""
    return any(_ORDER.index(Grade(g)) >= _ORDER.index(Grade.STALE_ATTEMPT) for g, _k, _s in truth)


def judge(run: ShapeRun, folder: Path) -> Row:
    vocab = folder / f"{run.path.name}.map.toml"
    vocab.write_text(render(suggest([run.path])), encoding="utf-8")
    try:
        with audit([run.path], vocabulary=vocab) as result:
            got = frozenset((f.grade.value, f.workflow_key, f.seq) for f in result.findings)
            code, quarantined = result.verdict.exit_code, result.input.quarantined
    except NoEvents:  # every line quarantined: the CLI's "no events" exit, never a pass
        got, code, quarantined = frozenset(), 2, -1
    return Row(run, got == run.truth and quarantined == 0, len(run.truth - got), len(got - run.truth),
               quarantined, code, code == 0 and serious(run.truth))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8, help="simulated runs per log (default 8)")
    parser.add_argument("--keep", type=Path, help="write the logs and vocabularies here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        rows = [judge(run, folder) for run in corpus(folder, args.runs)]
        took = time.perf_counter() - t0
    print(f"{'shape':<20} {'run':<22} {'truth':>5} {'exact':>5} {'missed':>6} {'invented':>8} "
          f"{'quarantined':>11} {'exit':>4}")
    for r in rows:
        print(f"{r.run.family:<20} {r.run.mode + '/' + str(r.run.seed):<22} {len(r.run.truth):>5} "
              f"{'yes' if r.exact else 'NO':>5} {r.missed:>6} {r.invented:>8} {r.quarantined:>11} "
              f"{r.exit_code:>4}{'  FALSE PASS' if r.false_pass else ''}")
    exact = sum(r.exact for r in rows)
    false = sum(r.false_pass for r in rows)
    print(f"exact {exact} of {len(rows)} ({exact / len(rows):.0%}); false passes {false}; {took:.1f} s")
    return 0 if exact >= 0.9 * len(rows) and not false else 1


if __name__ == "__main__":
    sys.exit(main())
