"""Regenerate the example reports committed in this folder (HTML, and the seed's Markdown and
JUnit XML), from the code as it is now. Run it with the virtualenv's Python (or activate it first):

    .venv/bin/python reports/regenerate.py           # rewrite every example report
    .venv/bin/python reports/regenerate.py --check   # exit 1 and name the reports that differ

``tests/test_html.py`` renders the same examples and fails when a committed file drifts from what
the code produces. Input file names are given relative to the folder they are audited from, so
the reports do not depend on where the repository is checked out.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:  # the checkout's code, not whichever copy is installed elsewhere
    sys.path.insert(0, str(ROOT))


def _seed():
    """SPEC section 5: one unsafe takeover, one clean handover, one single owner."""
    from auditor import audit

    with contextlib.chdir(ROOT):
        return audit("fixtures/seed_split_brain.jsonl")


def seed_split_brain() -> str:
    from auditor.render.html import render_html

    return render_html(_seed())


def seed_split_brain_markdown() -> str:
    """The seed's Markdown summary, as a CI job would publish it to its step summary."""
    from auditor.render.markdown import render_markdown

    return render_markdown(_seed())


def seed_split_brain_junit() -> str:
    """The seed's JUnit XML, one test case per workflow key."""
    from auditor.render.junit import render_junit

    return render_junit(_seed())


def payments_unfenced_200() -> str:
    """200 simulated payment runs behind a gateway with no fence: many incidents, capped cards."""
    from auditor import audit
    from auditor.render.html import render_html
    from auditor.simulate import simulate

    name = "payments_unfenced_200.jsonl"
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        simulate(200, seed=0, mode="unfenced").write(name)
        return render_html(audit(name))


def _fixture_report(stem: str) -> Callable[[], str]:
    def render() -> str:
        from auditor import audit
        from auditor.render.html import render_html

        with contextlib.chdir(ROOT):
            return render_html(audit(f"fixtures/{stem}.jsonl"))

    render.__doc__ = f"The HTML report of fixtures/{stem}.jsonl."
    return render


EXAMPLES: dict[str, Callable[[], str]] = {
    "seed_split_brain.html": seed_split_brain,
    "seed_split_brain.md": seed_split_brain_markdown,
    "seed_split_brain.junit.xml": seed_split_brain_junit,
    "payments_unfenced_200.html": payments_unfenced_200,
    # Seed 004's refund under an expired mandate: the mandate's lifetime on the timeline.
    "authority_refund.html": _fixture_report("authority_expired_refund"),
    # Seed 000's pause test: the expired lease, the heartbeat age at the takeover, the stale tool call.
    "w1_w2_pause_expired_lease.html": _fixture_report("w1_w2_pause_expired_lease"),
    # Seed 000's timing rule: a 35 s lease at risk against 30 s heartbeats with 20 s of jitter, 90 s safe.
    "lease_timing_35s_vs_90s.html": _fixture_report("lease_timing_35s_vs_90s"),
}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for name, render in EXAMPLES.items():
        path = HERE / name
        text = render()
        if check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)} ({len(text.encode()):,} bytes)")
    if stale:
        print("out of date: " + ", ".join(stale) + "; run: .venv/bin/python reports/regenerate.py",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
