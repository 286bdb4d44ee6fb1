"""Who may talk to ``auditor serve``: bearer tokens and their roles (``--tokens FILE``).

The file holds one ``TOKEN ROLE[,ROLE...] [name=NAME] [keys=GLOB,...] [sinks=SINK,...]`` per line
(``#`` starts a comment): a token's name is what the records it delivers are attributed to (never
the token itself); ``keys`` and ``sinks`` narrow what it may report (``evidence.screen``). A request carries
``Authorization: Bearer TOKEN`` (the OTel exporters send it through ``OTEL_EXPORTER_OTLP_HEADERS``
or the Collector's ``headers``). Tokens are kept as SHA-256 digests only, looked up by digest (the
time a lookup takes says nothing about a token's characters), and never printed: an error in the
file names the line, never its token.

What each role may report is ``evidence.RESTRICTED``; ``reader`` (or ``any``) is needed to GET.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import AuditorError

ROLES = ("worker", "sink", "coordinator", "verifier", "reader", "any")
#: Roles that may POST evidence (a token that is only ``reader`` reads).
WRITERS = frozenset(("worker", "sink", "coordinator", "verifier", "any"))
READERS = frozenset(("reader", "any"))
#: Every sender without ``--tokens`` (loopback only): as before authentication existed.
ANY = frozenset(("any",))
MIN_TOKEN_CHARS = 16


class TokensError(AuditorError):
    """The ``--tokens`` file cannot be used (the message names the line and the fix)."""


@dataclass(frozen=True)
class Tokens:
    """The tokens of a ``--tokens`` file, by SHA-256 digest, each with its grants (roles and scope)."""

    by_digest: dict[bytes, frozenset[str]]

    def roles(self, authorization: str | None) -> frozenset[str] | None:
        """The roles of an ``Authorization`` header's bearer token; None when it names none we know."""
        grants = self.grants(authorization)
        return None if grants is None else scope_of(grants)[3]

    def grants(self, authorization: str | None) -> frozenset[str] | None:
        """The roles and scope (``scope_of``) of an ``Authorization`` header's bearer token."""
        if not authorization:
            return None
        scheme, _, token = authorization.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.by_digest.get(hashlib.sha256(token.strip().encode("utf-8", "surrogateescape")).digest())


def load_tokens(path: str | Path) -> Tokens:
    """Read a ``--tokens`` file; ``TokensError`` naming the file and line for anything wrong in it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte order mark (Windows editors) is not part of a token
    except (OSError, UnicodeDecodeError) as e:
        raise TokensError(f"--tokens {path}: cannot read it ({getattr(e, 'strerror', None) or e})") from None
    found: dict[bytes, tuple[int, frozenset[str]]] = {}
    names: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        where = f"--tokens {path}:{n}"
        if len(words) == 1:
            raise TokensError(f"{where}: a token without roles; write TOKEN ROLE[,ROLE...] "
                              f"with roles among {', '.join(ROLES)}")
        token, options = words[0], [w for w in words[1:] if "=" in w]
        roles = [r.strip().lower() for r in ",".join(w for w in words[1:] if "=" not in w).split(",") if r.strip()]
        scope = _scope(options, where, n, names)
        unknown = [r for r in roles if r not in ROLES]
        if unknown or not roles:
            raise TokensError(f'{where}: unknown role "{(unknown or ["?"])[0][:40]}"; roles are {", ".join(ROLES)}')
        if not (token.isascii() and token.isprintable()):
            raise TokensError(f"{where}: the token holds characters that are not printable ASCII, which an "
                              "Authorization header cannot carry as written; use a random one (openssl rand -hex 32)")
        if len(token) < MIN_TOKEN_CHARS:
            raise TokensError(f"{where}: the token is shorter than {MIN_TOKEN_CHARS} characters; use a random "
                              "one (openssl rand -hex 32)")
        digest = hashlib.sha256(token.encode()).digest()
        if digest in found:
            raise TokensError(f"{where}: the same token as line {found[digest][0]}; give each sender its own, "
                              "or list all its roles on one line")
        found[digest] = (n, frozenset(roles) | scope)
    if not found:
        raise TokensError(f"--tokens {path}: no token in it; write one TOKEN ROLE[,ROLE...] per line")
    return Tokens({d: roles for d, (_, roles) in found.items()})


#: A sender's grants are its roles plus its token's scope, as entries ``PREFIX + value`` (they
#: travel with the request to the decoder and the spool as the roles do): the token's name, the
#: workflow key globs and the sink names it may report for (``evidence.screen``).
NAME, KEYS, SINKS = "name:", "keys:", "sinks:"
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def _scope(options: list[str], where: str, n: int, names: dict[str, int]) -> frozenset[str]:
    """``name=NAME keys=GLOB[,GLOB] sinks=SINK[,SINK]`` of a token's line, as grants."""
    out, name = set(), f"tokens-line-{n}"
    for option in options:
        what, _, value = option.partition("=")
        values = [v for v in value.split(",") if v]
        if what == "name" and len(values) == 1 and set(values[0]) <= _NAME_CHARS and len(values[0]) <= 64:
            name = values[0]
        elif what in ("keys", "sinks") and values:
            out |= {(KEYS if what == "keys" else SINKS) + v for v in values}
        else:
            raise TokensError(f"{where}: {what[:20]!r} is not an option of a token; write name=NAME (letters, "
                              "digits, . _ -), keys=GLOB[,GLOB...] or sinks=SINK[,SINK...]")
    if name in names:
        raise TokensError(f"{where}: the name {name!r} is given on line {names[name]} too; name each token once")
    names[name] = n
    return frozenset(out | {NAME + name})


def scope_of(grants: frozenset[str]) -> tuple[str | None, tuple[str, ...], tuple[str, ...], frozenset[str]]:
    """``(token name, key globs, sink names, roles)`` of a sender's grants."""
    name = next((g[len(NAME):] for g in grants if g.startswith(NAME)), None)
    keys = tuple(sorted(g[len(KEYS):] for g in grants if g.startswith(KEYS)))
    sinks = tuple(sorted(g[len(SINKS):] for g in grants if g.startswith(SINKS)))
    return name, keys, sinks, frozenset(g for g in grants if ":" not in g)
