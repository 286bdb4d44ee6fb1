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
from ..store.attribution import TOKEN_ATTR
from fnmatch import fnmatchcase

from .auth import ANY, scope_of

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
    """``records`` split into those kept and the reasons of those refused (one per record).

    ``roles`` are the sender's grants (``auth.scope_of``): its roles, and its token's name, key globs
    and sink names. A record outside the token's keys or sinks is refused ("out of scope"); each
    record kept is attributed to the token's name (``attrs["auditor.token"]``, never the token)."""
    name, keys, sinks, plain = scope_of(roles)
    anyone = "any" in plain or roles == ANY
    kept, refused = [], []
    for n, rec in enumerate(records, 1):
        reason = _too_long(rec, max_key_bytes)
        evidence = None
        if reason is None and (not anyone or sinks):
            evidence = restricted(rec, vocabulary)
        if reason is None and not anyone and evidence is not None and not plain.intersection(RESTRICTED[evidence]):
            allowed = " or ".join((*RESTRICTED[evidence], "any"))
            reason = (f"{'a rejection (sink_result=rejected)' if evidence == 'rejection' else evidence} "
                      f"from a sender whose token has the role {', '.join(sorted(plain))}; only {allowed} "
                      "may report it (--tokens): not believed")
        if reason is None and (keys or sinks):
            reason = _out_of_scope(rec, name, keys, sinks, evidence)
        if reason is None:
            attrs = rec.get("attrs") if isinstance(rec.get("attrs"), dict) else {}
            if name is not None:
                rec["attrs"] = {**attrs, TOKEN: name}
            elif TOKEN in attrs:  # a sender's own claim is no attribution
                rec["attrs"] = {k: v for k, v in attrs.items() if k != TOKEN}
            kept.append(rec)
        else:
            refused.append(f"{what} {n} of this request: {reason}")
    return kept, refused


#: The attribute every record a named token delivers carries: the token's name.
TOKEN = TOKEN_ATTR
OUT_OF_SCOPE = "out of scope"


def _out_of_scope(rec: dict[str, Any], name: str | None, keys: tuple[str, ...], sinks: tuple[str, ...],
                  evidence: str | None) -> str | None:
    key = rec.get("workflow_key")
    if keys and not (isinstance(key, (str, int)) and any(fnmatchcase(str(key), g) for g in keys)):
        return (f"{OUT_OF_SCOPE}: workflow_key {str(key)[:80]!r} is not among the keys of token {name} "
                f"(keys={','.join(keys)} in --tokens): not believed")
    sink = rec.get("sink")
    if sinks and (sink is not None or evidence in ("rejection", "effect_compensated")) and str(sink) not in sinks:
        return (f"{OUT_OF_SCOPE}: sink {str(sink)[:80]!r} is not among the sinks of token {name} "
                f"(sinks={','.join(sinks)} in --tokens): not believed")
    return None
