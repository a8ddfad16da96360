"""Each epoch's stages on RDDs (``epoch_shape="rdd"``, the default) or as DataFrames and Spark SQL: one job's results.

engine/runtime/spark/epoch_rdds.py places an epoch's rows on the RDD layer: key groups hashed in the producing
task, the identity partitioner, each subtask's rows sorted by pyarrow.  The DataFrame shape does the same in Spark
SQL.  The real clients are a job's results (every window kind, a window after a window, late data), an exactly-once
sink restored from a checkpoint the other shape took, and a rescale; a broadcast process vertex, whose broadcast rows
each subtask gets a copy of.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_spark_column_path import _env, _write_events
from test_spark_pipelined_epochs import _committed, _write_job
from window_jobs import SplitCollection, _by_key, _timestamp, build_job, generate_events

from engine import KeyedBroadcastProcessFunction, MapStateDescriptor, StreamExecutionEnvironment
from engine.api.functions import ProcessWindowFunction
from engine.api.time import Duration, Time
from engine.errors import JobDefinitionError
from engine.io.collection_source import CollectionSource
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows

pytestmark = pytest.mark.spark


class _Shapes:
    """Which epoch plumbing each job of a test ran on (the driver builds it in this process)."""

    def __init__(self, monkeypatch) -> None:
        from engine.runtime.spark import job as job_module

        self.used: list[str] = []
        self.plumbing: list = []
        original = job_module.SparkJob._epoch_plumbing

        def spied(job):
            frames = original(job)
            self.used.append(type(frames).__name__)
            self.plumbing.append(frames)
            return frames

        monkeypatch.setattr(job_module.SparkJob, "_epoch_plumbing", spied)


def _window_jobs(options: dict, seed: int, parallelism: int = 2) -> dict:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime("spark")
    env.set_parallelism(parallelism)
    env.set_max_parallelism(16)
    env.set_runtime_option("epoch_records", 15)
    for name, value in options.items():
        env.set_runtime_option(name, value)
    streams = build_job(env, generate_events(seed, disorder_ms=25000), out_of_order=True)
    collected, _ = env.execute_and_collect_streams(streams)
    return {name: sorted(map(repr, values)) for name, values in collected.items()}


@pytest.mark.parametrize("seed, preaggregation", [(3, True), (11, False)])
def test_every_window_kind_gives_the_same_results_on_either_shape(spark, monkeypatch, seed: int,
                                                                  preaggregation: bool) -> None:
    """The random window jobs (every assigner, trigger, evictor and function kind, a window after a window, late
    data and its side output) on RDDs and as DataFrames; with the reading tasks' partials of the built-in min/max
    folded again after the shuffle (Spark SQL, or the RDD shape's window task) and without."""
    shapes = _Shapes(monkeypatch)
    options = {"preaggregation": preaggregation}
    frames = _window_jobs({"epoch_shape": "dataframe", **options}, seed)
    rdds = _window_jobs({"epoch_shape": "rdd", **options}, seed)
    assert shapes.used == ["EpochFrames", "EpochRdds"]
    sql_folds = [i for i, pre in shapes.plumbing[1].routes.preaggregations.items() if pre.column is None and pre.sql]
    assert bool(sql_folds) == preaggregation
    assert sum(map(len, frames.values())) > 100 and frames["late_side_output"]
    assert rdds == frames


class _InArrivalOrder(ProcessWindowFunction):
    """The window's elements in the order the operator got them: any change of a key's order shows."""

    def process(self, key, context, elements):
        yield key, context.window().start, tuple((e[1], e[2]) for e in elements)


def _shared_keys(seed: int) -> list[list[tuple]]:
    """Three splits whose records share four keys, so a key's records of one epoch come from several reading
    tasks: its order, and which is a pane's first, is the channel and sequence order the window stage sorts by."""
    rng = random.Random(seed)
    splits = []
    for _ in range(3):
        t, events = rng.randrange(0, 3000), []
        for _ in range(60):
            t += rng.randrange(0, 1200)
            events.append((f"k{rng.randrange(4)}", t, rng.randrange(1, 100)))
        splits.append(events)
    return splits


def _arrival_jobs(shape: str) -> dict:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime("spark")
    env.set_parallelism(2)
    env.set_max_parallelism(16)
    env.set_runtime_option("epoch_records", 20)
    env.set_runtime_option("epoch_shape", shape)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(2)).with_timestamp_assigner(
        _timestamp)
    keyed = env.from_source(SplitCollection(_shared_keys(5), "s"), strategy, "S").key_by(_by_key)
    streams = {
        # the reading tasks' partials folded again after the shuffle: a result is its pane's first record
        "tumbling_max": keyed.window(TumblingEventTimeWindows.of(Time.seconds(10))).max(2),
        "sliding_min": keyed.window(SlidingEventTimeWindows.of(Time.seconds(15), Time.seconds(5))).min(2),
        "in_order": keyed.window(TumblingEventTimeWindows.of(Time.seconds(10))).process(_InArrivalOrder()),
        "count_window": keyed.count_window(4).reduce(lambda a, b: (a[0], b[1], a[2] * 3 + b[2])),
    }
    collected, _ = env.execute_and_collect_streams(streams)
    return {name: sorted(map(repr, values)) for name, values in collected.items()}


def test_a_keys_records_from_several_reading_tasks_keep_their_order_on_either_shape(spark, monkeypatch) -> None:
    """Which record is a pane's first, and in which order a window and a count window see a key's records, when
    one epoch brings them from several splits."""
    shapes = _Shapes(monkeypatch)
    frames = _arrival_jobs("dataframe")
    rdds = _arrival_jobs("rdd")
    assert shapes.used == ["EpochFrames", "EpochRdds"]
    assert all(frames.values())
    assert rdds == frames


@pytest.mark.parametrize("form", ["column", "lambda"])
def test_the_column_path_and_the_element_path_give_the_same_results_on_either_shape(spark, monkeypatch, tmp_path,
                                                                                   form: str) -> None:
    from test_spark_pipelined_epochs import _collected

    shapes = _Shapes(monkeypatch)
    folder = tmp_path / "in"
    _write_events(folder, seed=4, files=2, per_file=150, keys=5, int_keys=False, datetimes=True)
    frames = _collected(folder, form, {"epoch_shape": "dataframe"})
    rdds = _collected(folder, form, {"epoch_shape": "rdd"})
    assert shapes.used == ["EpochFrames", "EpochRdds"]
    assert frames["by_key"] and sum(frames["late"].values()) > 0
    assert rdds == frames


@pytest.mark.parametrize("first, then", [("rdd", "dataframe"), ("dataframe", "rdd")])
def test_a_checkpoint_one_shape_took_restores_exactly_once_on_the_other(spark, monkeypatch, tmp_path: Path,
                                                                         first: str, then: str) -> None:
    """Cancelled after three epochs on one shape, restored from its newest checkpoint on the other, at another
    parallelism: the exactly-once Parquet sink holds exactly what an uninterrupted run commits."""
    from engine.runtime.spark.runtime import SparkRuntime

    shapes = _Shapes(monkeypatch)
    folder = tmp_path / "in"
    _write_events(folder, seed=6, files=2, per_file=330, keys=6, int_keys=False, datetimes=True)
    golden_env = _env("spark", 2, {"epoch_shape": then})
    _write_job(golden_env, folder, tmp_path / "golden")
    golden_env.execute()
    golden = _committed(tmp_path / "golden")

    storage = f"file://{tmp_path}/chk"
    out = tmp_path / "out"
    env = _env("spark", 2, {"max_epochs": 3, "epoch_shape": first}, storage)
    _write_job(env, folder, out)
    job = SparkRuntime(env).start("shapes", list(env._sinks), [])
    job.run()
    newest = job.checkpoint_history()[-1]
    job.cancel()
    assert 0 < sum(_committed(out).values()) < sum(golden.values())

    env = _env("spark", 3, {"epoch_shape": then, "from_savepoint": newest.external_pointer}, storage)
    _write_job(env, folder, out)
    env.execute()
    assert _committed(out) == golden
    expected = {"rdd": "EpochRdds", "dataframe": "EpochFrames"}
    assert shapes.used == [expected[then], expected[first], expected[then]]


class _Limit(KeyedBroadcastProcessFunction):
    """Each item with its colour's limit when the item is processed."""

    def process_broadcast_element(self, value, ctx):
        ctx.get_broadcast_state(_LIMITS).put(value[0], value[1])

    def process_element(self, value, ctx):
        yield value[0], value[1], ctx.get_broadcast_state(_LIMITS).get(value[0])


_LIMITS = MapStateDescriptor("limits")


def _limits(runtime: str, options: dict) -> list:
    options = {"epoch_records": 3, **options}
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime(runtime)
    env.set_parallelism(2)
    for name, value in options.items():
        env.set_runtime_option(name, value)
    rules = env.from_source(CollectionSource([("red", 10), ("blue", 100), ("pad", 0)], num_splits=1)) \
        .broadcast(_LIMITS)
    items = env.from_source(CollectionSource([("grey", 1), ("red", 2), ("blue", 3)] * 3, num_splits=1))
    return sorted(map(repr, items.key_by(lambda i: i[0]).connect(rules).process(_Limit()).execute_and_collect()))


def test_a_broadcast_process_vertex_gives_the_same_results_on_either_shape(spark, monkeypatch) -> None:
    """Its broadcast rows reach every subtask (the RDD shape's placing task copies them, the DataFrame shape's SQL
    explodes them), before the subtask's keyed records of the same epoch: the local runtime's answer at Spark's
    cadence."""
    shapes = _Shapes(monkeypatch)
    frames = _limits("spark", {"epoch_shape": "dataframe"})
    rdds = _limits("spark", {"epoch_shape": "rdd"})
    assert shapes.used == ["EpochFrames", "EpochRdds"]
    assert len(rdds) == 9 and rdds == frames == _limits("local", {"epoch_records": 3})


def test_an_unknown_epoch_shape_is_refused_naming_the_option() -> None:
    from engine.runtime.spark.runtime import SparkRuntime

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime("spark")
    env.set_runtime_option("epoch_shape", "rows")
    with pytest.raises(JobDefinitionError, match="epoch_shape"):
        SparkRuntime(env)
