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

**After a task, in a Spark Python worker** (``freeze_survivors``).  PySpark's worker runs a full
``gc.collect()`` after every task it reuses the worker for (pyspark/daemon.py).  A worker that ran Sluice's
tasks holds about 90k tracked objects — the functions, classes and dicts of the 900-odd modules it imported —
and that collection walked them all: 23-30 ms per task, measured in a reused worker after two column-form
runs (bench/probe_worker_gc.py), and two thirds of the workers' samples in py-spy at 1k keys, where an epoch's
tasks do little else.  So at its end a Sluice task collects once itself and then moves every survivor to the
permanent generation (``gc.freeze()``): the collections after it walk only what later tasks allocate.  Frozen
objects are still freed by reference counting; only a cycle among them that dies later would never be
collected, and what survives a task is modules, their functions and caches, which live as long as the
worker.
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


def paused_iteration(items: Iterator[T], *, freeze_survivors: bool = False) -> Iterator[T]:
    """``items`` with the collector paused from the first item to the last, for ``mapInArrow`` functions.

    The pause spans the whole task, including PySpark's Arrow writer between two batches (it
    allocates little): re-enabling the collector at every batch would let each batch pay a
    collection over every object the task still holds.  The collector is restored when the
    iteration ends, fails or is closed.  ``freeze_survivors``: once the iteration ended, inside a Spark
    task, collect and freeze what survived (the module docstring).
    """
    with gc_paused():
        yield from items
    if freeze_survivors and _in_spark_task():
        gc.collect()
        gc.freeze()


def _in_spark_task() -> bool:
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - the Spark runtime's tasks always have pyspark
        return False
    return TaskContext.get() is not None
