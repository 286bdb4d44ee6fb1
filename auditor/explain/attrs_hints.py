"""What a vocabulary left behind (issue 43): when the audit orders a key by observation, or a key
has no acquisition, a member kept in ``attrs`` whose values look like the authoritative order
(unique and increasing along each key) or an owner epoch (constant through a run, stepping up per
key) is named, with the entry that would use it: "``attrs.lease.revision`` looks like the
authoritative order: map it as ``seq``". Read from the first events of the store only (a sample),
and only when some key needs it; nothing is changed in the result.
"""

from __future__ import annotations

import json
from typing import Any

#: How many events (in observation order) the hint reads at most.
SAMPLE = 100_000


def attrs_hints(result: Any, sample: int = SAMPLE) -> list[str]:
    """Sentences naming ``attrs`` paths that look like ``seq`` or ``epoch``, for the keys that are
    ordered by observation (``seq``) or have no acquisition (``epoch``); [] when none needs one."""
    from ..normalize.sample import Line, Sample
    from ..normalize.suggest.values import along, epoch_like, seq_like

    rows = list(result.workflows)
    observed = any(w.ordering == "observed" for w in rows)
    unacquired = any(w.acquisitions == 0 for w in rows)
    if not (observed or unacquired):
        return []
    got = result.store.con.execute(
        "SELECT workflow_key, attrs FROM events WHERE attrs IS NOT NULL ORDER BY obs LIMIT ?", [sample]).fetchall()
    lines = []
    for key, attrs in got:
        leaves = _leaves(json.loads(attrs)) if attrs else {}
        leaves["\x00key"] = key
        lines.append(Line("", 0, [], leaves))
    picked = Sample(lines)
    out = []
    given: dict[str, int] = {}
    for line in lines:
        for p in line.leaves:
            given[p] = given.get(p, 0) + 1
    for path in sorted(p for p in given if p != "\x00key"):
        a = along(picked, path, "\x00key")
        if a.lines < 0.9 * given[path]:  # mostly integers, or it is no order
            continue
        if observed and seq_like(a) and a.pairs:
            out.append(f"`attrs.{path}` looks like the authoritative order: map it as `seq` "
                       f"(unique and increasing along each key on {a.increasing:.0%} of steps)")
        elif unacquired and epoch_like(a):
            out.append(f"`attrs.{path}` looks like an owner epoch: map it as `epoch` "
                       f"(constant through a run, stepping up in each of {a.keys_rising} keys that change)")
    return out[:5]


def _leaves(doc: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(doc, dict):
        return out
    for name, value in doc.items():
        path = f"{prefix}.{name}" if prefix else str(name)
        if isinstance(value, dict):
            out.update(_leaves(value, path))
        elif isinstance(value, (int, str)) and not isinstance(value, bool):
            out[path] = value
    return out
