"""What the words of a message say (``auditor map``'s suggestions and the quarantine hint for an
unknown kind): which kind, whether they say an effect, and whether they say something that must
never become an acquisition or a commit (a renewal, keepalive, heartbeat, release, checkpoint, or a
bare "completed"). SPEC section 2, "A suggested vocabulary": a suggestion is never dangerous; a
wrong acquisition invents an epoch, a wrong commit invents a double.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.fields import KIND_ALIASES

_WORD = re.compile(r"[a-z]+")
_ALIASES = frozenset(KIND_ALIASES)


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


REFUSED = _set("refused refuse refusing rejected reject rejection fenced denied stale superseded declined")
VERIFIED = _set("verified verify verification confirmed reconciled")
COMPENSATED = _set("compensated compensation refunded reverted undone")
REVOKED = _set("revoked revoke")
RESUMED = _set("resumed resume resuming replaying replayed")
REVALIDATED = _set("revalidated revalidate revalidation")
ACQUIRED = _set("acquired claimed granted elected takeover obtained leader taken won")
#: Words that say the effect itself happened (past tense of an effect's verb).
COMMITTED = _set("committed published wrote written charged applied delivered posted captured inserted "
                 "transferred executed emitted uploaded paid stored saved persisted accepted sent pushed "
                 "notified indexed")
#: Words that say an effect is on its way.
ATTEMPTED = _set("attempted attempt attempting publishing writing sending calling requesting request "
                 "started starting invoking submitting submitted charging posting applying capturing delivering "
                 "transferring executing inserting uploading paying pushing notifying indexing")
#: Words that say the line is about an attempt or a request, whatever its verb's tense ("payment
#: request sent", "charge attempted", "transfer submitted": a submission is a request).
TRIED = _set("attempt attempted request requested submitted")
#: Past tenses that may say the effect happened or only that it was handed on (a request
#: "returned", an index "acknowledged", an invoice "created"): never an attempt, to decide. An
#: attempt read where the commit was hides a double commit; so a past tense is never an attempt.
PAST_EFFECT = _set("created acknowledged acked returned answered responded issued queued enqueued "
                   "dispatched forwarded loaded")
#: An effect's verbs in any form: a message with one of them is never only progress (issue 45).
EFFECT = COMMITTED | ATTEMPTED | PAST_EFFECT | _set(
    "commit publish write send charge apply deliver post capture insert transfer execute emit upload pay "
    "payment payout ledger entry record push notify notification webhook index create acknowledge "
    "load loading")
#: Words of a renewal, keepalive, heartbeat, release or checkpoint: never an acquisition or a commit.
RENEWAL = _set("renew renewed renewing renewal keepalive heartbeat heartbeats beat alive ping extended "
               "extend extending refreshed refresh")
RELEASE = _set("release released releasing relinquished resigned resign abdicated stepped unlocked")
CHECKPOINT = _set("checkpoint checkpoints checkpointed")
#: A completion said of anything: progress, or with an effect's verb, to decide.
COMPLETED = _set("completed complete finished done succeeded success ok")
PROGRESS = _set("progress exported processed rows step batch working")
OWNERSHIP = _set("acquire acquiring acquired claim claiming lock lease leader leadership election elected "
                 "ownership owner")
TRYING = _set("attempting trying waiting try failed failing unable cannot lost")
LOST = _set("lost missed miss failed failing timeout expired")


@dataclass(frozen=True)
class Said:
    """What a message's words say: ``kind`` (a kind or built-in kind alias) or None; ``effect``
    when they name an effect's verb; ``never`` when they say something that is never an
    acquisition or a commit (the word that says so); ``both`` when they could be an attempt or a
    commit and do not say which."""

    kind: str | None
    effect: bool = False
    never: str | None = None
    both: bool = False


def words_of(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def say(text: str) -> Said:
    """The kind the words of ``text`` say, never dangerous: see the module's docstring."""
    from .vocabulary import DEFAULT

    known = DEFAULT.kind_of(text.strip())
    if known is not None:  # a kind name the auditor knows (or a built-in alias) means itself
        name = text.strip().lower().rsplit(".", 1)[-1]
        return Said(name if name in _ALIASES else known[0] if isinstance(known, tuple) else known)
    words = words_of(text.replace("_", " "))
    said = set(words)
    effect = bool(said & EFFECT)
    never = next((w for w in words if w in RENEWAL | RELEASE | CHECKPOINT), None)
    if said & RENEWAL:
        return Said("heartbeat_lost" if said & LOST else "heartbeat_ok", effect, never)
    if said & RELEASE:
        return Said(None, False, never)  # a release is no kind of the contract: to decide
    if said & OWNERSHIP and said & TRYING:  # trying to acquire, failed to, lost it: never an acquisition
        return Said(None, False, next(w for w in words if w in TRYING))
    for kind, kind_words in (("result_rejected", REFUSED), ("outcome_verified", VERIFIED),
                             ("effect_compensated", COMPENSATED), ("authority_revoked", REVOKED),
                             ("resumed", RESUMED), ("revalidated", REVALIDATED)):
        if said & kind_words:
            return Said(kind, effect, never)
    if said & CHECKPOINT:
        return Said("progress", effect, never)
    if said & ACQUIRED or (said & {"acquire", "claim", "lock", "lease", "ownership"}
                           and said & {"got", "took", "taking", "holding", "assumed", "assuming"}):
        if said & TRYING:
            return Said(None, effect, next(w for w in words if w in TRYING))
        return Said("lease_acquired", effect, never)
    if said & ATTEMPTED and (said & TRIED or not said & (COMMITTED | PAST_EFFECT)):
        return Said("effect_attempted", True, never)
    if said & COMMITTED and not said & PAST_EFFECT:
        if said & TRYING:
            return Said(None, True, never, both=True)
        return Said("effect_committed", True, never)
    if said & COMPLETED:
        if effect:  # "write done": an effect's verb and a completion: the lines must say which
            return Said("effect_committed", True, next(w for w in words if w in COMPLETED))
        return Said("progress", False, next(w for w in words if w in COMPLETED))
    if said & PROGRESS:
        if effect:  # "batch loaded": progress of an effect, or the effect itself: to decide
            return Said(None, True, never, both=True)
        return Said("progress", effect, never)
    if effect:
        return Said(None, True, never, both=True)
    return Said(None, effect, never)


def hint(text: str) -> str:
    """The right-hand side a quarantine hint proposes for an unknown kind ``text`` (issue 45): the
    kind its words say; for an effect's words never ``progress``; a completion, renewal, release
    or checkpoint never an acquisition or a commit; when unsure, the kinds to decide between."""
    s = say(text)
    if s.kind == "effect_committed" and s.never:  # "write done": a completion said of an effect
        return '"effect_attempted" or "effect_committed" (decide which)'
    if s.kind is not None:
        return f'"{s.kind}"'
    if s.effect:
        return '"effect_attempted" or "effect_committed" (decide which)'
    if s.never in RELEASE:
        return '"progress" if it is a worker\'s own line (a release is never an acquisition; decide)'
    if s.never in TRYING:
        return '"progress" if it carries the owner\'s epoch (an attempt to acquire, or a loss, is never an acquisition; decide)'
    return '"progress"'  # no word of an effect's verbs, past or present (EFFECT): see the module's lists
