"""The words the renderers share (``render/words.py``)."""

from __future__ import annotations

import pytest

@pytest.mark.parametrize("n, noun, text", [(1, "file", "1 file"), (0, "incident", "0 incidents"),
                                           (6865, "incident", "6,865 incidents"),
                                           (2, "clean handover", "2 clean handovers")])
def test_plural_and_thousands(n, noun, text):
    from auditor.render.words import plural

    assert plural(n, noun) == text

