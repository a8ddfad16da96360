"""``AsyncDataStream.ordered_wait/unordered_wait`` as PyFlink writes them (issue 19: async I/O was reachable
only as ``add_async``)."""

from __future__ import annotations

import asyncio

import pytest

from engine import AsyncDataStream, AsyncFunction, StreamExecutionEnvironment, Time
from engine.errors import JobDefinitionError


class Enrich(AsyncFunction):
    """Later inputs answer sooner: completion order differs from input order."""

    async def async_invoke(self, value):
        await asyncio.sleep(0.002 * (10 - value % 10))
        return [(value, value * value)]


def _run(wait) -> list:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    stream = env.from_collection(list(range(30)))
    return wait(stream, Enrich(), Time.seconds(10), 8).execute_and_collect()


def test_ordered_wait_keeps_input_order_and_unordered_wait_gives_the_same_results() -> None:
    ordered = _run(AsyncDataStream.ordered_wait)
    assert ordered == [(v, v * v) for v in range(30)]
    unordered = _run(AsyncDataStream.unordered_wait)
    assert sorted(unordered) == ordered


def test_a_non_stream_is_refused_naming_the_parameter() -> None:
    with pytest.raises(JobDefinitionError, match="data_stream"):
        AsyncDataStream.unordered_wait([1, 2], Enrich(), Time.seconds(1))
