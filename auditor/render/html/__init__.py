"""Stage 6, render: the HTML incident report, one self-contained file from one ``AuditResult``.

``context`` computes what the page shows (``ReportContext``), ``timeline`` lays out the timelines
from the detector's facts, ``format`` holds the small formatters; the Jinja templates in
``render/templates/`` only draw. Every string reaches the page through autoescaping, including SVG
``<title>`` tooltips, so a workflow key like ``<script>`` is shown as text.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from .. import visible
from ...explain.incidents import MAX_CARDS, MAX_CLEAN_TIMELINES, MAX_TIMELINES
from ...explain.result import SCHEMA, AuditResult
from ...rules.grades import ordered
from .context import ReportContext, build_context
from .format import _key_anchor, _num, _px
from .timeline import MARK, MAX_MARKS, Timeline

__all__ = ["render_html", "build_context", "environment", "ReportContext", "Timeline", "MAX_CARDS",
           "MAX_TIMELINES", "MAX_CLEAN_TIMELINES", "MAX_MARKS", "MARK", "_key_anchor"]

_TEMPLATES = Path(__file__).parent.parent / "templates"


def _visible(value: Any) -> Any:
    """Every printed value: control characters (ANSI escapes, bidi overrides) shown as ``\\xNN``.

    Autoescaping already stops markup; this stops a log from hiding or reordering text on screen.
    Markup (macro output) was built from values that passed through here already.
    """
    if isinstance(value, str) and not isinstance(value, Markup):
        return visible(value, keep_layout=True)
    return value


@lru_cache(maxsize=1)
def environment() -> Environment:
    """The one Jinja environment of the package: autoescaped, strict about missing names."""
    env = Environment(
        loader=FileSystemLoader(str(_TEMPLATES)),
        autoescape=select_autoescape(enabled_extensions=("html", "j2", "svg"), default=True,
                                     default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_visible,
    )
    env.filters["num"] = _num
    env.filters["px"] = _px
    return env


def render_html(result: AuditResult) -> str:
    """The report of ``result`` as one self-contained HTML document (inline CSS and SVG, no network).

    Deterministic: the same result gives byte-identical output. Needs no open store: the timelines
    are drawn from the facts the result carries (``result.timelines``).
    """
    return environment().get_template("report.html.j2").render(report=build_context(result), schema=SCHEMA,
                                                               grades=ordered())
