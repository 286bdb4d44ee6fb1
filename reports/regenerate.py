"""Regenerate the example HTML reports committed in this folder, from the code as it is now.

    python reports/regenerate.py           # rewrite every example report
    python reports/regenerate.py --check   # exit 1 and name the reports that differ

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


def seed_split_brain() -> str:
    """SPEC section 5: one unsafe takeover, one clean handover, one single owner."""
    from auditor import audit
    from auditor.render.html import render_html

    with contextlib.chdir(ROOT):
        return render_html(audit("fixtures/seed_split_brain.jsonl"))


def payments_unfenced_200() -> str:
    """200 simulated payment runs behind a gateway with no fence: many incidents, capped cards."""
    from auditor import audit
    from auditor.render.html import render_html
    from auditor.simulate import simulate

    name = "payments_unfenced_200.jsonl"
    with tempfile.TemporaryDirectory() as tmp, contextlib.chdir(tmp):
        simulate(200, seed=0, mode="unfenced").write(name)
        return render_html(audit(name))


EXAMPLES: dict[str, Callable[[], str]] = {
    "seed_split_brain.html": seed_split_brain,
    "payments_unfenced_200.html": payments_unfenced_200,
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
        print("out of date: " + ", ".join(stale) + "; run: python reports/regenerate.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
