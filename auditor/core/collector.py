"""The cyclic garbage collector, paused while a big audit builds objects that hold no cycles."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a big audit builds its objects, then restore it.

    A ten-million-event audit creates millions of long-lived findings, incidents and workflow
    summaries, none of them in a reference cycle; with the collector running, each generation-2
    pass walks all of them again (a quarter of detect + explain at 1M events). It is a process-wide
    switch, so it is switched back on however the block ends, and left off if it was off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
