"""The async I/O operator's queues: pure ordering rules for in-flight elements (seed 004).

Seed 004: a watermark enters the queue already complete (``WatermarkQueueEntry``).

* :class:`OrderedStreamElementQueue` emits only its head, so results and
  watermarks leave in input order.
* :class:`UnorderedStreamElementQueue` keeps *segments*: records join the last
  segment and leave in completion order, but a watermark closes the segment --
  it goes into a segment of its own (reusing the last one if it is empty)
  followed by a fresh segment -- and only the first segment emits, so no result
  crosses a watermark.

Both are bounded by ``capacity`` (records and watermarks count); a full queue
refuses ``try_put`` and the operator waits, which is its backpressure.  They
are single-threaded and know nothing of asyncio: entries are completed by the
operator's task thread (or by hand in tests).  :func:`encode_in_flight` stores
the un-emitted inputs of a queue as JSON through the pickle-free codec.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod
from collections import deque
from typing import Any, Iterable

from engine.elements import StreamElement, StreamRecord, Watermark
from engine.errors import CorruptSnapshotError, IllegalStateError, JobDefinitionError, UnsupportedFormatVersion
from engine.operators.base import Output
from engine.state import codec

ASYNC_STATE_FORMAT_VERSION = 1

# ---------------------------------------------------------------------------------------------------
# queue entries and queues (pure)
# ---------------------------------------------------------------------------------------------------

_sequence = itertools.count()


class StreamElementQueueEntry(ABC):
    """An input element in the async queue, and (once done) what it emits."""

    __slots__ = ("input_element", "sequence")

    def __init__(self, input_element: StreamElement) -> None:
        self.input_element = input_element
        self.sequence = next(_sequence)

    @abstractmethod
    def is_done(self) -> bool: ...

    @abstractmethod
    def emit_result(self, output: Output) -> None: ...


class WatermarkQueueEntry(StreamElementQueueEntry):
    """A watermark is complete the moment it is enqueued (seed 004); it waits only for its turn."""

    __slots__ = ()

    def is_done(self) -> bool:
        return True

    def emit_result(self, output: Output) -> None:
        output.emit_watermark(self.input_element)  # type: ignore[arg-type]


class StreamRecordQueueEntry(StreamElementQueueEntry):
    """A record waiting for its async results (Flink's ResultFuture); results carry the input's timestamp."""

    __slots__ = ("_results",)

    def __init__(self, record: StreamRecord) -> None:
        super().__init__(record)
        self._results: list[Any] | None = None

    def is_done(self) -> bool:
        return self._results is not None

    def complete(self, results: Iterable[Any]) -> bool:
        """Store the results; a second completion is ignored (returns False), as Flink's ResultHandler does."""
        if self._results is not None:
            return False
        self._results = list(results)
        return True

    def emit_result(self, output: Output) -> None:
        timestamp = self.input_element.timestamp  # type: ignore[attr-defined]
        for result in self._results or ():
            output.collect(StreamRecord(result, timestamp))


class StreamElementQueue(ABC):
    """The async operator's bounded buffer of in-flight elements."""

    def __init__(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise JobDefinitionError("capacity", capacity, "must be an int >= 1 (the maximum number of in-flight elements)")
        self.capacity = capacity

    @abstractmethod
    def try_put(self, element: StreamElement) -> StreamElementQueueEntry | None:
        """Enqueue a record or watermark; None when the queue is full (the caller waits and retries)."""

    @abstractmethod
    def has_completed_elements(self) -> bool:
        """Whether :meth:`emit_completed_element` would emit something now."""

    @abstractmethod
    def emit_completed_element(self, output: Output) -> None:
        """Emit one completed entry, if the ordering rules allow one."""

    @abstractmethod
    def values(self) -> list[StreamElement]:
        """The input elements not yet emitted, in input order (what a checkpoint stores)."""

    @abstractmethod
    def size(self) -> int: ...

    def is_empty(self) -> bool:
        return self.size() == 0

    @staticmethod
    def _check_enqueueable(element: StreamElement) -> None:
        if not isinstance(element, (StreamRecord, Watermark)):
            raise IllegalStateError(f"cannot enqueue {element!r} in the async queue: only records and watermarks")


class OrderedStreamElementQueue(StreamElementQueue):
    """Emits only the head, so results and watermarks leave in input order."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._queue: deque[StreamElementQueueEntry] = deque()

    def try_put(self, element: StreamElement) -> StreamElementQueueEntry | None:
        self._check_enqueueable(element)
        if len(self._queue) >= self.capacity:
            return None
        entry: StreamElementQueueEntry = (
            StreamRecordQueueEntry(element) if isinstance(element, StreamRecord) else WatermarkQueueEntry(element)
        )
        self._queue.append(entry)
        return entry

    def has_completed_elements(self) -> bool:
        return bool(self._queue) and self._queue[0].is_done()

    def emit_completed_element(self, output: Output) -> None:
        if self.has_completed_elements():
            self._queue.popleft().emit_result(output)

    def values(self) -> list[StreamElement]:
        return [entry.input_element for entry in self._queue]

    def size(self) -> int:
        return len(self._queue)


class _Segment:
    """Entries between two watermarks: any completed one may leave, in completion order."""

    __slots__ = ("incomplete", "completed")

    def __init__(self) -> None:
        self.incomplete: dict[StreamElementQueueEntry, None] = {}
        self.completed: deque[StreamElementQueueEntry] = deque()

    def add(self, entry: StreamElementQueueEntry) -> None:
        if entry.is_done():
            self.completed.append(entry)
        else:
            self.incomplete[entry] = None

    def on_completed(self, entry: StreamElementQueueEntry) -> None:
        if entry in self.incomplete:
            del self.incomplete[entry]
            self.completed.append(entry)

    def is_empty(self) -> bool:
        return not self.incomplete and not self.completed

    def has_completed(self) -> bool:
        return bool(self.completed)

    def emit_completed(self, output: Output) -> int:
        if not self.completed:
            return 0
        self.completed.popleft().emit_result(output)
        return 1

    def pending(self) -> list[StreamElementQueueEntry]:
        return sorted([*self.completed, *self.incomplete], key=lambda e: e.sequence)


class SegmentedStreamRecordQueueEntry(StreamRecordQueueEntry):
    """A record entry that tells its segment when it completes, so the segment can emit it."""

    __slots__ = ("_segment",)

    def __init__(self, record: StreamRecord, segment: _Segment) -> None:
        super().__init__(record)
        self._segment = segment

    def complete(self, results: Iterable[Any]) -> bool:
        if super().complete(results):
            self._segment.on_completed(self)
            return True
        return False


class UnorderedStreamElementQueue(StreamElementQueue):
    """Results leave as they complete, but never across a watermark (seed 004's UnorderedStreamElementQueue)."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)
        self._segments: deque[_Segment] = deque()
        self._number_of_entries = 0

    def try_put(self, element: StreamElement) -> StreamElementQueueEntry | None:
        self._check_enqueueable(element)
        if self._number_of_entries >= self.capacity:
            return None
        entry = self._add_record(element) if isinstance(element, StreamRecord) else self._add_watermark(element)
        self._number_of_entries += 1
        return entry

    def _add_segment(self) -> _Segment:
        segment = _Segment()
        self._segments.append(segment)
        return segment

    def _add_record(self, record: StreamRecord) -> StreamElementQueueEntry:
        segment = self._segments[-1] if self._segments else self._add_segment()
        entry = SegmentedStreamRecordQueueEntry(record, segment)
        segment.add(entry)
        return entry

    def _add_watermark(self, watermark: Watermark) -> StreamElementQueueEntry:
        # reuse the last segment if it is empty (drained, or the fresh one after a previous watermark),
        # otherwise the watermark closes the current segment with a segment of its own
        if self._segments and self._segments[-1].is_empty():
            watermark_segment = self._segments[-1]
        else:
            watermark_segment = self._add_segment()
        entry = WatermarkQueueEntry(watermark)
        watermark_segment.add(entry)
        # records after the watermark go to a new segment
        self._add_segment()
        return entry

    def has_completed_elements(self) -> bool:
        return bool(self._segments) and self._segments[0].has_completed()

    def emit_completed_element(self, output: Output) -> None:
        if not self._segments:
            return
        current = self._segments[0]
        self._number_of_entries -= current.emit_completed(output)
        # drop a drained segment if others follow; keep the last one for reuse
        if len(self._segments) > 1 and current.is_empty():
            self._segments.popleft()

    def values(self) -> list[StreamElement]:
        return [entry.input_element for segment in self._segments for entry in segment.pending()]

    def size(self) -> int:
        return self._number_of_entries

    def num_segments(self) -> int:
        return len(self._segments)


# ---------------------------------------------------------------------------------------------------
# snapshot encoding
# ---------------------------------------------------------------------------------------------------


def encode_in_flight(elements: Iterable[StreamElement]) -> dict[str, Any]:
    """In-flight inputs as JSON data; record values go through the pickle-free codec."""
    encoded = []
    for element in elements:
        if isinstance(element, StreamRecord):
            encoded.append({"kind": "record", "value": codec.encode(element.value), "timestamp": element.timestamp})
        elif isinstance(element, Watermark):
            encoded.append({"kind": "watermark", "timestamp": element.timestamp})
        else:
            raise IllegalStateError(f"Bug: {element!r} cannot be in the async queue")
    return {"format_version": ASYNC_STATE_FORMAT_VERSION, "in_flight": encoded}


def decode_in_flight(state: Any) -> list[StreamElement]:
    if not isinstance(state, dict):
        raise CorruptSnapshotError(f"async I/O state must be an object, got {type(state).__name__}")
    if state.get("format_version") != ASYNC_STATE_FORMAT_VERSION:
        raise UnsupportedFormatVersion(
            f"async I/O state format_version {state.get('format_version')!r} is not supported "
            f"(this Sluice reads {ASYNC_STATE_FORMAT_VERSION})"
        )
    elements: list[StreamElement] = []
    try:
        for raw in state["in_flight"]:
            timestamp = raw["timestamp"]
            if timestamp is not None and (isinstance(timestamp, bool) or not isinstance(timestamp, int)):
                raise TypeError(f"timestamp {timestamp!r} is not an int")
            if raw["kind"] == "record":
                elements.append(StreamRecord(codec.decode(raw["value"]), timestamp))
            elif raw["kind"] == "watermark":
                elements.append(Watermark(timestamp))
            else:
                raise ValueError(f"unknown in-flight element kind {raw['kind']!r}")
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptSnapshotError(f"async I/O state is malformed ({exc})") from exc
    return elements
