"""Invalid job definitions fail at build time, naming the parameter and the value (issue 2, "Bad input")."""

from __future__ import annotations

import pytest

from engine import (
    CountEvictor,
    EventTimeSessionWindows,
    JobDefinitionError,
    SlidingEventTimeWindows,
    StreamExecutionEnvironment,
    Time,
    TumblingEventTimeWindows,
    CountTrigger,
)


@pytest.fixture
def keyed():
    env = StreamExecutionEnvironment.get_execution_environment()
    return env.from_collection([("a", 1)]).key_by(lambda e: e[0])


@pytest.mark.parametrize(
    "build, parameter",
    [
        (lambda: TumblingEventTimeWindows.of(Time.seconds(0)), "size"),
        (lambda: SlidingEventTimeWindows.of(Time.seconds(10), Time.seconds(-1)), "slide"),
        (lambda: EventTimeSessionWindows.with_gap(Time.seconds(0)), "gap"),
        (lambda: CountTrigger.of(0), "max_count"),
        (lambda: CountEvictor.of(-1), "max_count"),
    ],
)
def test_invalid_window_parts_name_the_parameter(build, parameter) -> None:
    with pytest.raises(JobDefinitionError) as err:
        build()
    assert err.value.parameter == parameter
    assert parameter in str(err.value)


def test_count_window_below_one_is_refused(keyed) -> None:
    with pytest.raises(JobDefinitionError, match="`size`"):
        keyed.count_window(0)


def test_negative_allowed_lateness_is_refused(keyed) -> None:
    with pytest.raises(JobDefinitionError, match="`allowed_lateness`.*-1"):
        keyed.window(TumblingEventTimeWindows.of(Time.seconds(1))).allowed_lateness(-1)


def test_a_non_callable_key_selector_is_refused() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(JobDefinitionError, match="`key_selector`"):
        env.from_collection([1]).key_by(42)


def test_a_trigger_that_cannot_merge_is_refused_for_session_windows(keyed) -> None:
    from engine.windowing.triggers import PurgingTrigger

    class NonMerging(CountTrigger):
        def can_merge(self) -> bool:
            return False

    with pytest.raises(JobDefinitionError, match="`trigger`"):
        keyed.window(EventTimeSessionWindows.with_gap(Time.seconds(1))).trigger(NonMerging(3))


def test_an_evictor_on_an_assigner_that_cannot_take_one_is_refused(keyed) -> None:
    class NoEvictors(TumblingEventTimeWindows):
        def can_take_evictor(self) -> bool:
            return False

    with pytest.raises(JobDefinitionError, match="`evictor`"):
        keyed.window(NoEvictors(1_000, 0)).evictor(CountEvictor.of(2))


def test_a_job_without_sinks_cannot_execute() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection([1]).map(lambda x: x)
    with pytest.raises(JobDefinitionError, match="`sinks`"):
        env.execute("no sinks")


def test_parallelism_above_max_parallelism_is_refused_for_keyed_operators() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_max_parallelism(4).set_parallelism(8)
    stream = env.from_collection([("a", 1, 0)]).key_by(lambda e: e[0]).window(
        TumblingEventTimeWindows.of(Time.seconds(1))).sum(1)
    with pytest.raises(JobDefinitionError, match="`parallelism`"):
        stream.execute_and_collect()
