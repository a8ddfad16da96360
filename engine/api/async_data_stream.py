"""PyFlink's ``AsyncDataStream`` (``pyflink.datastream.async_data_stream``): async I/O as PyFlink spells it.

``AsyncDataStream.unordered_wait(stream, async_function, timeout, capacity)`` and ``ordered_wait(...)`` build
the same operator as ``stream.add_async(async_function, timeout, capacity, ordered=...)``
(engine/operators/async_io.py): results in completion order (never across a watermark) or in input order.
``output_type`` is accepted and, as for every PyFlink type declaration here, not enforced.
"""

from __future__ import annotations

from typing import Any

from engine.api.datastream import DataStream, SingleOutputStreamOperator
from engine.api.time import SizeLike
from engine.errors import JobDefinitionError


class AsyncDataStream:
    """Static helpers that add an async I/O operator to a stream (Flink's ``AsyncDataStream``)."""

    @staticmethod
    def unordered_wait(data_stream: DataStream, async_function: Any, timeout: SizeLike, capacity: int = 100,
                       output_type: Any = None) -> SingleOutputStreamOperator:
        """Results leave as they complete; a watermark is never overtaken."""
        return _add(data_stream, async_function, timeout, capacity, ordered=False)

    @staticmethod
    def ordered_wait(data_stream: DataStream, async_function: Any, timeout: SizeLike, capacity: int = 100,
                     output_type: Any = None) -> SingleOutputStreamOperator:
        """Results leave in input order."""
        return _add(data_stream, async_function, timeout, capacity, ordered=True)


def _add(data_stream: Any, async_function: Any, timeout: SizeLike, capacity: int,
         ordered: bool) -> SingleOutputStreamOperator:
    if not isinstance(data_stream, DataStream):
        raise JobDefinitionError("data_stream", data_stream, "must be a DataStream")
    return data_stream.add_async(async_function, timeout, capacity, ordered=ordered)
