"""Stage 2's SQL normalizer: the ``stage`` statement of ``normalize.sql``, which every line of a
batch audit passes (its fast path, and the call into ``reference`` for the rest). The store runs it
inside its append (``store/appending.py``), with the vocabulary's parameters (``store/prefilter.py``).
"""

from __future__ import annotations

from ..core.sql import statements

#: ``{name: sql}`` of ``normalize/normalize.sql``, its column lists expanded from the field registry.
SQL = statements("normalize/normalize.sql")
