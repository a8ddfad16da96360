"""After a Sluice task, a Spark Python worker's collector walks only what later tasks allocate (engine/runtime/gc_pause.py
``freeze_survivors``): inside a real Spark task the survivors are frozen and the task's cyclic garbage is collected
first, not frozen; outside a Spark task nothing is frozen."""

from __future__ import annotations

import gc

from engine.runtime.gc_pause import paused_iteration

PROBE_DDL = "frozen_before long, frozen_after long, tracked_after long, cycle_collected boolean"


def _task(batches):
    import gc
    import weakref

    import pyarrow as pa

    from engine.runtime.gc_pause import paused_iteration

    for _ in batches:
        pass

    class Node:
        pass

    def work():
        node = Node()
        node.self = node  # cyclic garbage once the task is done with it
        yield weakref.ref(node)

    frozen_before = gc.get_freeze_count()
    refs = list(paused_iteration(work(), freeze_survivors=True))
    yield pa.RecordBatch.from_pydict({
        "frozen_before": [frozen_before], "frozen_after": [gc.get_freeze_count()],
        "tracked_after": [len(gc.get_objects())], "cycle_collected": [refs[0]() is None]})


def test_a_spark_task_freezes_what_survives_it_after_collecting_its_garbage(spark):
    rows = spark.range(2).repartition(2).mapInArrow(_task, PROBE_DDL).collect()
    assert rows
    for row in rows:
        assert row.cycle_collected  # collected before the freeze, not kept forever
        assert row.frozen_after > row.frozen_before and row.frozen_after > 10_000  # the worker's modules and all
        assert row.tracked_after < 1_000  # what a collection after the task still walks


def test_outside_a_spark_task_nothing_is_frozen():
    before = gc.get_freeze_count()
    assert list(paused_iteration(iter(range(3)), freeze_survivors=True)) == [0, 1, 2]
    assert gc.get_freeze_count() == before
