"""The JSON document of SPEC section 4: stable keys, lists sorted by workflow key then seq, and
byte-identical output for the same input (no run timestamps)."""

from __future__ import annotations

import json
from typing import Any

from ..result import AuditResult


def _default(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def render_json(result: AuditResult) -> str:
    return json.dumps(result.to_dict(), indent=2, ensure_ascii=False, default=_default) + "\n"
