"""An exactly-once ``write_files`` sink on Spark is written by the tasks; the driver only commits.

engine/runtime/spark/staged_sinks.py: each task stages its part in the sink's open transaction and
returns the part's key; nothing of the output travels to the driver, and the committed files hold
exactly the job's results (here compared with the local runtime, same epochs).
"""

from __future__ import annotations

from engine.api.environment import StreamExecutionEnvironment
from engine.api.time import Duration, Time
from engine.io.file_sink import committed_files, read_committed
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import TumblingEventTimeWindows
from window_jobs import SplitCollection, generate_events


def _ts(e, _):
    return e[1]


def _key(e):
    return e[0]


def _build(env, splits, output: str | None):
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(1)).with_timestamp_assigner(_ts)
    events = env.from_source(SplitCollection(splits, "staged"), strategy, "events")
    sums = events.key_by(_key).window(TumblingEventTimeWindows.of(Time.seconds(5))).sum(2)
    if output is not None:
        sums.write_files(output, "jsonl")
        events.filter(lambda e: e[2] > 90).write_files(output + "-big", "jsonl")  # from the source tasks
    return sums


def test_file_sink_parts_are_staged_by_tasks_and_committed_with_the_jobs_results(spark, tmp_path):
    from engine.runtime.spark.runtime import SparkRuntime

    splits = generate_events(seed=21, n_splits=2, per_split=30)
    local = StreamExecutionEnvironment.get_execution_environment()
    local.set_runtime_option("epoch_records", 10)
    golden = sorted(map(tuple, _build(local, splits, None).execute_and_collect()))

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime("spark")
    env.set_parallelism(2)
    env.set_runtime_option("epoch_records", 10)
    output = f"file://{tmp_path}/sums"
    _build(env, splits, output)
    job = SparkRuntime(env).start("staged-sink", list(env._sinks), [])
    job.run()

    assert sorted(map(tuple, read_committed(output))) == golden
    assert sorted(map(tuple, read_committed(output + "-big"))) == sorted(e for s in splits for e in s if e[2] > 90)
    assert job.staged_parts >= 2 and job.records_out == len(golden) + sum(e[2] > 90 for s in splits for e in s)
    assert committed_files(output) and not list((tmp_path / "sums" / "_staging").glob("*/*"))
