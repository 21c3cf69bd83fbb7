"""Pausing Python's cyclic garbage collector around bulk work.

Ingest and the site each hold ~150k small row tuples at a time; every collection the
many allocations trigger walks them all again (a sixth of a site build, more of an
ingest).  They make no reference cycles, so reference counting frees everything."""
from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def no_cyclic_gc():
    """Disable the cyclic collector inside the block (re-enabled after, if it was on)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
