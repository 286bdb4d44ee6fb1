"""The event kinds exist once (``core.kinds.Kind``): every place that must know each kind is checked
against it, so a kind added there and forgotten elsewhere fails here: both detection engines,
the receiver's role screen, the built-in aliases and the format reference."""

from __future__ import annotations

import re

import pytest

from auditor.core.fields import CORE_KINDS, EFFECT_KINDS, KIND_ALIASES, KINDS
from auditor.core.model import Kind
from auditor.serve.evidence import RESTRICTED, restricted

from ..conftest import ROOT


def _text(folder: str, suffixes: tuple[str, ...]) -> str:
    return "\n".join(p.read_text() for p in sorted((ROOT / "auditor" / folder).rglob("*")) if p.suffix in suffixes)


BATCH = _text("detect/batch", (".sql", ".py"))
LIVE = _text("detect/live", (".py",))
FORMAT = (ROOT / "docs" / "FORMAT.md").read_text()


@pytest.mark.parametrize("kind", list(Kind), ids=str)
def test_both_engines_name_every_kind(kind):
    assert f"'{kind.value}'" in BATCH or f'"{kind.value}"' in BATCH, f"detect/batch never reads {kind.value}"
    assert f"Kind.{kind.name}" in LIVE or f'"{kind.value}"' in LIVE, f"detect/live never reads {kind.value}"


@pytest.mark.parametrize("kind", list(Kind), ids=str)
def test_the_format_reference_documents_every_kind(kind):
    assert re.search(rf"`{kind.value}`", FORMAT), f"docs/FORMAT.md does not document {kind.value}"


@pytest.mark.parametrize("kind", list(Kind), ids=str)
def test_the_receiver_decides_who_may_send_every_kind(kind):
    record = {"workflow_key": "k", "kind": kind.value, "epoch": 1, "seq": 1, "effect_key": "e",
              "authority_id": "a", "decision": "continue", "sink_result": "accepted"}
    assert restricted(record) == (kind.value if kind.value in RESTRICTED else None)


def test_the_kind_lists_are_drawn_from_the_enum():
    assert KINDS == tuple(k.value for k in Kind)
    assert CORE_KINDS <= set(KINDS) and EFFECT_KINDS <= set(KINDS)
    assert set(RESTRICTED) - {"rejection"} <= set(KINDS)
    assert {kind for kind, _ in KIND_ALIASES.values()} <= set(KINDS)
