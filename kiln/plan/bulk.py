"""Building and writing large plans: the cyclic garbage collector paused while they are made."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause CPython's cyclic garbage collector inside the block, and resume it after if it ran before.

    A 100,000-node plan is millions of small records that refer to nothing that refers back (hosts, NICs, scrape
    targets, their dictionaries when written): reference counting frees them, and the generational collector, which
    runs each time allocations outnumber deallocations by its threshold (700 by default, `gc.get_threshold`; the
    `gc` module's documentation), only scans them again and again as they are made. Paused, the 100,000-node plan
    takes a sixth less time (docs/benchmarks.md); anything cyclic made in the block is still collected after it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
