"""Jobs the validation tests snapshot and check compatibility against (a job spec is "validation_jobs:build")."""

from __future__ import annotations

from typing import Any

from engine.api.time import Duration, Time
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.assigners import EventTimeSessionWindows, SlidingEventTimeWindows


def _ts(event: Any, _record_ts: Any) -> int:
    return event[2]


def _stream(env: Any) -> Any:
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(0)).with_timestamp_assigner(_ts)
    return env.from_collection([("a", 1, 0)]).assign_timestamps_and_watermarks(strategy).key_by(lambda e: e[0])


def build(env: Any) -> dict[str, Any]:
    """Tumbling 1 s sums (100 ms lateness), count windows of 3, 1 s sessions."""
    env.set_max_parallelism(8)
    by_key = _stream(env)
    return {
        "tumbling": by_key.time_window(Time.seconds(1)).allowed_lateness(Time.milliseconds(100)).sum(1).uid("tumbling"),
        "count": by_key.count_window(3).sum(1).uid("count"),
        "session": by_key.window(EventTimeSessionWindows.with_gap(Time.seconds(1))).sum(1).uid("session"),
    }


def build_changed(env: Any) -> dict[str, Any]:
    """An upgrade that changes the tumbling window into a sliding one, drops sessions and max parallelism."""
    env.set_max_parallelism(16)
    by_key = _stream(env)
    return {
        "tumbling": by_key.window(SlidingEventTimeWindows.of(Time.seconds(2), Time.seconds(1))).max(1).uid("tumbling"),
        "count": by_key.count_window(3).sum(1).uid("count"),
    }


def build_same_new_name(env: Any) -> dict[str, Any]:
    """build() with the session operator's uid changed: its state would not be restored."""
    streams = build(env)
    streams["session"].uid("sessions-v2")
    return streams
