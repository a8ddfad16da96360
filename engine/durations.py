"""Sizes of time: ``Time`` and ``Duration`` (PyFlink's two spellings), both accepted wherever a size is taken.

Everything inside Sluice works in integer milliseconds; :func:`to_millis` (and :func:`positive_millis`,
:func:`non_negative_millis`) is the one conversion of a ``Time``, ``Duration``, ``datetime.timedelta`` or int of
ms, used wherever a job takes a size (windows, triggers, evictors, watermark strategies, checkpoint settings,
state TTL, a file source's discovery interval) and naming the parameter when the value is wrong.

It sits low in the layering (``[tool.importlinter]`` in pyproject.toml: beside ``engine.clock``, above only
``engine.errors``) so that state, io, windowing and the API import it without an upward import;
``engine.api.time`` re-exports it under the name users import.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

from engine.errors import JobDefinitionError


@dataclass(frozen=True, slots=True, order=True)
class Time:
    """A span of time in ms (Flink's deprecated but still common ``Time``)."""

    millis: int

    @staticmethod
    def milliseconds(n: int) -> Time:
        return Time(int(n))

    @staticmethod
    def seconds(n: float) -> Time:
        return Time(round(n * 1000))

    @staticmethod
    def minutes(n: float) -> Time:
        return Time(round(n * 60_000))

    @staticmethod
    def hours(n: float) -> Time:
        return Time(round(n * 3_600_000))

    @staticmethod
    def days(n: float) -> Time:
        return Time(round(n * 86_400_000))

    def to_milliseconds(self) -> int:
        return self.millis


@dataclass(frozen=True, slots=True, order=True)
class Duration:
    """A span of time in ms (PyFlink's ``Duration``)."""

    millis: int

    @staticmethod
    def of_millis(n: int) -> Duration:
        return Duration(int(n))

    @staticmethod
    def of_seconds(n: float) -> Duration:
        return Duration(round(n * 1000))

    @staticmethod
    def of_minutes(n: float) -> Duration:
        return Duration(round(n * 60_000))

    @staticmethod
    def of_hours(n: float) -> Duration:
        return Duration(round(n * 3_600_000))

    @staticmethod
    def of_days(n: float) -> Duration:
        return Duration(round(n * 86_400_000))

    @staticmethod
    def zero() -> Duration:
        return Duration(0)

    def to_milliseconds(self) -> int:
        return self.millis


SizeLike = Time | Duration | _dt.timedelta | int


#: the way out a refused size names, unless the caller gives its own
SIZE_HINT = "Use Time.seconds(30) or Duration.of_seconds(30)"


def to_millis(value: SizeLike, parameter: str, hint: str = SIZE_HINT, where: str | None = None) -> int:
    """Convert a Time, Duration, timedelta (rounded to the nearest ms) or int (already ms) to ms; anything else
    (a bool, a float, a string) is a JobDefinitionError naming ``parameter`` (and ``where`` it was given, e.g.
    ``TumblingEventTimeWindows.of(size, offset)``), with ``hint`` as the way out."""
    if isinstance(value, (Time, Duration)):
        return value.millis
    if isinstance(value, _dt.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, bool) or not isinstance(value, int):
        raise JobDefinitionError(
            parameter,
            value,
            "must be a Time, Duration, datetime.timedelta or an int of milliseconds" + (f" in {where}" if where else ""),
            hint,
        )
    return value


def positive_millis(value: SizeLike, parameter: str, hint: str | None = None, where: str | None = None) -> int:
    """Like :func:`to_millis` but the result must be > 0; ``hint`` (if given) also follows a size <= 0."""
    ms = to_millis(value, parameter, hint or SIZE_HINT, where)
    if ms <= 0:
        raise JobDefinitionError(parameter, value, "must be greater than 0 ms" + (f" in {where}" if where else ""),
                                 hint)
    return ms


def non_negative_millis(value: SizeLike, parameter: str) -> int:
    """Like :func:`to_millis` but the result must be >= 0."""
    ms = to_millis(value, parameter)
    if ms < 0:
        raise JobDefinitionError(parameter, value, "must not be negative")
    return ms
