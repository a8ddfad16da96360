"""Channels and input gates of the local runtime.

A channel is an ordered queue of stream elements from one upstream subtask to
one downstream subtask (Flink's InputChannel).  Records travel in *buffers*
(Python lists of StreamRecord), the way Flink ships records in network buffers;
watermarks, statuses, barriers, cancel markers and end-of-partition travel
between buffers, so their order relative to records is exact.

A channel has a capacity in buffers: a full channel makes its producer wait
(backpressure).  The input gate polls channels round-robin, skipping channels
the barrier handler has blocked during alignment (seed 003).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any


class Channel:
    __slots__ = ("index", "name", "queue", "capacity", "finished")

    def __init__(self, index: int, name: str, capacity: int) -> None:
        self.index = index
        self.name = name
        self.queue: deque[Any] = deque()
        self.capacity = capacity
        self.finished = False  # EndOfPartition was consumed

    def put(self, element: Any) -> None:
        self.queue.append(element)

    def is_full(self) -> bool:
        return len(self.queue) >= self.capacity

    def __len__(self) -> int:
        return len(self.queue)


class InputGate:
    """All input channels of one subtask."""

    def __init__(self, channels: list[Channel], first: Iterable[int] = ()) -> None:
        self.channels = channels
        self._blocked: set[int] = set()
        self._next = 0
        #: channels polled before the others when they hold data: a broadcast input's (a connected operator
        #: reads its rules before the events waiting with them; Flink leaves that order open, and PyFlink and
        #: the Spark runtime both gave the rules first where the local runtime gave none, a new user found)
        self._first = [i for i in first if 0 <= i < len(channels)]
        #: the barrier handler's ``is_blocked(channel)`` (aligned mode, seed 003); None: never blocked
        self.blocked_by: Any = None

    def block(self, channel_index: int) -> None:
        self._blocked.add(channel_index)

    def unblock(self, channel_index: int) -> None:
        self._blocked.discard(channel_index)

    def unblock_all(self) -> None:
        self._blocked.clear()

    def is_blocked(self, channel_index: int) -> bool:
        return channel_index in self._blocked or (self.blocked_by is not None and self.blocked_by(channel_index))

    def poll(self) -> tuple[int, Any] | None:
        """The next element from a non-blocked, non-empty channel (``first`` channels before the others, then
        round-robin); None if none is available."""
        for idx in self._first:
            ch = self.channels[idx]
            if ch.queue and not self.is_blocked(idx):
                return idx, ch.queue.popleft()
        n = len(self.channels)
        for i in range(n):
            idx = (self._next + i) % n
            ch = self.channels[idx]
            if ch.queue and not self.is_blocked(idx):
                self._next = (idx + 1) % n
                return idx, ch.queue.popleft()
        return None

    def has_available(self) -> bool:
        return any(ch.queue and not self.is_blocked(i) for i, ch in enumerate(self.channels))

    def all_finished(self) -> bool:
        return all(ch.finished for ch in self.channels)

    def buffered(self) -> int:
        return sum(len(ch) for ch in self.channels)
