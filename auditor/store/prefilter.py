"""What the stage statement needs to know of a vocabulary, as bound parameters
(``normalize/normalize.sql``'s ``stage``): which canonical kinds its fast path may still take as
written, and the lists with which it decides ignored lines (SPEC rev 3, ``[ignore]``) without
calling the Python normalizer.

A noisy log is mostly lines nobody needs (three of four in ``bench/noisy.py``); sending each
through ``normalize.normalize_line`` would cost them as much as evidence. The SQL decides a line
only where it provably reads it as the normalizer does (one member that can give the kind,
printable ASCII, every kind pattern rewritten for RE2 by ``normalize.kinds.re2_of``) and leaves
everything else to the normalizer; ``tests/store/test_ignore.py`` pins the two against each other.
"""

from __future__ import annotations

import re
from typing import Any

from ..core.fields import CORE_KINDS, KINDS
from ..normalize.kinds import re2_of
from ..normalize.vocabulary import Vocabulary

_LETTERS = re.compile(r"[^A-Za-z0-9]")
#: Bound where the vocabulary has no kind container ($kind_nested false: never compared).
_NOWHERE = "-"


def _letters(name: str) -> str:
    """A name's ASCII letters and digits, lower case: what the stage compares member names by
    (``name_key`` equality implies equality here, so the SQL sees every member that may count)."""
    return _LETTERS.sub("", name).lower()


def _path(*parts: str) -> str:
    return "$" + "".join('."' + p.replace("\\", "\\\\").replace('"', '\\"') + '"' for p in parts)


def stage_params(vocabulary: Vocabulary) -> dict[str, Any]:
    """The vocabulary's parameters of ``stage`` (see ``normalize/normalize.sql``)."""
    kind_names = sorted(n for n, (f, _prio) in vocabulary.fields.items() if f == "kind")
    flat = [n for n in kind_names if "." not in n]
    paths = [n.split(".") for n in kind_names if "." in n]
    out: dict[str, Any] = {
        # canonical kinds a fast line may carry: those the vocabulary's entries leave as themselves
        "fast_kinds": [k for k in KINDS if k in CORE_KINDS and vocabulary.kind_of(k) == (k, {})],
        # a path into attrs makes attrs a container: the fast path would keep it whole
        "fast_ok": "attrs" not in vocabulary.containers,
        "prefilter": False, "kind_nested": False, "kind_relevant": [_letters(n) for n in kind_names], "kind_flat": flat,
        "kind_flat_paths": [_path(n) for n in flat], "kind_container": _NOWHERE,
        "kind_container_path": _path(_NOWHERE), "kind_leaf": _NOWHERE, "kind_leaf_letters": _NOWHERE,
        "kind_path": _path(_NOWHERE), "kind_keys": sorted(vocabulary.rules.exact),
        "kind_union": None, "ignore_keys": sorted(vocabulary.rules.ignore_exact), "ignore_union": None,
    }
    rules = vocabulary.rules
    if not rules.ignores or len(paths) > 1 or any(len(p) > 2 for p in paths):
        return out
    kind_res = [re2_of(p.text) for p in rules.patterns]
    if any(r is None for r in kind_res):  # a kind pattern RE2 cannot read: SQL cannot rule it out
        return out
    ignore_res = [r for r in (re2_of(p.text) for p in rules.ignore_patterns) if r is not None]
    if not ignore_res and not rules.ignore_exact:
        return out
    if paths:
        (container, leaf), = paths
        out.update(kind_relevant=out["kind_relevant"] + [_letters(container)], kind_nested=True, kind_container=container,
                   kind_container_path=_path(container), kind_leaf=leaf, kind_leaf_letters=_letters(leaf),
                   kind_path=_path(container, leaf))
    out.update(prefilter=True, kind_union=_union(kind_res), ignore_union=_union(ignore_res))
    return out


def _union(patterns: list[str]) -> str | None:
    """One RE2 pattern that matches where any of ``patterns`` does (None: none)."""
    return "|".join(f"(?:{p})" for p in patterns) if patterns else None
