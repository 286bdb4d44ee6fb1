"""Which records of a request ``auditor serve`` believes: the sender's role and the key bounds.

Evidence that can lower a verdict counts only from a sender whose role may report it
(``RESTRICTED``); a workflow or effect key longer than ``max_key_bytes`` is not kept either.
Such a record is never dropped and never believed: it is refused with a reason, and the
receiver quarantines it in the store (so a verdict over that key cannot be a pass).

Runs where the request is decoded (a decoder process, or the receiver itself).
"""

from __future__ import annotations

from typing import Any

from ..normalize.reference import Rejected, normalize
from ..normalize.vocabulary import DEFAULT, Vocabulary
from .auth import ANY

#: Evidence that can turn a failing verdict into a better one, and the roles that may send it
#: (``any`` may send all). Everything else (acquisitions, progress, attempts, commits) comes from
#: any valid token. "rejection" is an ``effect_attempted`` with ``sink_result=rejected``.
RESTRICTED: dict[str, tuple[str, ...]] = {
    "rejection": ("sink",),
    "effect_compensated": ("sink", "coordinator"),
    "outcome_verified": ("verifier",),
    "authority_granted": ("coordinator",),
    "authority_revoked": ("coordinator",),
    "revalidated": ("coordinator",),
}
#: Kinds the contract names as written that are never restricted (the default vocabulary's shortcut).
_FREE = frozenset(("lease_acquired", "progress", "effect_committed"))
_KEYS = ("workflow_key", "effect_key")


def restricted(rec: dict[str, Any], vocabulary: Vocabulary = DEFAULT) -> str | None:
    """The ``RESTRICTED`` name of the evidence ``rec`` carries, or None when any sender may send it.

    A record in the contract's own words is judged from its ``kind`` (and ``sink_result``); any
    other (an alias, a ``--map`` name) through the normalizer, as the store will read it. A record
    the normalizer rejects is None: the store quarantines it with its own reason anyway."""
    kind = rec.get("kind")
    if vocabulary is DEFAULT and type(kind) is str:
        if kind in _FREE:
            return None
        if kind == "effect_attempted" and not any(_spells_sink_result(k) for k in rec if k != "sink_result"):
            result = rec.get("sink_result")
            if result is None:
                return None
            if type(result) is str:
                return "rejection" if result.strip().lower() == "rejected" else None
        elif kind in RESTRICTED:
            return kind
    try:
        out = normalize(rec.items(), vocabulary)
    except (Rejected, RecursionError, TypeError, ValueError):
        return None
    if out["kind"] == "effect_attempted":
        return "rejection" if out["sink_result"] == "rejected" else None
    return out["kind"] if out["kind"] in RESTRICTED else None


def _spells_sink_result(name: Any) -> bool:
    """Another spelling of ``sink_result`` (``Sink_Result``, ``sinkResult``): the normalizer reads
    it as the field, so the shortcut above must not decide without it."""
    return type(name) is str and name.replace("_", "").lower() == "sinkresult"


def _too_long(rec: dict[str, Any], max_key_bytes: int) -> str | None:
    for field in _KEYS:
        v = rec.get(field)
        if type(v) is str and len(v) > max_key_bytes // 4 and len(v.encode("utf-8", "surrogatepass")) > max_key_bytes:
            return (f'"{field}" is {len(v.encode("utf-8", "surrogatepass")):,} bytes, over the receiver\'s '
                    f"limit of {max_key_bytes:,} (--max-key-bytes); shorten the key or raise the limit")
    return None


def screen(records: list[dict[str, Any]], roles: frozenset[str], max_key_bytes: int,
           vocabulary: Vocabulary = DEFAULT, what: str = "record") -> tuple[list[dict[str, Any]], list[str]]:
    """``records`` split into those kept and the reasons of those refused (one per record)."""
    anyone = "any" in roles or roles == ANY
    kept, refused = [], []
    for n, rec in enumerate(records, 1):
        reason = _too_long(rec, max_key_bytes)
        if reason is None and not anyone:
            evidence = restricted(rec, vocabulary)
            if evidence is not None and not roles.intersection(RESTRICTED[evidence]):
                allowed = " or ".join((*RESTRICTED[evidence], "any"))
                reason = (f"{'a rejection (sink_result=rejected)' if evidence == 'rejection' else evidence} "
                          f"from a sender whose token has the role {', '.join(sorted(roles))}; only {allowed} "
                          "may report it (--tokens): not believed")
        if reason is None:
            kept.append(rec)
        else:
            refused.append(f"{what} {n} of this request: {reason}")
    return kept, refused
