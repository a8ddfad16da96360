"""Pausing Python's cyclic garbage collector around bounded bursts of allocation.

A Spark task of an epoch builds hundreds of thousands of short-lived containers (decoded
records, tuples, result rows) while the restored window state — millions of objects — is alive.
CPython's collector runs a collection every few hundred container allocations and a full one
each time the number of surviving objects grows by a quarter, and a full collection walks every
live container: measured here, ``json.loads`` of 850k flat records took 1.96 s with the
collector on and 0.41 s with it paused, next to a 2M-tuple heap.

The data path does not rely on the collector: its objects are freed by reference counting, and
what could form a cycle (an exception's traceback, say) is rare and small.  So a task pauses the
collector for its own duration and restores it afterwards; whatever cyclic garbage the task left
is collected by the next ordinary collection.  Nothing changes in what the task computes.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator, TypeVar

T = TypeVar("T")


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic collector inside the block; it is re-enabled only if it was enabled before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def paused_iteration(items: Iterator[T]) -> Iterator[T]:
    """``items`` with the collector paused from the first item to the last, for ``mapInArrow`` functions.

    The pause spans the whole task, including PySpark's Arrow writer between two batches (it
    allocates little): re-enabling the collector at every batch would let each batch pay a
    collection over every object the task still holds.  The collector is restored when the
    iteration ends, fails or is closed.
    """
    with gc_paused():
        yield from items
