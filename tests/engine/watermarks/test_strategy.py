"""WatermarkStrategy: PyFlink constructors, build-time validation, per-split creation."""

from __future__ import annotations

import datetime as dt

import pytest

from engine.api.time import Duration, Time
from engine.clock import ManualClock
from engine.elements import Watermark
from engine.errors import JobDefinitionError
from engine.watermarks.generators import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    NoWatermarksGenerator,
    WatermarkGenerator,
    WatermarksWithIdleness,
)
from engine.watermarks.strategy import (
    IngestionTimeAssigner,
    RecordTimestampAssigner,
    TimestampAssigner,
    WatermarkStrategy,
)


def test_bounded_out_of_orderness_accepts_every_size_spelling_and_builds_one_generator_per_call():
    clock = ManualClock()
    for size in (Duration.of_seconds(2), Time.seconds(2), dt.timedelta(seconds=2), 2000):
        strategy = WatermarkStrategy.for_bounded_out_of_orderness(size)
        g1, g2 = strategy.create_watermark_generator(clock), strategy.create_watermark_generator(clock)
        assert isinstance(g1, BoundedOutOfOrdernessWatermarks) and g1.out_of_orderness_ms == 2000
        assert g1 is not g2


def test_negative_out_of_orderness_fails_at_build_time_naming_the_parameter():
    with pytest.raises(JobDefinitionError) as err:
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(-1))
    assert err.value.parameter == "max_out_of_orderness"


@pytest.mark.parametrize("timeout", [0, Duration.of_millis(-5), Duration.zero()])
def test_non_positive_idleness_fails_at_build_time_naming_the_parameter(timeout):
    with pytest.raises(JobDefinitionError) as err:
        WatermarkStrategy.for_monotonous_timestamps().with_idleness(timeout)
    assert err.value.parameter == "idle_timeout"


def test_with_idleness_wraps_each_generator_and_leaves_the_original_strategy_unchanged():
    base = WatermarkStrategy.for_monotonous_timestamps()
    idle = base.with_idleness(Duration.of_seconds(1))
    assert isinstance(base.create_watermark_generator(ManualClock()), AscendingTimestampsWatermarks)
    gen = idle.create_watermark_generator(ManualClock())
    assert isinstance(gen, WatermarksWithIdleness) and gen.idle_timeout_ms == 1000
    assert isinstance(gen.inner, AscendingTimestampsWatermarks)


def test_no_watermarks_builds_a_silent_generator():
    assert isinstance(WatermarkStrategy.no_watermarks().create_watermark_generator(ManualClock()), NoWatermarksGenerator)


def test_a_one_argument_function_gets_the_value():
    s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v: v["ts"])
    assert s.create_timestamp_assigner(ManualClock()).extract_timestamp({"ts": 42}, 7) == 42


def test_a_two_argument_function_gets_the_value_and_record_timestamp():
    s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda v, rt: rt + v)
    assert s.create_timestamp_assigner(ManualClock()).extract_timestamp(3, 7) == 10


def test_a_timestamp_assigner_subclass_is_used_as_is():
    class FieldAssigner(TimestampAssigner):
        def extract_timestamp(self, value, record_timestamp):
            return value[1]

    assigner = FieldAssigner()
    s = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(assigner)
    assert s.create_timestamp_assigner(ManualClock()) is assigner


@pytest.mark.parametrize("bad", [4.2, -1, "", lambda: 1, lambda a, b, c: 1, TimestampAssigner])
def test_an_unusable_timestamp_assigner_fails_at_build_time(bad):
    with pytest.raises(JobDefinitionError) as err:
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(bad)
    assert err.value.parameter == "timestamp_assigner"


def test_without_an_assigner_the_source_timestamp_is_kept():
    assigner = WatermarkStrategy.for_monotonous_timestamps().create_timestamp_assigner(ManualClock())
    assert isinstance(assigner, RecordTimestampAssigner)
    assert assigner.extract_timestamp("v", 1234) == 1234


def test_ingestion_time_stamps_the_clock_and_never_goes_down():
    clock = ManualClock(1_000)
    strategy = WatermarkStrategy.for_ingestion_time()
    assigner = strategy.create_timestamp_assigner(clock)
    assert isinstance(assigner, IngestionTimeAssigner)
    assert assigner.extract_timestamp("a", None) == 1_000
    clock.advance(5)
    assert assigner.extract_timestamp("b", 1) == 1_005
    assert strategy.is_ingestion_time and strategy.has_timestamp_assigner()
    with pytest.raises(JobDefinitionError):
        strategy.with_timestamp_assigner(lambda v: 0)


class Punctuated(WatermarkGenerator):
    def on_event(self, event, event_timestamp, output):
        output.emit_watermark(Watermark(event_timestamp))

    def on_periodic_emit(self, output):
        pass


class ClockAware(WatermarkGenerator):
    def __init__(self, clock):
        self.clock = clock

    def on_event(self, event, event_timestamp, output):
        pass

    def on_periodic_emit(self, output):
        output.emit_watermark(Watermark(self.clock.now_ms()))


def test_for_generator_takes_a_factory_with_or_without_the_clock():
    clock = ManualClock(77)
    assert isinstance(WatermarkStrategy.for_generator(Punctuated).create_watermark_generator(clock), Punctuated)
    gen = WatermarkStrategy.for_generator(ClockAware).create_watermark_generator(clock)
    assert isinstance(gen, ClockAware) and gen.clock is clock


def test_for_generator_refuses_an_instance_and_a_factory_returning_something_else():
    with pytest.raises(JobDefinitionError, match="not a generator instance"):
        WatermarkStrategy.for_generator(Punctuated())
    with pytest.raises(JobDefinitionError, match="must return a WatermarkGenerator"):
        WatermarkStrategy.for_generator(lambda: 5).create_watermark_generator(ManualClock())


def test_watermark_alignment_is_refused_with_a_reason():
    with pytest.raises(JobDefinitionError, match="not supported"):
        WatermarkStrategy.for_monotonous_timestamps().with_watermark_alignment("group", Duration.of_seconds(1))
