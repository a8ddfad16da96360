"""Timers for the protocol code: an injected scheduler, never a thread (STYLE section 3).

The coordinator schedules its periodic trigger and each checkpoint's canceller
(timeout), the alternating barrier handler its alignment timer, through a
:class:`Scheduler`.  A runtime implements it on its event loop or timer thread
and must run callbacks one at a time in the thread that owns the protocol object
(the coordinator's main thread, the task's mailbox).  :class:`ClockScheduler`
is that implementation for loops that own the protocol thread (both runtimes);
:class:`ManualScheduler` adds ``advance`` for tests on a :class:`~engine.clock.ManualClock`.
"""

from __future__ import annotations

import heapq
import itertools
from abc import ABC, abstractmethod
from typing import Any, Callable

from engine.clock import ManualClock


class ScheduledTask(ABC):
    """A handle on a scheduled callback."""

    @abstractmethod
    def cancel(self) -> None:
        """Do not run the callback (no-op if it already ran)."""

    @abstractmethod
    def is_cancelled(self) -> bool: ...


class Scheduler(ABC):
    """Runs a callback once after ``delay_ms`` of processing time."""

    @abstractmethod
    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> ScheduledTask: ...


class _ClockTask(ScheduledTask):
    __slots__ = ("callback", "_cancelled")

    def __init__(self, callback: Callable[[], None]) -> None:
        self.callback = callback
        self._cancelled = False

    def cancel(self) -> None:
        self._cancelled = True

    def is_cancelled(self) -> bool:
        return self._cancelled


class ClockScheduler(Scheduler):
    """Callbacks due on an injected clock, run in due-time order (FIFO on ties) when the owner calls
    :meth:`run_due`: the local runtime's scheduling loop between rounds, the Spark job master between
    epochs, a test after advancing a ManualClock.  Nothing runs on its own: no thread, no wall clock."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock
        self._queue: list[tuple[int, int, _ClockTask]] = []
        self._seq = itertools.count()

    def schedule(self, delay_ms: int, callback: Callable[[], None]) -> ScheduledTask:
        task = _ClockTask(callback)
        heapq.heappush(self._queue, (self.clock.now_ms() + max(0, int(delay_ms)), next(self._seq), task))
        return task

    def run_due(self) -> int:
        """Run every callback due at the current time (including ones they schedule for now); returns how many ran."""
        ran = 0
        while self._queue and self._queue[0][0] <= self.clock.now_ms():
            _, _, task = heapq.heappop(self._queue)
            if task.is_cancelled():
                continue
            task.callback()
            ran += 1
        return ran

    def next_due_ms(self) -> int | None:
        """When the earliest live callback is due, or None."""
        while self._queue and self._queue[0][2].is_cancelled():
            heapq.heappop(self._queue)
        return self._queue[0][0] if self._queue else None


class ManualScheduler(ClockScheduler):
    """A ClockScheduler on a :class:`~engine.clock.ManualClock` that tests move with :meth:`advance`."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__(clock)

    def advance(self, delta_ms: int) -> int:
        """Move the clock forward, stopping at each due time so callbacks see their own time."""
        target = self.clock.now_ms() + delta_ms
        ran = 0
        while True:
            next_due = self.next_due_ms()
            if next_due is None or next_due > target:
                break
            self.clock.set(max(next_due, self.clock.now_ms()))
            ran += self.run_due()
        self.clock.set(target)
        return ran + self.run_due()

    def pending_delays_ms(self) -> list[int]:
        """Delays from now of the live scheduled callbacks, sorted (for assertions)."""
        now = self.clock.now_ms()
        return sorted(due - now for due, _, task in self._queue if not task.is_cancelled())
