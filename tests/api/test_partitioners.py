"""PyFlink's partitioners on the local runtime (issue 19): ``forward``, ``shuffle``, ``rescale``,
``partition_custom``, checked by the records each subtask of the next operator gets.

Counts by hand (tests/api/partition_jobs.py: one split per source subtask, in order):

- rescale 2 -> 3, 12 records (6 per producer): Flink wires producer 0 to consumers {0, 1} and producer 1 to {2}
  (a pointwise edge), so [3, 3, 6]; rebalance would give [4, 4, 4].
- rescale 3 -> 2, 12 records (4 per producer): consumer 0 reads producer 0, consumer 1 producers 1 and 2: [4, 8].
- rescale 2 -> 4, 10 records (5 per producer): round-robin from each producer's first target: [3, 2, 3, 2].
- partition_custom with ``key % n`` over 0..19 at 3 consumers, 7 failing its key selector and 13 getting index 3:
  subtask 0 {0,3,6,9,12,15,18}, 1 {1,4,10,16,19}, 2 {2,5,8,11,14,17}: [7, 5, 6], two dead letters.
"""

from __future__ import annotations

import pytest

from engine import KeyedStream, StreamExecutionEnvironment
from engine.errors import JobDefinitionError
from engine.graph.partitioners import rescale_targets
from engine.graph.plan import build_plan
from partition_jobs import run

CUSTOM_DEAD_LETTERS = [
    {"value": 13, "error": "PartitionIndexError: partition_custom: partitioner Modulo returned 3 for a record; it "
                           "must return an int in [0, 3) (num_partitions = the parallelism of the next operator)",
     "stage": "partition_custom"},
    {"value": 7, "error": "ValueError: no key for 7", "stage": "partition_custom"},
]


@pytest.mark.parametrize(("records", "splits", "consumers", "per_subtask"), [
    (12, 2, 3, [3, 3, 6]), (12, 3, 2, [4, 8]), (10, 2, 4, [3, 2, 3, 2]),
])
def test_rescale_deals_round_robin_to_the_subtasks_flink_wires_each_producer_to(records, splits, consumers,
                                                                                 per_subtask):
    out = run("local", "rescale", records, splits, consumers)
    assert out["subtasks"] == per_subtask
    assert out["values"] == [1000 + n for n in range(records)]


def test_rebalance_spreads_evenly_where_rescale_does_not():
    assert run("local", "rebalance", 12, 2, 3)["subtasks"] == [4, 4, 4]


def test_rescale_targets_follow_flinks_pointwise_wiring():
    assert [rescale_targets(i, 2, 4) for i in range(2)] == [[0, 1], [2, 3]]
    assert [rescale_targets(i, 4, 2) for i in range(4)] == [[0], [0], [1], [1]]
    assert [rescale_targets(i, 2, 3) for i in range(2)] == [[0, 1], [2]]
    assert [rescale_targets(i, 3, 2) for i in range(3)] == [[0], [1], [1]]
    assert [rescale_targets(i, 3, 3) for i in range(3)] == [[0], [1], [2]]
    # every consumer is fed by someone
    for m in range(1, 7):
        for n in range(1, 7):
            assert sorted({t for i in range(m) for t in rescale_targets(i, m, n)}) == list(range(n))


def test_partition_custom_sends_each_record_where_the_partitioner_says_and_dead_letters_bad_ones():
    out = run("local", "custom", 20, 2, 3)
    assert out["subtasks"] == [7, 5, 6]
    assert out["values"] == [1000 + n for n in range(20) if n not in (7, 13)]
    assert out["dead_letters"] == sorted(CUSTOM_DEAD_LETTERS, key=repr)


def test_partition_custom_takes_a_plain_function():
    assert run("local", "custom_fn", 10, 2, 3)["subtasks"] == [10, 0, 0]


def test_shuffle_sends_every_record_once_to_roughly_uniform_subtasks():
    out = run("local", "shuffle", 3000, 1, 3)
    assert out["values"] == [1000 + n for n in range(3000)]
    # 1000 expected per subtask, standard deviation about 26: 850 is almost 6 deviations away
    assert sum(out["subtasks"]) == 3000 and all(850 < n < 1150 for n in out["subtasks"])


def _env(parallelism: int = 2) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    return env


def test_forward_between_different_parallelisms_is_refused_naming_forward():
    env = _env()
    env.from_collection([1, 2]).forward().map(lambda x: x).set_parallelism(3).print()
    with pytest.raises(JobDefinitionError, match="Forward partitioning does not allow change of parallelism") as e:
        env.execute()
    assert e.value.parameter == "forward"


def test_forward_between_equal_parallelisms_chains_and_keeps_subtask_order():
    env = _env()
    mapped = env.from_collection(list(range(6))).forward().map(lambda x: x * 2)
    assert sorted(mapped.execute_and_collect()) == [0, 2, 4, 6, 8, 10]
    env.from_collection([1]).forward().map(lambda x: x).print()
    plan = build_plan(env._sinks, 2, 128)
    assert [v.name for v in plan.vertices] == ["Collection Source -> Map -> Sink(PrintSink)"]


@pytest.mark.parametrize("method", ["forward", "shuffle", "rescale"])
def test_a_keyed_stream_refuses_another_partitioning(method):
    keyed = _env().from_collection([1]).key_by(lambda x: x)
    assert isinstance(keyed, KeyedStream)
    with pytest.raises(JobDefinitionError, match="KeyedStream"):
        getattr(keyed, method)()
    with pytest.raises(JobDefinitionError, match="partition_custom"):
        keyed.partition_custom(lambda k, n: 0, lambda x: x)


def test_partition_custom_refuses_a_partitioner_that_is_not_callable():
    with pytest.raises(JobDefinitionError) as e:
        _env().from_collection([1]).partition_custom(3, lambda x: x)
    assert e.value.parameter == "partitioner"
