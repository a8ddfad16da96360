"""Stateless one-input operators: map, filter, flat_map, side-output selection and sink writers.

They process whole buffers (``process_batch``) with one Python-level loop; a
user function's exception fails the task (Flink semantics: it is a bug, not
bad data), to be recovered from the last checkpoint.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from engine.elements import StreamRecord
from engine.operators.base import OneInputStreamOperator


class MapOperator(OneInputStreamOperator):
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self._fn = fn

    def process_element(self, record: StreamRecord) -> None:
        self.output.collect(StreamRecord(self._fn(record.value), record.timestamp))

    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        fn, collect = self._fn, self.output.collect
        for r in records:
            collect(StreamRecord(fn(r.value), r.timestamp))


class FilterOperator(OneInputStreamOperator):
    def __init__(self, fn: Callable[[Any], bool]) -> None:
        self._fn = fn

    def process_element(self, record: StreamRecord) -> None:
        if self._fn(record.value):
            self.output.collect(record)

    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        fn, collect = self._fn, self.output.collect
        for r in records:
            if fn(r.value):
                collect(r)


class FlatMapOperator(OneInputStreamOperator):
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self._fn = fn

    def process_element(self, record: StreamRecord) -> None:
        result = self._fn(record.value)
        if result is None:
            return
        for v in result:
            self.output.collect(StreamRecord(v, record.timestamp))


class SinkOperator(OneInputStreamOperator):
    """Hands records to a sink writer; checkpoint hooks drive its two-phase commit."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def process_element(self, record: StreamRecord) -> None:
        self._writer.write([record.value])

    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        self._writer.write([r.value for r in records])

    def process_watermark(self, watermark: Any) -> None:
        pass  # sinks end the chain

    def process_watermark_status(self, status: Any) -> None:
        pass


class CollectOperator(OneInputStreamOperator):
    """Appends values to a list (execute_and_collect on bounded input)."""

    def __init__(self, target: list[Any]) -> None:
        self._target = target

    def process_element(self, record: StreamRecord) -> None:
        self._target.append(record.value)

    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        self._target.extend(r.value for r in records)

    def process_watermark(self, watermark: Any) -> None:
        pass

    def process_watermark_status(self, status: Any) -> None:
        pass
