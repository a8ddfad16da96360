"""``RuntimeExecutionMode.BATCH`` on the local runtime (engine/api/execution_mode.py, engine/operators/batch_input.py).

The expectations are what apache-flink 2.3.0 printed for the same programs in BATCH mode (oracle kept out of
CI; /work/scratch-style probes under PyFlink): per key, the records in timestamp order with the watermark at
its minimum, then every event-time timer in order with the watermark at its maximum, then the processing-time
timers; a rolling reduce emits one final value per key; a window keeps a record STREAMING would call late.
Flink takes keys one after another (sorted by their serialized form) where Sluice interleaves them, so
outputs are compared per key.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine import (
    CountWindow,  # noqa: F401 - exported beside the assigners used below
    Duration,
    KeyedProcessFunction,
    RuntimeExecutionMode,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from engine.elements import MAX_WATERMARK, MIN_WATERMARK
from engine.errors import JobDefinitionError

DATA = [("b", 5000), ("a", 3000), ("b", 1000), ("a", 9000), ("c", 100), ("a", 1), ("b", 20000)]


class Probe(KeyedProcessFunction):
    def process_element(self, value, ctx):
        ctx.timer_service().register_event_time_timer(value[1] + 1)
        ctx.timer_service().register_processing_time_timer(ctx.timer_service().current_processing_time() + 3_600_000)
        yield "el", value[0], value[1], ctx.timer_service().current_watermark()

    def on_timer(self, timestamp, ctx):
        domain = "event" if ctx.time_domain().name == "EVENT_TIME" else "processing"
        yield "timer", ctx.get_current_key(), timestamp if domain == "event" else None, \
            ctx.timer_service().current_watermark(), domain


def _env(mode=RuntimeExecutionMode.BATCH, parallelism: int = 1) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_mode(mode)
    env.set_parallelism(parallelism)
    env.set_runtime_option("bundle_size", 1)  # in STREAMING: a watermark after every record
    return env


def _stamped(env, data=DATA):
    return env.from_collection(data).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(
            lambda v, _: v[1]))


def _per_key(rows, key_of=lambda r: r[1]):
    grouped: dict = {}
    for row in rows:
        grouped.setdefault(key_of(row), []).append(row)
    return grouped


@pytest.mark.parametrize("parallelism", [1, 2])
def test_a_keyed_process_function_sees_each_key_sorted_then_its_timers_as_flink_batch_does(parallelism):
    out = _stamped(_env(parallelism=parallelism)).key_by(lambda v: v[0]).process(Probe()).execute_and_collect()
    lo, hi = MIN_WATERMARK, MAX_WATERMARK
    # Flink 2.3.0, BATCH: ('el', ('a', 1), 1, MIN) ... ('timer', 'a', 2, EVENT_TIME, MAX) ... processing last
    expected = {
        "a": [("el", "a", 1, lo), ("el", "a", 3000, lo), ("el", "a", 9000, lo),
              ("timer", "a", 2, hi, "event"), ("timer", "a", 3001, hi, "event"), ("timer", "a", 9001, hi, "event")],
        "b": [("el", "b", 1000, lo), ("el", "b", 5000, lo), ("el", "b", 20000, lo),
              ("timer", "b", 1001, hi, "event"), ("timer", "b", 5001, hi, "event"), ("timer", "b", 20001, hi, "event")],
        "c": [("el", "c", 100, lo), ("timer", "c", 101, hi, "event")],
    }
    got = _per_key(out)
    for key, rows in expected.items():
        processing = [r for r in got[key] if r[-1] == "processing"]
        assert [r for r in got[key] if r[-1] != "processing"] == rows
        # registered while processing the key's records, they fire after its event-time timers (>= 1 per key:
        # registrations in the same millisecond are one timer)
        assert processing and got[key][-len(processing):] == processing
        assert all(r[3] == hi for r in processing)


def test_a_rolling_reduce_emits_only_its_final_value_per_key():
    env = _env()
    out = _stamped(env).key_by(lambda v: v[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).execute_and_collect()
    assert sorted(out) == [("a", 12001), ("b", 26000), ("c", 100)]
    streaming = _stamped(_env(RuntimeExecutionMode.STREAMING)).key_by(lambda v: v[0]) \
        .reduce(lambda a, b: (a[0], a[1] + b[1])).execute_and_collect()
    assert len(streaming) == len(DATA)  # the same job in STREAMING: one update per record


def test_no_record_is_late_in_batch_mode():
    late = [("a", 9000), ("a", 1), ("a", 3000)]  # with 0 ms of out-of-orderness, STREAMING drops 1 and 3000

    def windows(mode):
        return _stamped(_env(mode), late).key_by(lambda v: v[0]).window(TumblingEventTimeWindows.of(Time.seconds(5))) \
            .reduce(lambda a, b: (a[0], a[1] + b[1])).execute_and_collect()

    assert sorted(windows(RuntimeExecutionMode.BATCH)) == [("a", 3001), ("a", 9000)]
    assert sorted(windows(RuntimeExecutionMode.STREAMING)) == [("a", 9000)]


def test_count_windows_count_records_in_timestamp_order():
    data = [("k", 40), ("k", 10), ("k", 30), ("k", 20)]
    out = _stamped(_env(), data).key_by(lambda v: v[0]).count_window(2) \
        .reduce(lambda a, b: (a[0], f"{a[1]}+{b[1]}")).execute_and_collect()
    assert out == [("k", "10+20"), ("k", "30+40")]


def test_automatic_is_batch_for_bounded_sources_and_streaming_for_a_monitored_folder(tmp_path: Path):
    env = _env(RuntimeExecutionMode.AUTOMATIC)
    out = _stamped(env).key_by(lambda v: v[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).execute_and_collect()
    assert len(out) == 3
    monitored = _env(RuntimeExecutionMode.AUTOMATIC)
    monitored.read_files(str(tmp_path), "jsonl", monitor_interval=Duration.of_seconds(1)).print()
    assert not monitored.is_batch(list(monitored._sinks))


def test_batch_mode_refuses_an_unbounded_source_and_the_spark_runtime_naming_the_parameter(tmp_path: Path):
    env = _env()
    env.read_files(str(tmp_path), "jsonl", monitor_interval=Duration.of_seconds(1)).print()
    with pytest.raises(JobDefinitionError, match="bounded") as err:
        env.execute()
    assert err.value.parameter == "runtime_mode"

    on_spark = _env()
    on_spark.set_runtime("spark")
    _stamped(on_spark).print()
    with pytest.raises(JobDefinitionError, match="local runtime") as err:
        on_spark.execute()
    assert err.value.parameter == "runtime_mode"
    with pytest.raises(JobDefinitionError, match="RuntimeExecutionMode"):
        _env().set_runtime_mode("BATCH")


def test_batch_mode_takes_no_checkpoint_even_when_checkpointing_is_enabled(tmp_path: Path, caplog):
    def run(mode):
        env = _env(mode)
        env.enable_checkpointing(10)
        env.get_checkpoint_config().set_checkpoint_storage_dir(f"file://{tmp_path}/{mode.name}")
        env.set_runtime_option("clock_step_ms", 10)
        out = _stamped(env).key_by(lambda v: v[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).execute_and_collect()
        return out, env.get_last_result().completed_checkpoints

    out, checkpoints = run(RuntimeExecutionMode.BATCH)
    assert sorted(out) == [("a", 12001), ("b", 26000), ("c", 100)]
    assert checkpoints == []
    assert "takes no checkpoints" in caplog.text
    _, streaming_checkpoints = run(RuntimeExecutionMode.STREAMING)
    assert streaming_checkpoints  # the same job in STREAMING does checkpoint: the assertion above is not vacuous


def test_a_batch_job_resumes_a_streaming_checkpoint_at_another_parallelism_keeping_every_keys_state(
        tmp_path: Path):
    """A BATCH job may start from a STREAMING job's retained checkpoint (as in Flink).  Its keyed operators run
    inside BatchKeyedInput, which the restore must still see as keyed: at a new parallelism each subtask takes
    the former subtasks whose key groups meet its own, else keys are lost."""
    from restore_comparison import configured_env

    from engine.errors import JobFailedError
    from engine.runtime.local.faults import Fault, FaultKind, FaultPlan

    keys = "abcdefgh"
    data = [(k, 1) for _ in range(60) for k in keys]
    storage = tmp_path / "chk"

    def summed(env):
        return env.from_collection(data).key_by(lambda v: v[0]).reduce(lambda a, b: (a[0], a[1] + b[1]))

    failing = configured_env(2, storage.as_uri(), FaultPlan([Fault(FaultKind.RECORDS, 300)]))
    with pytest.raises(JobFailedError):
        summed(failing).execute_and_collect()
    (job_dir,) = [p for p in storage.iterdir() if p.is_dir()]
    (latest,) = [p for p in job_dir.iterdir() if p.name.startswith("chk-") and (p / "_metadata").exists()]

    resumed = _env(RuntimeExecutionMode.BATCH, parallelism=3)
    resumed.set_runtime_option("from_savepoint", latest.as_uri())
    assert sorted(summed(resumed).execute_and_collect()) == [(k, 60) for k in keys]


@pytest.mark.parametrize("mode", [RuntimeExecutionMode.AUTOMATIC, RuntimeExecutionMode.BATCH])
def test_the_runtime_mode_is_resolved_once_per_job_and_the_runtime_uses_that_answer(mode, monkeypatch):
    """The environment resolves the mode when it hands the job over (refusing BATCH before anything runs), and
    the local runtime builds the job with that answer instead of walking the graph again."""
    import engine.api.environment as environment

    calls = []
    real = environment.resolve_runtime_mode

    def counted(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(environment, "resolve_runtime_mode", counted)
    env = _env(mode)
    out = _stamped(env).key_by(lambda v: v[0]).reduce(lambda a, b: (a[0], a[1] + b[1])).execute_and_collect()
    assert sorted(out) == [("a", 12001), ("b", 26000), ("c", 100)]  # BATCH: one final value per key
    assert len(calls) == 1
    env.from_collection([1]).print()
    env.execute()
    assert len(calls) == 2
