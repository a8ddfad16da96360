"""``WatermarkStrategy``: how a source's events get timestamps and watermarks (PyFlink names).

A strategy is configuration only.  It is immutable (every ``with_*`` returns a
new strategy), validated when it is built -- a negative out-of-orderness or a
non-positive idle timeout raises :class:`~engine.errors.JobDefinitionError`
before any data flows -- and it *creates* the per-split pieces at run time:
:meth:`WatermarkStrategy.create_timestamp_assigner` and
:meth:`WatermarkStrategy.create_watermark_generator`, both given the injected
:class:`~engine.clock.Clock`.  One generator is created per source split
(ARCHITECTURE section 4).

Supported: ``for_bounded_out_of_orderness``, ``for_monotonous_timestamps``,
``no_watermarks``, ``for_generator`` (custom periodic or punctuated generators),
``for_ingestion_time`` (timestamp = the clock at the source, Flink's
``IngestionTimeAssigner``), ``with_timestamp_assigner``, ``with_idleness``.
Not supported: ``with_watermark_alignment``.
"""

from __future__ import annotations

import datetime
import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any, Callable

from engine.api.fields import check_field, field_of, is_field
from engine.durations import SizeLike, non_negative_millis, positive_millis
from engine.clock import Clock
from engine.errors import JobDefinitionError
from engine.watermarks.generators import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    NoWatermarksGenerator,
    WatermarkGenerator,
    WatermarksWithIdleness,
)


class TimestampAssigner(ABC):
    """Extracts an event timestamp in ms from a record (PyFlink's ``TimestampAssigner``).

    ``record_timestamp`` is the timestamp the source attached to the record,
    or None when it had none.  The result must be an int of milliseconds;
    anything else sends the record to the dead-letter output.
    """

    @abstractmethod
    def extract_timestamp(self, value: Any, record_timestamp: int | None) -> int: ...


class RecordTimestampAssigner(TimestampAssigner):
    """Keeps the timestamp the source attached (Flink's default when no assigner is set)."""

    __slots__ = ()

    def extract_timestamp(self, value: Any, record_timestamp: int | None) -> int | None:  # type: ignore[override]
        return record_timestamp


class IngestionTimeAssigner(TimestampAssigner):
    """Timestamp = processing time when the record enters the source, never decreasing (Flink's IngestionTimeAssigner).

    Clamped to the highest value handed out so far, so a clock that is
    adjusted backwards cannot make the split's timestamps go down.
    """

    __slots__ = ("_clock", "_max_timestamp")

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._max_timestamp: int | None = None

    def extract_timestamp(self, value: Any, record_timestamp: int | None) -> int:
        now = self._clock.now_ms()
        if self._max_timestamp is None or now > self._max_timestamp:
            self._max_timestamp = now
        return self._max_timestamp


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_ONE_MS = datetime.timedelta(milliseconds=1)


class FieldTimestampAssigner(TimestampAssigner):
    """``with_timestamp_assigner("ts")`` / ``(2)``: the timestamp is the record's field (engine/api/fields.py)."""

    __slots__ = ("field",)

    def __init__(self, field: str | int) -> None:
        self.field = check_field("timestamp_assigner", field)

    def extract_timestamp(self, value: Any, record_timestamp: int | None) -> int:
        """The field as epoch milliseconds: an int as it is; a timezone-aware ``datetime`` (a Parquet or Arrow
        timestamp column with a time zone) converted.  A naive ``datetime`` raises: its zone is unknown."""
        found = field_of(value, self.field)
        if isinstance(found, datetime.datetime):
            if found.tzinfo is None:
                raise ValueError(f"field {self.field!r} is a datetime without a time zone ({found.isoformat()}): "
                                 "store event time as epoch milliseconds or as a timestamp with a time zone")
            return (found - _EPOCH) // _ONE_MS
        return found

    def __repr__(self) -> str:
        return f"TimestampAssigner(field={self.field!r})"


class _CallableTimestampAssigner(TimestampAssigner):
    """Adapts a plain function; whether it takes ``(value)`` or ``(value, record_timestamp)`` is decided once."""

    __slots__ = ("fn", "takes_record_timestamp")

    def __init__(self, fn: Callable[..., int], takes_record_timestamp: bool) -> None:
        self.fn = fn
        self.takes_record_timestamp = takes_record_timestamp

    def extract_timestamp(self, value: Any, record_timestamp: int | None) -> int:
        if self.takes_record_timestamp:
            return self.fn(value, record_timestamp)
        return self.fn(value)

    def __repr__(self) -> str:
        return f"TimestampAssigner({getattr(self.fn, '__qualname__', self.fn)!r})"


def _positional_arity(fn: Callable[..., Any], parameter: str) -> int | None:
    """How many positional arguments ``fn`` accepts (None: unbounded, or unknown for builtins)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    count = 0
    required = 0
    for p in sig.parameters.values():
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            return None
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            count += 1
            if p.default is inspect.Parameter.empty:
                required += 1
        elif p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty:
            raise JobDefinitionError(parameter, fn, "must not have required keyword-only parameters")
    if required > 2 or count == 0:
        raise JobDefinitionError(
            parameter,
            fn,
            "must take (value) or (value, record_timestamp)",
            "Or subclass TimestampAssigner and implement extract_timestamp(value, record_timestamp)",
        )
    return count


def to_timestamp_assigner(fn_or_assigner: Any, parameter: str = "timestamp_assigner") -> TimestampAssigner:
    """Accept a TimestampAssigner, a function of ``(value)`` / ``(value, record_timestamp)``, or a field that
    holds the timestamp: a dict key (``"ts"``) or a tuple position (``2``)."""
    if isinstance(fn_or_assigner, TimestampAssigner):
        return fn_or_assigner
    if is_field(fn_or_assigner):
        return FieldTimestampAssigner(fn_or_assigner)
    if isinstance(fn_or_assigner, type) and issubclass(fn_or_assigner, TimestampAssigner):
        raise JobDefinitionError(parameter, fn_or_assigner, "must be an instance, not a class", f"Pass {fn_or_assigner.__name__}()")
    if not callable(fn_or_assigner):
        raise JobDefinitionError(parameter, fn_or_assigner, "must be a TimestampAssigner or a function")
    arity = _positional_arity(fn_or_assigner, parameter)
    return _CallableTimestampAssigner(fn_or_assigner, takes_record_timestamp=arity is None or arity >= 2)


GeneratorFactory = Callable[..., WatermarkGenerator]


def _check_generator_factory(factory: Any) -> bool:
    """Validate a ``for_generator`` factory; returns whether it takes the clock as its one argument."""
    if isinstance(factory, WatermarkGenerator):
        raise JobDefinitionError(
            "generator_factory",
            factory,
            "must be a factory (a class or function), not a generator instance: one generator is created per split",
            f"Pass {type(factory).__name__} or lambda: {type(factory).__name__}(...)",
        )
    if not callable(factory):
        raise JobDefinitionError("generator_factory", factory, "must be callable and return a WatermarkGenerator")
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):
        return False
    required = [
        p
        for p in sig.parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    if len(required) > 1:
        raise JobDefinitionError("generator_factory", factory, "must take no argument or one (the Clock)")
    return len(required) == 1


@dataclass(frozen=True, slots=True)
class WatermarkStrategy:
    """Timestamp assigner + watermark generator factory + idleness, as one immutable value.

    Build with the static constructors; do not call the constructor directly.
    ``description`` names the generator for metadata and error messages.
    """

    generator_factory: GeneratorFactory
    description: str
    generator_takes_clock: bool = False
    timestamp_assigner: TimestampAssigner | None = None
    idle_timeout_ms: int | None = None
    is_ingestion_time: bool = False

    # ---- constructors (PyFlink names) ---------------------------------------------------------

    @staticmethod
    def for_bounded_out_of_orderness(max_out_of_orderness: SizeLike) -> WatermarkStrategy:
        """Watermark = max timestamp - ``max_out_of_orderness`` - 1, emitted periodically."""
        ms = non_negative_millis(max_out_of_orderness, "max_out_of_orderness")
        return WatermarkStrategy(
            generator_factory=lambda: BoundedOutOfOrdernessWatermarks(ms),
            description=f"bounded_out_of_orderness({ms} ms)",
        )

    @staticmethod
    def for_monotonous_timestamps() -> WatermarkStrategy:
        """Timestamps never decrease within a split: watermark = max timestamp - 1."""
        return WatermarkStrategy(generator_factory=AscendingTimestampsWatermarks, description="monotonous_timestamps")

    @staticmethod
    def no_watermarks() -> WatermarkStrategy:
        """No watermarks at all (processing-time jobs); event-time windows will then fire only at end of input."""
        return WatermarkStrategy(generator_factory=NoWatermarksGenerator, description="no_watermarks")

    @staticmethod
    def for_generator(generator_factory: GeneratorFactory) -> WatermarkStrategy:
        """A custom generator: ``generator_factory()`` or ``generator_factory(clock)`` returns a new WatermarkGenerator per split."""
        takes_clock = _check_generator_factory(generator_factory)
        name = getattr(generator_factory, "__qualname__", repr(generator_factory))
        return WatermarkStrategy(
            generator_factory=generator_factory, description=f"generator({name})", generator_takes_clock=takes_clock
        )

    @staticmethod
    def for_ingestion_time() -> WatermarkStrategy:
        """Ingestion time: each record's timestamp is the clock when the source reads it; watermarks follow monotonously."""
        return replace(WatermarkStrategy.for_monotonous_timestamps(), description="ingestion_time", is_ingestion_time=True)

    # ---- refinements ------------------------------------------------------------------------------

    def with_timestamp_assigner(self, timestamp_assigner: Any) -> WatermarkStrategy:
        """Use a TimestampAssigner or a function ``(value)`` / ``(value, record_timestamp)`` returning ms."""
        if self.is_ingestion_time:
            raise JobDefinitionError(
                "timestamp_assigner",
                timestamp_assigner,
                "cannot be combined with ingestion time, whose timestamps come from the clock",
                "Use for_monotonous_timestamps() or for_bounded_out_of_orderness(...) with an assigner instead",
            )
        return replace(self, timestamp_assigner=to_timestamp_assigner(timestamp_assigner))

    def with_idleness(self, idle_timeout: SizeLike) -> WatermarkStrategy:
        """Mark a split idle after ``idle_timeout`` of processing time without events, so it stops holding back the watermark."""
        ms = positive_millis(idle_timeout, "idle_timeout")
        return replace(self, idle_timeout_ms=ms)

    def with_watermark_alignment(self, *args: Any, **kwargs: Any) -> WatermarkStrategy:
        raise JobDefinitionError(
            "watermark_alignment", args or kwargs, "is not supported by Sluice", "Remove with_watermark_alignment(...)"
        )

    # ---- run-time factories --------------------------------------------------------------------------

    def create_timestamp_assigner(self, clock: Clock) -> TimestampAssigner:
        """A fresh assigner for one split (ingestion time reads ``clock``)."""
        if self.is_ingestion_time:
            return IngestionTimeAssigner(clock)
        if self.timestamp_assigner is not None:
            return self.timestamp_assigner
        return RecordTimestampAssigner()

    def has_timestamp_assigner(self) -> bool:
        """True when timestamps come from the user's assigner or the clock rather than the source."""
        return self.is_ingestion_time or self.timestamp_assigner is not None

    def create_watermark_generator(self, clock: Clock) -> WatermarkGenerator:
        """A fresh generator for one split, wrapped for idleness when configured."""
        generator = self.generator_factory(clock) if self.generator_takes_clock else self.generator_factory()
        if not isinstance(generator, WatermarkGenerator):
            raise JobDefinitionError(
                "generator_factory", self.generator_factory, f"must return a WatermarkGenerator, returned {type(generator).__name__}"
            )
        if self.idle_timeout_ms is not None:
            return WatermarksWithIdleness(generator, self.idle_timeout_ms, clock)
        return generator

    def __repr__(self) -> str:
        parts = [self.description]
        if self.timestamp_assigner is not None:
            parts.append(f"assigner={self.timestamp_assigner!r}")
        if self.idle_timeout_ms is not None:
            parts.append(f"idle_timeout_ms={self.idle_timeout_ms}")
        return f"WatermarkStrategy({', '.join(parts)})"
