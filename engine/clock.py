"""Processing time as an injected dependency (STYLE section 3).

Operators, watermark generators and the checkpoint coordinator never read the
wall clock themselves: they are handed a :class:`Clock`.  Production code
passes a :class:`SystemClock`; tests pass a :class:`ManualClock` and move time
by hand, as Beam's ``MockClock`` and Flink's ``ManualClock`` do, so idleness,
processing-time windows and timeouts are tested without sleeping.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod

from engine.errors import IllegalStateError


class Clock(ABC):
    """Source of processing time in epoch milliseconds."""

    @abstractmethod
    def now_ms(self) -> int:
        """The current processing time in ms since the epoch."""


class SystemClock(Clock):
    """The wall clock (Flink's ``System.currentTimeMillis``).

    This is the only place in Sluice that reads the wall clock; everything else
    receives a Clock, so swapping in a :class:`ManualClock` makes a job's
    processing-time behaviour deterministic.
    """

    __slots__ = ()

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK = SystemClock()


class ManualClock(Clock):
    """A clock that moves only when told to; for tests and for replaying processing time.

    Processing time never goes backwards (timers registered for a past time
    would otherwise never fire again), so :meth:`set` refuses an earlier time.
    """

    __slots__ = ("_now_ms",)

    def __init__(self, start_ms: int = 0) -> None:
        self._now_ms = int(start_ms)

    def now_ms(self) -> int:
        return self._now_ms

    def advance(self, delta_ms: int) -> int:
        """Move time forward by ``delta_ms`` (>= 0) and return the new time."""
        if delta_ms < 0:
            raise IllegalStateError(f"ManualClock.advance: processing time cannot go backwards (delta_ms={delta_ms})")
        self._now_ms += int(delta_ms)
        return self._now_ms

    def set(self, now_ms: int) -> int:
        """Jump to ``now_ms`` (not earlier than the current time) and return it."""
        if now_ms < self._now_ms:
            raise IllegalStateError(
                f"ManualClock.set: processing time cannot go backwards (now {self._now_ms} ms, asked {now_ms} ms)"
            )
        self._now_ms = int(now_ms)
        return self._now_ms

    def __repr__(self) -> str:
        return f"ManualClock(now_ms={self._now_ms})"
