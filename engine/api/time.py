"""Sizes of time: ``Time`` and ``Duration`` (PyFlink's two spellings), both accepted wherever a size is taken.

Everything inside Sluice works in integer milliseconds; :func:`to_millis`
converts at the API boundary and names the parameter when the value is wrong.
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


def to_millis(value: SizeLike, parameter: str) -> int:
    """Convert a Time, Duration, timedelta or int (already ms) to ms, naming ``parameter`` on bad input."""
    if isinstance(value, (Time, Duration)):
        return value.millis
    if isinstance(value, _dt.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, bool) or not isinstance(value, int):
        raise JobDefinitionError(
            parameter,
            value,
            "must be a Time, Duration, datetime.timedelta or an int of milliseconds",
            "Use Time.seconds(30) or Duration.of_seconds(30)",
        )
    return value


def positive_millis(value: SizeLike, parameter: str) -> int:
    """Like :func:`to_millis` but the result must be > 0."""
    ms = to_millis(value, parameter)
    if ms <= 0:
        raise JobDefinitionError(parameter, value, "must be greater than 0 ms")
    return ms


def non_negative_millis(value: SizeLike, parameter: str) -> int:
    """Like :func:`to_millis` but the result must be >= 0."""
    ms = to_millis(value, parameter)
    if ms < 0:
        raise JobDefinitionError(parameter, value, "must not be negative")
    return ms
