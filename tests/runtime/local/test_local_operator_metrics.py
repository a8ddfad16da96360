"""Per-operator counts and watermarks on the local runtime (issue 18): a real job's status must report what the
job implies, per chain and per subtask (engine/runtime/operator_metrics.py)."""

from __future__ import annotations

from typing import Any

from engine.api.environment import StreamExecutionEnvironment
from engine.elements import MAX_WATERMARK
from engine.io.collection_source import CollectionSource
from engine.watermarks.strategy import WatermarkStrategy


class ListSink:
    def __init__(self) -> None:
        self.values: list[Any] = []

    def write(self, values: Any, epoch: int = 0) -> None:
        self.values.extend(values)


def _run(env: StreamExecutionEnvironment) -> dict[str, Any]:
    client = env.execute_async("operators")
    client.get_job_execution_result().result(120)
    return client.status_details()


def _env(parallelism: int = 2) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    env.set_max_parallelism(16)
    return env


def test_a_filter_that_drops_half_sends_half_of_what_its_chain_read():
    env = _env()
    sink = ListSink()
    source = CollectionSource(list(range(1000)), num_splits=2)
    env.from_source(source, None, "numbers").filter(lambda n: n % 2 == 0).rebalance().map(lambda n: n).uid("m") \
        .sink_to(sink)
    ops = _run(env)["operators"]
    assert len(sink.values) == 500
    assert {uid: (op["records_in"], op["records_out"]) for uid, op in ops.items()} == {
        "v0.n0.numbers": (1000, 500), "m": (500, 500)}
    # split k holds 500 numbers, 250 of them even, read by subtask k
    assert [(s["records_in"], s["records_out"]) for s in ops["v0.n0.numbers"]["subtasks"]] == [(500, 250), (500, 250)]
    # round-robin: each map subtask gets half of each producer's 250
    assert [s["records_in"] for s in ops["m"]["subtasks"]] == [250, 250]


def test_a_union_receives_what_both_inputs_sent_and_key_selector_dead_letters_are_not_sent():
    env = _env(parallelism=1)
    sink = ListSink()
    left = env.from_source(CollectionSource(list(range(100))), None, "left")
    right = env.from_source(CollectionSource(list(range(100, 130))), None, "right")
    # 1 / (n - 7) fails for n == 7: that record becomes a dead letter on the keyed edge, it is never sent
    left.union(right).key_by(lambda n: 1 // (n - 7) if n == 7 else n % 3).reduce(lambda a, b: a + b).uid("sums") \
        .sink_to(sink)
    status = _run(env)
    ops = status["operators"]
    assert status["metrics"]["num_dead_letter_records"] == 1
    assert (ops["v0.n0.left"]["records_in"], ops["v0.n0.left"]["records_out"]) == (100, 99)
    assert (ops["v1.n0.right"]["records_in"], ops["v1.n0.right"]["records_out"]) == (30, 30)
    assert (ops["sums"]["records_in"], ops["sums"]["records_out"]) == (129, 129) == (129, len(sink.values))


def test_subtask_watermarks_are_what_each_subtask_generated_or_combined():
    env = _env()
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda n, _ts: n)
    env.from_source(CollectionSource(list(range(1000)), num_splits=2), strategy, "numbers") \
        .key_by(lambda n: n % 4).reduce(lambda a, b: max(a, b)).uid("latest").sink_to(ListSink())
    ops = _run(env)["operators"]
    # bounded input ended: every split and every channel is at MAX_WATERMARK (seed 004)
    for op in ops.values():
        assert op["watermark_ms"] == MAX_WATERMARK
        assert [s["watermark_ms"] for s in op["subtasks"]] == [MAX_WATERMARK] * 2
