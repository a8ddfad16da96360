"""Jobs for the partitioner tests (tests/api/test_partitioners.py, test_partitioners_spark.py): module-level
functions, so Spark's Python workers unpickle them by value (registered there).

Each job reads ``records`` integers from a CollectionSource of ``splits`` splits at parallelism ``splits`` (one
split per source subtask, in order: engine/io/source.py ``assigned_splits``), repartitions them, runs a map
``spread`` at ``consumers`` subtasks, and writes to a ListSink; ``run`` returns the sink's values, the dead
letters and the map's subtasks as the status document reports them.
"""

from __future__ import annotations

from typing import Any

from engine import Partitioner, StreamExecutionEnvironment
from engine.io.collection_source import CollectionSource


class ListSink:
    """Values written (on the driver by the Spark runtime, in the task by the local one)."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def write(self, values: Any, epoch: int = 0) -> None:
        self.values.extend(values)


def plus_thousand(x: int) -> int:
    return x + 1000


def identity(x: int) -> int:
    return x


class Modulo(Partitioner):
    """Subtask ``key % num_partitions``; 13 gets ``num_partitions``, an index out of range."""

    def partition(self, key: int, num_partitions: int) -> int:
        return num_partitions if key == 13 else key % num_partitions


def first_subtask(key: int, num_partitions: int) -> int:
    return 0


def failing_key(x: int) -> int:
    if x == 7:
        raise ValueError("no key for 7")
    return x


def build(runtime: str, how: str, records: int, splits: int, consumers: int) -> tuple[StreamExecutionEnvironment,
                                                                                      ListSink]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(splits)
    if runtime == "spark":
        env.set_runtime_option("epoch_records", 4)
    numbers = env.from_source(CollectionSource(list(range(records)), num_splits=splits), source_name="numbers")
    if how == "rescale":
        moved = numbers.rescale()
    elif how == "shuffle":
        moved = numbers.shuffle()
    elif how == "rebalance":
        moved = numbers.rebalance()
    elif how == "custom":
        moved = numbers.partition_custom(Modulo(), failing_key)
    elif how == "custom_fn":
        moved = numbers.partition_custom(first_subtask, identity)
    else:
        raise ValueError(how)
    sink = ListSink()
    moved.map(plus_thousand).uid("spread").set_parallelism(consumers).sink_to(sink)
    return env, sink


def run(runtime: str, how: str, records: int, splits: int, consumers: int) -> dict[str, Any]:
    env, sink = build(runtime, how, records, splits, consumers)
    client = env.execute_async(f"partition-{how}-{runtime}")
    result = client.get_job_execution_result().result(600)
    status = client.status_details()
    spread = status["operators"]["spread"]
    return {
        "values": sorted(sink.values),
        "dead_letters": sorted(result.dead_letters, key=repr),
        "records_in": spread["records_in"],
        "subtasks": [s["records_in"] for s in spread["subtasks"]],
        "subtasks_out": [s["records_out"] for s in spread["subtasks"]],
    }
