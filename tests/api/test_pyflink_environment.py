"""PyFlink's environment, execution config, chaining controls and checkpoint config names (issue 19): each one
changes what it says it changes, or is refused naming the method.

The watermark-interval jobs: events at 1000, 5000 and 2000 ms, a bounded out-of-orderness of 0, one event per
bundle (``bundle_size`` 1), 1 s tumbling counts.  With the runtime's own cadence the watermark passes 4999 before
the 2000 event arrives, which is late and dropped; with periodic watermarks off (interval 0), or throttled to once
per 10 s of a clock that stands still, only end of input advances event time past 999, so the 2000 event counts.
"""

from __future__ import annotations

import json
import time

import pytest

from engine import (
    CheckpointingMode,
    ManualClock,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    WatermarkStrategy,
)
from engine.api.execution_config import ExecutionConfig
from engine.errors import JobDefinitionError
from engine.graph.plan import build_plan
from engine.io.generator_source import GeneratorSource
from engine.io.sink import PrintSink

EVENTS = [("a", 1000), ("a", 5000), ("a", 2000)]


def _env(parallelism: int = 1) -> StreamExecutionEnvironment:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(parallelism)
    return env


def event_time(e: tuple, _ts: int) -> int:
    return e[1]


def one(e: tuple) -> tuple:
    return (e[1] // 1000 * 1000, 1)


def add(a: tuple, b: tuple) -> tuple:
    return (a[0], a[1] + b[1])


def window_counts(runtime: str, interval: int | None, clock: ManualClock | None = None) -> list:
    env = _env()
    env.set_runtime(runtime)
    if runtime == "local":
        env.set_runtime_option("bundle_size", 1)
    else:
        env.set_runtime_option("epoch_records", 1)
    if clock is not None:
        env.set_clock(clock)
    if interval is not None:
        env.get_config().set_auto_watermark_interval(interval)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Time.milliseconds(0)).with_timestamp_assigner(event_time)
    counts = (env.from_collection(EVENTS).assign_timestamps_and_watermarks(strategy).map(one).key_by(lambda c: 0)
              .window(TumblingEventTimeWindows.of(Time.seconds(1))).reduce(add))
    return sorted(counts.execute_and_collect())


def test_the_auto_watermark_interval_changes_which_records_are_late():
    assert window_counts("local", None) == [(1000, 1), (5000, 1)]  # 2000 came after watermark 4999: dropped
    assert window_counts("local", 0) == [(1000, 1), (2000, 1), (5000, 1)]  # periodic watermarks off
    # at most once per 10 s of a clock that stands still: only the first bundle's watermark (999)
    assert window_counts("local", 10_000, ManualClock(0)) == [(1000, 1), (2000, 1), (5000, 1)]
    assert _env().get_config().get_auto_watermark_interval() is None


def test_a_positive_interval_emits_again_once_the_clock_moved_on():
    clock = ManualClock(0)

    class Ticking(ManualClock):
        def now_ms(self) -> int:  # each look at the clock is 1 s later
            clock.advance(1000)
            return clock.now_ms()

    assert window_counts("local", 500, Ticking(0)) == [(1000, 1), (5000, 1)]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "200"])
def test_a_bad_auto_watermark_interval_is_refused_naming_it(bad):
    with pytest.raises(JobDefinitionError) as e:
        _env().get_config().set_auto_watermark_interval(bad)
    assert e.value.parameter == "interval"


def test_execution_config_parallelism_is_the_environments():
    env = _env()
    config = env.get_config()
    assert isinstance(config, ExecutionConfig) and config is env.get_config()
    config.set_parallelism(3)
    config.set_max_parallelism(64)
    assert env.get_parallelism() == config.get_parallelism() == 3
    assert env.get_max_parallelism() == config.get_max_parallelism() == 64
    assert env.from_collection([1]).get_execution_config() is config


def test_checkpoint_getters_on_the_environment():
    env = _env()
    assert env.get_checkpoint_interval() == -1
    env.enable_checkpointing(500, CheckpointingMode.AT_LEAST_ONCE)
    assert env.get_checkpoint_interval() == 500
    assert env.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    assert env.get_checkpointing_consistency_mode() is CheckpointingMode.AT_LEAST_ONCE


def _chains(env: StreamExecutionEnvironment) -> list[str]:
    return [v.name for v in build_plan(env._sinks, env.get_parallelism(), env.get_max_parallelism(),
                                       chaining=env.is_chaining_enabled()).vertices]


def _chain_job(env: StreamExecutionEnvironment, how: str | None = None) -> tuple[list[str], list]:
    """The plan's chains of the print job (read before running: a job consumes its sinks) and the collected results."""
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _: e)
    mapped = env.from_collection(list(range(20))).assign_timestamps_and_watermarks(strategy).map(lambda x: x + 1)
    if how == "disable":
        mapped = mapped.disable_chaining()
    elif how == "new_chain":
        mapped = mapped.start_new_chain()
    mapped.filter(lambda x: x % 2 == 0).sink_to(PrintSink())
    chains = _chains(env)
    return chains, sorted(mapped.filter(lambda x: x % 2 == 0).execute_and_collect())


def test_disable_operator_chaining_runs_each_operator_in_its_own_task_with_the_same_results():
    chained = _env(2)
    chains, expected = _chain_job(chained)
    assert chained.is_chaining_enabled()
    assert chains == ["Collection Source -> Timestamps/Watermarks -> Map -> Filter -> Sink(PrintSink)"]
    unchained = _env(2).disable_operator_chaining()
    assert not unchained.is_chaining_enabled()
    chains, results = _chain_job(unchained)
    assert results == expected == list(range(2, 21, 2))
    # the per-split timestamps/watermarks stay in the source (ARCHITECTURE section 4)
    assert chains == ["Collection Source -> Timestamps/Watermarks", "Map", "Filter", "Sink(PrintSink)"]


def test_disable_chaining_and_start_new_chain_on_one_operator():
    chains, results = _chain_job(_env(2), "disable")
    assert results == list(range(2, 21, 2))
    assert chains == ["Collection Source -> Timestamps/Watermarks", "Map", "Filter -> Sink(PrintSink)"]
    chains, results = _chain_job(_env(2), "new_chain")
    assert results == list(range(2, 21, 2))
    assert chains == ["Collection Source -> Timestamps/Watermarks", "Map -> Filter -> Sink(PrintSink)"]


def test_the_execution_plan_is_flinks_json_shape_built_from_the_physical_plan():
    env = _env(2)
    (env.from_collection([1, 2]).map(lambda x: x).set_description("adds nothing").rescale().filter(bool)
        .set_parallelism(4).key_by(lambda x: x).reduce(lambda a, b: a).print())
    plan = json.loads(env.get_execution_plan())
    shape = [(n["id"], n["type"], n["pact"], n["parallelism"],
              [(p["id"], p["ship_strategy"]) for p in n.get("predecessors", [])]) for n in plan["nodes"]]
    assert shape == [
        (1, "Collection Source", "Data Source", 2, []),
        (2, "Map", "Operator", 2, [(1, "FORWARD")]),
        (3, "Filter", "Operator", 4, [(2, "RESCALE")]),
        (4, "Keyed(reduce)", "Operator", 2, [(3, "HASH")]),
        (5, "Sink(PrintSink)", "Data Sink", 2, [(4, "FORWARD")]),
    ]
    assert plan["nodes"][1]["contents"] == "adds nothing"
    assert [n["chain"] for n in plan["nodes"]] == [0, 0, 1, 2, 2]


def test_an_operators_own_max_parallelism_bounds_its_parallelism():
    env = _env(2)
    env.from_collection([1]).map(lambda x: x).set_max_parallelism(1).print()
    with pytest.raises(JobDefinitionError, match="own max parallelism"):
        env.execute()
    env = _env(2)
    env.from_collection([1, 2]).map(lambda x: x).force_non_parallel().print()
    # the map runs alone at parallelism 1; the sink keeps the default 2, so it cannot chain to it
    assert _chains(env) == ["Collection Source", "Map", "Sink(PrintSink)"]


def test_set_uid_hash_is_the_id_state_is_stored_under():
    stream = _env().from_collection([1]).map(lambda x: x).set_uid_hash("0123456789ABCDEF0123456789abcdef")
    assert stream._node.operator_uid() == "0123456789abcdef0123456789abcdef"
    with pytest.raises(JobDefinitionError) as e:
        stream.set_uid_hash("not-a-hash")
    assert e.value.parameter == "uid_hash"


def test_slot_sharing_group_and_buffer_timeout_are_accepted_and_checked():
    env = _env()
    stream = env.from_collection([1]).map(lambda x: x).slot_sharing_group("heavy").set_buffer_timeout(-1)
    assert stream.get_execution_environment() is env
    assert env.set_buffer_timeout(5).get_buffer_timeout() == 5
    for call, parameter in ((lambda: stream.slot_sharing_group(""), "slot_sharing_group"),
                            (lambda: stream.set_buffer_timeout(-2), "timeout_millis"),
                            (lambda: env.set_buffer_timeout("x"), "timeout_millis")):
        with pytest.raises(JobDefinitionError) as e:
            call()
        assert e.value.parameter == parameter


@pytest.mark.parametrize("method", ["disable_chaining", "start_new_chain", "force_non_parallel"])
def test_a_keyed_stream_refuses_operator_settings(method):
    with pytest.raises(JobDefinitionError, match=method):
        getattr(_env().from_collection([1]).key_by(lambda x: x), method)()


@pytest.mark.parametrize(("method", "args"), [
    ("add_jars", ("file:///x.jar",)), ("add_classpaths", ("file:///x",)), ("add_python_file", ("a.py",)),
    ("add_python_archive", ("venv.zip",)), ("set_python_requirements", ("req.txt",)),
    ("set_python_executable", ("python3",)), ("register_cached_file", ("/x", "x")),
])
def test_methods_without_meaning_in_sluice_are_refused_naming_the_method(method, args):
    with pytest.raises(JobDefinitionError, match="has no meaning in Sluice") as e:
        getattr(_env(), method)(*args)
    assert e.value.parameter == method


def test_close_releases_the_graph_and_refuses_to_run_afterwards():
    env = _env()
    stream = env.from_collection([1, 2])
    stream.print()
    env.close()
    assert env._sinks == []
    with pytest.raises(JobDefinitionError, match="close"):
        stream.execute_and_collect()


def test_stop_with_savepoint_without_a_target_writes_to_the_default_savepoint_directory(tmp_path):
    env = _env()
    env.enable_checkpointing(60_000)
    env.get_checkpoint_config().set_checkpoint_storage_dir((tmp_path / "checkpoints").as_uri())
    savepoints = (tmp_path / "savepoints").as_uri()
    env.set_default_savepoint_directory(savepoints)
    assert env.get_default_savepoint_directory() == savepoints
    source = GeneratorSource(num_splits=1, events_per_split=None, live=True,
                             start_timestamp_ms=int(time.time() * 1000))
    env.from_source(source).filter(lambda e: False).sink_to(PrintSink())
    client = env.execute_async("default savepoint dir")
    try:
        uri = client.stop_with_savepoint().result(timeout=60)
        client.get_job_execution_result().result(60)
    finally:
        if not client.get_job_execution_result().done():
            client.cancel()
    assert uri.startswith(savepoints + "/")
    with pytest.raises(JobDefinitionError) as e:
        env.set_default_savepoint_directory("/not/a/url")
    assert e.value.parameter == "directory"


def test_checkpoint_configs_pyflink_names_map_onto_its_settings():
    config = _env().get_checkpoint_config()
    config.set_alignment_timeout(Time.seconds(3))
    assert config.get_alignment_timeout() == config.get_aligned_checkpoint_timeout() == 3000
    assert not config.is_force_unaligned_checkpoints()
    config.set_force_unaligned_checkpoints()
    assert config.is_force_unaligned_checkpoints()
    # PyFlink: True tolerates no checkpoint failure, False tolerates Integer.MAX_VALUE of them
    assert config.is_fail_on_checkpointing_errors()
    config.set_fail_on_checkpointing_errors(False)
    assert config.get_tolerable_checkpoint_failure_number() == 2**31 - 1
    assert config.is_tolerable_checkpoint_failure_number_set() and not config.is_fail_on_checkpointing_errors()
    config.set_fail_on_checkpointing_errors(True)
    assert config.get_tolerable_checkpoint_failure_number() == 0 and config.is_fail_on_checkpointing_errors()
    for call, parameter in ((lambda: config.set_force_unaligned_checkpoints("yes"), "force_unaligned_checkpoints"),
                            (lambda: config.set_fail_on_checkpointing_errors(0), "fail_on_checkpointing_errors"),
                            (lambda: config.set_alignment_timeout(-5), "alignment_timeout")):
        with pytest.raises(JobDefinitionError) as e:
            call()
        assert e.value.parameter == parameter


def test_changelog_state_backend_can_only_stay_off_and_unaligned_getters_follow_the_checkpoint_config():
    env = _env()
    assert env.enable_changelog_state_backend(False) is env and not env.is_changelog_state_backend_enabled()
    with pytest.raises(JobDefinitionError) as e:
        env.enable_changelog_state_backend(True)
    assert e.value.parameter == "enable_changelog_state_backend"
    assert not env.is_unaligned_checkpoints_enabled() and not env.is_force_unaligned_checkpoints()
    env.get_checkpoint_config().enable_unaligned_checkpoints()
    env.get_checkpoint_config().set_force_unaligned_checkpoints(True)
    assert env.is_unaligned_checkpoints_enabled() and env.is_force_unaligned_checkpoints()
