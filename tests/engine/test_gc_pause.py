"""engine/runtime/gc_pause.py: the collector is paused inside, restored after, whatever happens."""

from __future__ import annotations

import gc

import pytest

from engine.runtime.gc_pause import gc_paused, paused_iteration


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    (gc.enable if was else gc.disable)()


def test_the_collector_is_paused_inside_and_restored_after(collector_on):
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off(collector_on):
    gc.disable()
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_an_error_inside_restores_the_collector(collector_on):
    with pytest.raises(ValueError):
        with gc_paused():
            raise ValueError("boom")
    assert gc.isenabled()


def test_an_iteration_is_paused_from_its_first_item_to_its_end(collector_on):
    seen = []

    def items():
        for i in range(3):
            seen.append(gc.isenabled())
            yield i

    out = []
    for item in paused_iteration(items()):
        out.append((item, gc.isenabled()))  # the consumer runs inside the pause too
    assert out == [(0, False), (1, False), (2, False)]
    assert seen == [False, False, False]
    assert gc.isenabled()


def test_closing_an_iteration_early_restores_the_collector_and_closes_the_source(collector_on):
    closed = []

    def items():
        try:
            yield from range(10)
        finally:
            closed.append(True)

    it = paused_iteration(items())
    assert next(it) == 0 and not gc.isenabled()
    it.close()
    assert gc.isenabled()
    assert closed == [True]


def test_a_released_operator_frees_its_state_without_the_collector():
    """release() breaks the operator <-> timer service <-> context cycles, so reference counting frees the state."""
    import weakref

    from engine.clock import ManualClock
    from engine.elements import StreamRecord, Watermark
    from engine.operators.base import ListOutput, Metrics, OperatorContext
    from engine.state.key_groups import KeyGroupRange
    from engine.windowing.aggregations import builtin_aggregation
    from engine.windowing.assigners import EventTimeSessionWindows
    from engine.windowing.slicing import create_window_operator

    class Marker(dict):
        """A record that can be weakly referenced, to see when the state lets go of it."""

    def run(release: bool):
        op = create_window_operator(EventTimeSessionWindows.with_gap(10), incremental_aggregate=builtin_aggregation("sum", "n"),
                            key_selector=lambda v: v["k"], specialized=True)
        op.open(OperatorContext("w", 0, 1, 8, KeyGroupRange(0, 7), clock=ManualClock(0), metrics=Metrics()),
                ListOutput())
        value = Marker(k="a", n=1)
        op.process_batch([StreamRecord(value, 5)])
        op.process_watermark(Watermark(1))  # the session stays open: the state holds the value
        ref = weakref.ref(value)
        op.close()
        if release:
            op.release()
        return ref

    with gc_paused():
        assert run(release=True)() is None
        kept = run(release=False)
        held_by_a_cycle = kept() is not None
    gc.collect()
    assert kept() is None
    assert held_by_a_cycle, "the operator without release() is expected to be held by a reference cycle"


def test_the_worker_allocator_keeps_freed_memory_once_per_process():
    import sys

    from engine.runtime.spark import worker_memory

    first = worker_memory.keep_freed_memory()
    if sys.platform.startswith("linux"):
        assert first is True  # glibc took the thresholds
    assert worker_memory.keep_freed_memory() is first  # the second call does nothing and says the same
