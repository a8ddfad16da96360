"""Async I/O: queue ordering rules by hand, then the operator on its own event loop (seed 004)."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from engine.elements import StreamRecord, Watermark
from engine.errors import CorruptSnapshotError, JobDefinitionError, UnsupportedFormatVersion
from engine.operators.async_io import (
    AsyncFunction,
    AsyncWaitOperator,
    OrderedStreamElementQueue,
    UnorderedStreamElementQueue,
    decode_in_flight,
    encode_in_flight,
)
from engine.operators.base import ListOutput, MaterializedOperatorSnapshot, OperatorContext


def r(value, ts=None):
    return StreamRecord(value, ts)


def emit_all(queue, output):
    while queue.has_completed_elements():
        queue.emit_completed_element(output)
    return output.elements


# ---- queues, completed by hand -------------------------------------------------------------------


def test_ordered_queue_emits_only_the_head_so_input_order_and_watermarks_hold():
    q, out = OrderedStreamElementQueue(10), ListOutput()
    e1, e2 = q.try_put(r("a", 1)), q.try_put(r("b", 2))
    q.try_put(Watermark(5))
    e3 = q.try_put(r("c", 6))
    e2.complete(["B"])
    e3.complete(["C"])
    assert not q.has_completed_elements()
    assert emit_all(q, out) == []
    e1.complete(["A1", "A2"])
    assert emit_all(q, out) == [r("A1", 1), r("A2", 1), r("B", 2), Watermark(5), r("C", 6)]
    assert q.is_empty()


def test_unordered_queue_emits_in_completion_order_but_never_across_a_watermark():
    #   segment 1: a b | segment 2: W5 | segment 3: c
    q, out = UnorderedStreamElementQueue(10), ListOutput()
    ea, eb = q.try_put(r("a")), q.try_put(r("b"))
    q.try_put(Watermark(5))
    ec = q.try_put(r("c"))
    assert q.num_segments() == 3
    ec.complete(["C"])
    assert emit_all(q, out) == []  # c completed first but is behind the watermark
    eb.complete(["B"])
    assert emit_all(q, out) == [r("B")]
    ea.complete(["A"])
    assert emit_all(q, out) == [r("B"), r("A"), Watermark(5), r("C")]
    assert q.size() == 0


def test_unordered_queue_emits_a_watermark_with_nothing_before_it_at_once():
    q, out = UnorderedStreamElementQueue(4), ListOutput()
    q.try_put(Watermark(1))
    assert emit_all(q, out) == [Watermark(1)]
    q.try_put(Watermark(2))
    q.try_put(Watermark(3))
    assert emit_all(q, out) == [Watermark(1), Watermark(2), Watermark(3)]


def test_unordered_queue_reuses_an_empty_last_segment_for_the_next_watermark():
    q = UnorderedStreamElementQueue(10)
    q.try_put(Watermark(1))  # [W1] [ ]
    assert q.num_segments() == 2
    q.try_put(Watermark(2))  # [W1] [W2] [ ]  (the empty segment was reused, one new added)
    assert q.num_segments() == 3


def test_capacity_counts_records_and_watermarks_and_frees_on_emit():
    for q in (OrderedStreamElementQueue(2), UnorderedStreamElementQueue(2)):
        e1 = q.try_put(r("a"))
        assert q.try_put(Watermark(1)) is not None
        assert q.try_put(r("b")) is None
        e1.complete([])
        emit_all(q, ListOutput())
        assert q.size() == 0
        assert q.try_put(r("b")) is not None


def test_values_are_the_unemitted_inputs_in_input_order_including_completed_ones():
    q = UnorderedStreamElementQueue(10)
    ea, eb = q.try_put(r("a")), q.try_put(r("b"))
    q.try_put(Watermark(3))
    q.try_put(r("c"))
    eb.complete(["B"])
    assert q.values() == [r("a"), r("b"), Watermark(3), r("c")]
    ea.complete([])
    emit_all(q, ListOutput())
    assert q.values() == [r("c")]


def test_a_second_completion_is_ignored():
    q = OrderedStreamElementQueue(1)
    e = q.try_put(r("a"))
    assert e.complete(["first"]) is True
    assert e.complete(["second"]) is False
    assert emit_all(q, ListOutput()) == [r("first")]


def test_queues_validate_capacity():
    with pytest.raises(JobDefinitionError, match="capacity"):
        OrderedStreamElementQueue(0)


def test_in_flight_encoding_round_trips_through_json_and_refuses_bad_input():
    elements = [r({"id": 1, "tags": ("x", "y")}, 10), Watermark(11), r(b"raw")]
    state = json.loads(json.dumps(encode_in_flight(elements)))
    assert decode_in_flight(state) == elements
    with pytest.raises(UnsupportedFormatVersion):
        decode_in_flight({**state, "format_version": 2})
    with pytest.raises(CorruptSnapshotError):
        decode_in_flight({"format_version": 1, "in_flight": [{"kind": "barrier", "timestamp": 1}]})


# ---- the operator -------------------------------------------------------------------------------


class GatedLookup(AsyncFunction):
    """Each call waits until the test releases its value; results are ``value.upper()``."""

    def __init__(self, auto_release: bool = False) -> None:
        self.gates: dict[str, threading.Event] = {}
        self.invoked: list[str] = []
        self.finished: list[str] = []
        self.auto_release = auto_release
        self.lock = threading.Lock()

    def gate(self, value: str) -> threading.Event:
        with self.lock:
            return self.gates.setdefault(value, threading.Event())

    def release(self, value: str) -> None:
        self.gate(value).set()

    async def async_invoke(self, value):
        self.invoked.append(value)
        gate = self.gate(value)
        while not (self.auto_release or gate.is_set()):
            await asyncio.sleep(0.002)
        self.finished.append(value)
        return [value.upper()]


def wait_until(predicate, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.002)


def release_in_order(fn, op, values):
    for v in values:
        fn.release(v)
        wait_until(lambda v=v: v in fn.finished)
        time.sleep(0.01)  # let the completion reach the mailbox


@pytest.fixture
def opened():
    ops = []

    def make(fn, **kwargs):
        op = AsyncWaitOperator(fn, **{"timeout_ms": 5_000, "capacity": 10, **kwargs})
        out = ListOutput()
        op.open(OperatorContext("async-enrich"), out)
        ops.append(op)
        return op, out

    yield make
    for op in ops:
        op.close()


@pytest.mark.parametrize(
    "ordered, expected",
    [
        (True, [r("A", 1), r("B", 2), Watermark(10), r("C", 11)]),
        (False, [r("B", 2), r("A", 1), Watermark(10), r("C", 11)]),
    ],
)
def test_ordered_keeps_input_order_and_unordered_keeps_completion_order_within_watermarks(opened, ordered, expected):
    fn = GatedLookup()
    op, out = opened(fn, ordered=ordered)
    op.process_element(r("a", 1))
    op.process_element(r("b", 2))
    op.process_watermark(Watermark(10))
    op.process_element(r("c", 11))
    release_in_order(fn, op, ["c", "b", "a"])
    op.wait_for_completion(timeout_s=5)
    assert out.elements == expected


@pytest.mark.parametrize("ordered", [True, False])
def test_a_watermark_waits_for_earlier_records_and_is_never_overtaken(opened, ordered):
    fn = GatedLookup()
    op, out = opened(fn, ordered=ordered)
    op.process_element(r("a", 3))
    op.process_watermark(Watermark(5))
    op.process_element(r("b", 6))
    fn.release("b")
    wait_until(lambda: "b" in fn.finished)
    time.sleep(0.01)
    op.drain()
    assert out.elements == []
    fn.release("a")
    op.wait_for_completion(timeout_s=5)
    assert out.elements == [r("A", 3), Watermark(5), r("B", 6)]


def test_a_watermark_with_nothing_in_flight_passes_at_once(opened):
    op, out = opened(GatedLookup())
    op.process_watermark(Watermark(7))
    assert out.elements == [Watermark(7)]


def test_a_full_queue_blocks_process_element_until_a_result_is_emitted(opened):
    fn = GatedLookup()
    op, out = opened(fn, capacity=2)
    op.process_element(r("a"))
    op.process_element(r("b"))
    third = threading.Thread(target=op.process_element, args=(r("c"),))
    third.start()
    time.sleep(0.2)
    assert third.is_alive()  # backpressure
    assert fn.invoked == ["a", "b"]
    fn.release("a")
    third.join(timeout=5)
    assert not third.is_alive()
    wait_until(lambda: len(fn.invoked) == 3)  # c was submitted once a left the queue
    assert fn.invoked == ["a", "b", "c"]
    assert out.elements == [r("A")]
    fn.release("b")
    fn.release("c")
    op.wait_for_completion(timeout_s=5)
    assert out.elements == [r("A"), r("B"), r("C")]


class SlowLookup(AsyncFunction):
    async def async_invoke(self, value):
        await asyncio.sleep(10)
        return [value]


class SlowLookupWithFallback(SlowLookup):
    def timeout(self, value):
        return [f"fallback:{value}"]


def test_a_timeout_fails_the_operator_by_default(opened):
    op, _ = opened(SlowLookup(), timeout_ms=30)
    op.process_element(r("a"))
    with pytest.raises(TimeoutError, match="'a'"):
        op.wait_for_completion(timeout_s=5)
    with pytest.raises(TimeoutError):
        op.process_element(r("b"))


def test_a_timeout_handler_supplies_results_with_the_input_timestamp(opened):
    op, out = opened(SlowLookupWithFallback(), timeout_ms=30)
    op.process_element(r("a", 99))
    op.wait_for_completion(timeout_s=5)
    assert out.elements == [r("fallback:a", 99)]


class FailingLookup(AsyncFunction):
    async def async_invoke(self, value):
        raise ConnectionError(f"lookup of {value} refused")


class DictLookup(AsyncFunction):
    async def async_invoke(self, value):
        return {"id": value}


def test_an_exception_in_async_invoke_fails_the_operator(opened):
    op, _ = opened(FailingLookup())
    with pytest.raises(ConnectionError, match="lookup of a refused"):
        op.process_element(r("a"))  # the failure surfaces on the task thread at the next call
        op.wait_for_completion(timeout_s=5)
    with pytest.raises(ConnectionError):
        op.process_watermark(Watermark(1))


def test_a_result_that_is_not_a_list_of_results_fails_with_a_hint(opened):
    op, _ = opened(DictLookup())
    with pytest.raises(TypeError, match=r"return \[result\]"):
        op.process_element(r("a"))
        op.wait_for_completion(timeout_s=5)


def test_a_plain_coroutine_function_is_accepted(opened):
    async def double(value):
        return [value, value]

    op, out = opened(double)
    op.process_element(r(1, 5))
    op.wait_for_completion(timeout_s=5)
    assert out.elements == [r(1, 5), r(1, 5)]


@pytest.mark.parametrize(
    "kwargs, parameter",
    [({"timeout_ms": 0}, "timeout_ms"), ({"timeout_ms": 10, "capacity": 0}, "capacity"), ({"timeout_ms": 10}, "fn")],
)
def test_bad_definitions_fail_at_build_time(kwargs, parameter):
    fn = (lambda v: [v]) if parameter == "fn" else GatedLookup()
    with pytest.raises(JobDefinitionError) as err:
        AsyncWaitOperator(fn, **kwargs)
    assert err.value.parameter == parameter


@pytest.mark.parametrize("ordered", [True, False])
def test_in_flight_inputs_are_snapshotted_and_re_invoked_after_restore(opened, ordered):
    fn = GatedLookup()
    op, out = opened(fn, ordered=ordered)
    op.process_element(r("a", 1))
    fn.release("a")
    wait_until(lambda: "a" in fn.finished)
    time.sleep(0.01)
    op.drain()
    assert out.elements == [r("A", 1)]
    op.process_element(r("b", 2))
    op.process_watermark(Watermark(4))
    op.process_element(r("c", 5))
    fn.release("c")  # completed but (held behind b / the watermark) not emitted: still in the snapshot
    wait_until(lambda: "c" in fn.finished)
    time.sleep(0.01)
    op.drain()
    snapshot = op.snapshot_state(checkpoint_id=7).materialize()
    stored = MaterializedOperatorSnapshot.from_parts(snapshot.metadata_json(), {})
    op.close()

    fresh_fn = GatedLookup(auto_release=True)
    restored, restored_out = opened(fresh_fn, ordered=ordered)
    restored.initialize_state([stored])
    restored.wait_for_completion(timeout_s=5)
    assert sorted(fresh_fn.invoked) == ["b", "c"]  # a was emitted before the barrier: not re-invoked
    assert restored_out.elements == [r("B", 2), Watermark(4), r("C", 5)]
