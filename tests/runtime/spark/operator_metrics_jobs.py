"""The bounded job whose per-operator counts tests/runtime/spark/test_spark_operator_metrics.py checks on both
runtimes (module-level functions: Spark's Python workers unpickle them by reference).

1000 records ``(user-(n % 5), n)`` with event time ``n`` ms from two splits of 500::

    numbers -> Filter -> FlatMap   in 1000; the filter keeps the 500 even n, the flat_map emits n twice when
                                   n % 4 == 0 (250 of them) and once otherwise (250): out 750
    window (100 ms tumbling sum)   in 750; every 100 ms window holds all five users: 10 windows x 5 = out 50
    sums -> Sink(ListSink)         a rolling sum per user: in 50, out 50 (one per input, handed to the sink)
"""

from __future__ import annotations

from typing import Any

from engine.api.environment import StreamExecutionEnvironment
from engine.api.time import Time
from engine.io.collection_source import CollectionSource
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows

RECORDS = 1000
EXPECTED = {  # uid -> (records in, records out)
    "v0.n0.numbers": (1000, 750),
    "window": (750, 50),
    "sums": (50, 50),
}


class ListSink:
    """Values written, in order (written on the driver by the Spark runtime, in the task by the local one)."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def write(self, values: Any, epoch: int = 0) -> None:
        self.values.extend(values)


def event_time(event: tuple, _ts: int) -> int:
    return event[1]


def is_even(event: tuple) -> bool:
    return event[1] % 2 == 0


def twice_if_multiple_of_four(event: tuple) -> list[tuple]:
    return [event, event] if event[1] % 4 == 0 else [event]


def user(event: tuple) -> str:
    return event[0]


def add(a: tuple, b: tuple) -> tuple:
    return (a[0], a[1] + b[1])


def build(runtime: str, parallelism: int = 2, epoch_records: int = 300,
          checkpoint_dir: str | None = None) -> tuple[StreamExecutionEnvironment, ListSink]:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(parallelism)
    env.set_max_parallelism(16)
    if runtime == "spark":
        env.set_runtime_option("epoch_records", epoch_records)
    if checkpoint_dir is not None:
        env.enable_checkpointing(10)
        env.get_checkpoint_config().set_checkpoint_storage_dir(checkpoint_dir)
    sink = ListSink()
    source = CollectionSource([(f"user-{n % 5}", n) for n in range(RECORDS)], num_splits=2)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(event_time)
    (env.from_source(source, strategy, "numbers").filter(is_even).flat_map(twice_if_multiple_of_four)
        .key_by(user).window(TumblingEventTimeWindows.of(Time.milliseconds(100))).sum(1).uid("window")
        .key_by(user).reduce(add).uid("sums").sink_to(sink))
    return env, sink


def run(runtime: str, **kwargs: Any) -> tuple[dict[str, Any], ListSink]:
    """Run the job to its end; its final status (the control API's status document) and the sink."""
    env, sink = build(runtime, **kwargs)
    client = env.execute_async(f"operator-metrics-{runtime}")
    client.get_job_execution_result().result(600)
    return client.status_details(), sink


# -- a stateless chain of its own: a map after a union of two sources --------------------------------------------
#
#    low:  n = 0..299 in two splits of 150, keeps n < 100   subtask 0: in 150, out 100; subtask 1: in 150, out 0
#    high: n = 1000..1199 in two splits of 100              subtask 0: in 100, out 100; subtask 1: in 100, out 100
#    Map -> Sink, fed over FORWARD edges from both         subtask 0: in 200, out 200; subtask 1: in 100, out 100

UNION_EXPECTED = {  # vertex name -> [(subtask, records in, records out)]
    "low -> Filter": [(0, 150, 100), (1, 150, 0)],
    "high": [(0, 100, 100), (1, 100, 100)],
    "Map -> Sink(ListSink)": [(0, 200, 200), (1, 100, 100)],
}


def below_100(event: tuple) -> bool:
    return event[1] < 100


def plus_one(event: tuple) -> tuple:
    return (event[0], event[1] + 1)


def run_union(runtime: str) -> tuple[dict[str, Any], ListSink]:
    """The union job above, run to its end at parallelism 2: its final status and its sink."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(2)
    env.set_max_parallelism(16)
    if runtime == "spark":
        env.set_runtime_option("epoch_records", 60)
    sink = ListSink()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(event_time)
    low = env.from_source(CollectionSource([("low", n) for n in range(300)], num_splits=2), strategy, "low")
    high = env.from_source(CollectionSource([("high", n) for n in range(1000, 1200)], num_splits=2), strategy, "high")
    low.filter(below_100).union(high).map(plus_one).sink_to(sink)
    client = env.execute_async(f"operator-metrics-union-{runtime}")
    client.get_job_execution_result().result(600)
    return client.status_details(), sink


def run_tuple_sums_to_files(runtime: str, folder: str) -> dict[str, Any]:
    """Tuples summed by a tumbling window into an exactly-once Parquet sink chained to it: on Spark the window's
    results reach the sink as columns (engine/runtime/spark/chains.py ``Router.emit_columns``).  The final
    status; 5 users x 10 windows of 100 ms = 50 rows written."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(2)
    env.set_max_parallelism(16)
    env.enable_checkpointing(10)
    env.get_checkpoint_config().set_checkpoint_storage_dir(f"file://{folder}/chk")
    source = CollectionSource([(f"user-{n % 5}", n) for n in range(RECORDS)], num_splits=2)
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(event_time)
    (env.from_source(source, strategy, "numbers").key_by(0)
        .window(TumblingEventTimeWindows.of(Time.milliseconds(100))).sum(1).uid("window")
        .write_files(f"{folder}/out", "parquet"))
    client = env.execute_async(f"operator-metrics-files-{runtime}")
    client.get_job_execution_result().result(600)
    return client.status_details()
