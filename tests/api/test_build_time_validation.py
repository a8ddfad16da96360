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
    TumblingProcessingTimeWindows,
    CountTrigger,
    WatermarkStrategy,
)


def _stamped(stream):
    return stream.assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, ts: 0))


@pytest.fixture
def keyed():
    env = StreamExecutionEnvironment.get_execution_environment()
    return _stamped(env.from_collection([("a", 1)])).key_by(lambda e: e[0])


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


@pytest.mark.parametrize("selector", [4.2, -1, "", True, None])
def test_a_key_selector_that_is_neither_a_function_nor_a_field_is_refused_saying_what_a_field_is(selector) -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(JobDefinitionError, match=r"`key_selector`.*must be a function \(or a KeySelector\), a dict "
                                                 r"key \(a non-empty str\) or a tuple position \(an int >= 0\)"):
        env.from_collection([1]).key_by(selector)


def test_a_trigger_that_cannot_merge_is_refused_for_session_windows(keyed) -> None:

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
    stream = _stamped(env.from_collection([("a", 1, 0)])).key_by(lambda e: e[0]).window(
        TumblingEventTimeWindows.of(Time.seconds(1))).sum(1)
    with pytest.raises(JobDefinitionError, match="`parallelism`"):
        stream.execute_and_collect()


def test_window_without_key_by_names_the_way_out() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    with pytest.raises(JobDefinitionError, match="`window` needs a keyed stream.*key_by.*window_all"):
        env.from_collection([("a", 1)]).window(TumblingEventTimeWindows.of(Time.seconds(1)))


def test_an_event_time_window_without_timestamps_is_refused_instead_of_staying_empty() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    events = env.from_collection([("a", 1, 1_000), ("b", 2, 2_000)])
    with pytest.raises(JobDefinitionError, match="`window_assigner` is an event-time assigner.*no timestamps"):
        events.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(1)))
    with pytest.raises(JobDefinitionError, match="no timestamps"):
        events.map(lambda e: e).window_all(EventTimeSessionWindows.with_gap(Time.seconds(1)))
    # a union with one unstamped side still lets records without timestamps through
    stamped = _stamped(env.from_collection([("c", 3, 0)]))
    with pytest.raises(JobDefinitionError, match="no timestamps"):
        stamped.union(events).key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(1)))
    # what does carry timestamps is accepted: an assigner upstream, a window's results, processing time
    windowed = stamped.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(1))).sum(1)
    windowed.key_by(lambda e: e[0]).window(TumblingEventTimeWindows.of(Time.seconds(10)))
    events.key_by(lambda e: e[0]).window(TumblingProcessingTimeWindows.of(Time.seconds(1)))
