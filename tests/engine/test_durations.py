"""One conversion of a size of time to ms (engine/durations.py), the same at every place a job takes one.

Each place below takes a ``Time``, a ``Duration``, a ``datetime.timedelta`` or an int of ms and keeps the same
number of ms; each refuses anything else, and a size that is not positive, with a JobDefinitionError naming its
own parameter.
"""

from __future__ import annotations

import datetime as dt

import pytest

from engine import Duration, StateTtlConfig, StreamExecutionEnvironment, Time
from engine.durations import non_negative_millis, positive_millis, to_millis
from engine.errors import JobDefinitionError
from engine.io.file_source import FileSource, StreamFormat


def _read_files_interval(size):
    env = StreamExecutionEnvironment.get_execution_environment()
    return env.read_files("/tmp/nowhere", format="text", monitor_interval=size)._node.source.monitor_interval_ms


#: place -> (its parameter, a call giving the ms it kept)
PLACES = {
    "positive_millis": ("size", lambda size: positive_millis(size, "size")),
    "StateTtlConfig ttl": ("ttl", lambda size: StateTtlConfig.new_builder(size).build().ttl_ms),
    "FileSource monitor_continuously": (
        "discovery_interval",
        lambda size: FileSource.for_record_stream_format(StreamFormat.text_line_format(), "/tmp/nowhere")
        .monitor_continuously(size).build().monitor_interval_ms),
    "env.read_files monitor_interval": ("monitor_interval", _read_files_interval),
}

SIZES = [Time.seconds(2), Duration.of_seconds(2), dt.timedelta(seconds=2), 2000]


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("size", SIZES, ids=lambda s: type(s).__name__)
def test_every_place_takes_time_duration_timedelta_or_ms_alike(place, size):
    _, kept_ms = PLACES[place]
    assert kept_ms(size) == 2000


BAD = ["2s", 2.0, True, None, 0, -5, Duration.zero(), dt.timedelta(0)]


# read_files takes monitor_interval=None as "read the folder once", not as a size
@pytest.mark.parametrize("place, bad", [(p, b) for p in PLACES for b in BAD
                                        if not (b is None and p == "env.read_files monitor_interval")],
                         ids=lambda v: v if isinstance(v, str) and v in PLACES else repr(v))
def test_every_place_refuses_what_is_not_a_positive_size_naming_its_parameter(place, bad):
    parameter, kept_ms = PLACES[place]
    with pytest.raises(JobDefinitionError) as err:
        kept_ms(bad)
    assert err.value.parameter == parameter
    assert err.value.value is bad


def test_to_millis_keeps_zero_and_negative_sizes_for_the_callers_rule():
    assert to_millis(Duration.zero(), "size") == 0
    assert to_millis(dt.timedelta(milliseconds=-3), "size") == -3
    assert non_negative_millis(0, "size") == 0
    with pytest.raises(JobDefinitionError, match="must not be negative"):
        non_negative_millis(-1, "size")


def test_a_timedelta_is_rounded_to_the_nearest_ms():
    assert to_millis(dt.timedelta(microseconds=2600), "size") == 3
    assert to_millis(dt.timedelta(microseconds=2400), "size") == 2


def test_the_api_module_still_exports_the_same_types():
    import engine.api.time as api_time
    import engine.durations as durations

    assert api_time.Time is durations.Time and api_time.Duration is durations.Duration
    assert api_time.to_millis is durations.to_millis
