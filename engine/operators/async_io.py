"""Async I/O: enrich a stream with asyncio calls without losing order or watermarks (seed 004).

Seed 004 on Flink's ``AsyncWaitOperator``: a watermark is put into the async
queue as an element that is already complete (``WatermarkQueueEntry``), so

* **ordered** (``OrderedStreamElementQueue``): results leave in input order and
  a watermark leaves when its turn comes -- only the head of the queue is ever
  emitted;
* **unordered** (``UnorderedStreamElementQueue``): results leave as they
  complete, but a watermark closes a *segment*: it goes into a segment of its
  own (capacity 1) followed by a fresh segment for later records, and only the
  first segment emits.  No result crosses a watermark in either direction.

The queue is bounded by ``capacity``: ``process_element`` waits until there is
room, which is the operator's backpressure.

Two layers:

* the queues and their entries (:mod:`engine.operators.async_queue`) -- pure,
  single-threaded, unit-tested with entries completed by hand (``try_put`` /
  ``has_completed_elements`` / ``emit_completed_element`` / ``values``);
* :class:`AsyncWaitOperator` here, the plumbing: it owns an asyncio event loop in a
  dedicated daemon thread where ``AsyncFunction.async_invoke`` runs.  Completions
  travel back through a thread-safe *mailbox* and are applied to the queue only
  on the caller's (task) thread, as in Flink's mailbox model, so the queue and
  the :class:`~engine.operators.base.Output` are never touched by two threads.

Timeouts: every invocation is bounded by ``timeout_ms`` (asyncio's loop clock:
this is real I/O).  On timeout ``AsyncFunction.timeout(value)`` is called;
its result is emitted like a normal result, and the default raises
``TimeoutError``, which fails the operator.  Any exception from
``async_invoke`` fails the operator: the exception is raised from the next
operator call on the task thread and the runtime restarts from a checkpoint.

Checkpoints (Flink's ``AsyncWaitOperator.snapshotState``): the inputs not yet
emitted -- records and watermarks, in order -- are stored as JSON via
:mod:`engine.state.codec`; on restore the records are invoked again and the
watermarks re-enqueued, so nothing is lost and a watermark is still not
overtaken.  Results already emitted before the barrier are not re-invoked.

Not supported: retry strategies (Flink's ``AsyncRetryStrategy``) and
watermark statuses inside the queue (they are forwarded at once, like Flink).
"""

from __future__ import annotations

import asyncio
import inspect
import queue as _queue
import threading
from abc import abstractmethod
from typing import Any, Awaitable, Callable, Iterable

from engine.api.functions import Function
from engine.elements import StreamElement, StreamRecord, Watermark
from engine.errors import IllegalStateError, JobDefinitionError
from engine.operators.async_queue import (
    ASYNC_STATE_FORMAT_VERSION,
    OrderedStreamElementQueue,
    SegmentedStreamRecordQueueEntry,
    StreamElementQueue,
    StreamElementQueueEntry,
    StreamRecordQueueEntry,
    UnorderedStreamElementQueue,
    WatermarkQueueEntry,
    decode_in_flight,
    encode_in_flight,
)
from engine.operators.base import (
    MaterializedOperatorSnapshot,
    OneInputStreamOperator,
    OperatorSnapshot,
    Output,
    materialize_all,
)

__all__ = [
    "ASYNC_STATE_FORMAT_VERSION",
    "ASYNC_STATE_KEY",
    "AsyncFunction",
    "AsyncWaitOperator",
    "OrderedStreamElementQueue",
    "SegmentedStreamRecordQueueEntry",
    "StreamElementQueue",
    "StreamElementQueueEntry",
    "StreamRecordQueueEntry",
    "UnorderedStreamElementQueue",
    "WatermarkQueueEntry",
    "decode_in_flight",
    "encode_in_flight",
]

#: key of the in-flight elements in the operator snapshot's metadata
ASYNC_STATE_KEY = "async_io"


# ---------------------------------------------------------------------------------------------------
# user function
# ---------------------------------------------------------------------------------------------------


class AsyncFunction(Function):
    """An enrichment call (PyFlink's ``AsyncFunction``, Java's ``asyncInvoke`` + ``timeout``).

    ``async_invoke`` returns the results for one input (a list or other
    iterable; ``[]`` for none).  A str, bytes, dict or None is refused, since
    iterating them is almost never what was meant: wrap a single result as
    ``[result]``.
    """

    @abstractmethod
    async def async_invoke(self, value: Any) -> Iterable[Any]: ...

    def timeout(self, value: Any) -> Iterable[Any] | Awaitable[Iterable[Any]]:
        """Called when ``async_invoke(value)`` exceeded the timeout; the default fails the operator.

        Override to return fallback results (or ``[]`` to drop the input).
        May be a plain or an async method.
        """
        raise TimeoutError(f"async_invoke({value!r}) did not complete within the operator's timeout")


class _CoroutineFunction(AsyncFunction):
    """Adapts a plain ``async def f(value)``."""

    def __init__(self, fn: Callable[[Any], Awaitable[Iterable[Any]]]) -> None:
        self._fn = fn

    async def async_invoke(self, value: Any) -> Iterable[Any]:
        return await self._fn(value)


def _check_results(results: Any) -> list[Any]:
    if results is None or isinstance(results, (str, bytes, bytearray, dict)):
        raise TypeError(
            f"AsyncFunction results must be a list or other iterable of results, got {type(results).__name__} "
            f"{results!r:.80}; return [result] for a single result or [] for none"
        )
    try:
        return list(results)
    except TypeError as exc:
        raise TypeError(f"AsyncFunction results must be iterable, got {type(results).__name__}") from exc


# ---------------------------------------------------------------------------------------------------
# the operator (plumbing: owns an event loop thread)
# ---------------------------------------------------------------------------------------------------


class _AsyncSnapshot(OperatorSnapshot):
    def __init__(self, metadata: dict[str, Any]) -> None:
        self._metadata = metadata

    def materialize(self) -> MaterializedOperatorSnapshot:
        return MaterializedOperatorSnapshot(dict(self._metadata), {})


class AsyncWaitOperator(OneInputStreamOperator):
    """Runs ``fn.async_invoke`` for each record on an owned asyncio loop; emits per ``ordered`` (seed 004).

    Task-thread methods (one thread at a time, as the runtime guarantees):
    ``process_element``, ``process_watermark``, ``drain``, ``wait_for_completion``,
    ``advance_processing_time`` (drains), ``snapshot``/``snapshot_state``,
    ``restore``/``initialize_state``, ``finish`` (waits for everything), ``close``.
    """

    def __init__(
        self,
        fn: AsyncFunction | Callable[[Any], Awaitable[Iterable[Any]]],
        timeout_ms: int,
        capacity: int = 100,
        ordered: bool = True,
    ) -> None:
        if isinstance(fn, AsyncFunction):
            self._fn = fn
        elif inspect.iscoroutinefunction(fn):
            self._fn = _CoroutineFunction(fn)
        else:
            raise JobDefinitionError(
                "fn", fn, "must be an AsyncFunction or an `async def f(value)` returning a list of results"
            )
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms <= 0:
            raise JobDefinitionError("timeout_ms", timeout_ms, "must be an int of ms greater than 0")
        self.timeout_ms = timeout_ms
        self.ordered = bool(ordered)
        self._queue: StreamElementQueue = (
            OrderedStreamElementQueue(capacity) if self.ordered else UnorderedStreamElementQueue(capacity)
        )
        self._mailbox: _queue.SimpleQueue[tuple[StreamRecordQueueEntry, list[Any] | None, BaseException | None]] = (
            _queue.SimpleQueue()
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    # ---- lifecycle ------------------------------------------------------------------------------------

    def open(self, context: Any, output: Output) -> None:
        super().open(context, output)
        self._fn.open(context)
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        name = f"async-io-{getattr(context, 'operator_id', 'operator')}"
        self._thread = threading.Thread(target=run, name=name, daemon=True)
        self._loop = loop
        self._thread.start()
        ready.wait()

    def finish(self) -> None:
        """End of input: wait until every in-flight element has been emitted (Flink's endInput)."""
        self.wait_for_completion()

    def close(self) -> None:
        """Cancel what is still running and stop the loop thread (always safe to call)."""
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None:
            return

        async def cancel_everything() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(cancel_everything(), loop).result(timeout=5)
        except Exception:  # noqa: BLE001 - best effort: the thread is stopped below regardless
            pass
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=5)
        if not loop.is_running():
            loop.close()
        self._fn.close()

    # ---- elements -------------------------------------------------------------------------------------

    def process_element(self, record: StreamRecord) -> None:
        entry = self._add_to_work_queue(record)
        assert isinstance(entry, StreamRecordQueueEntry)
        self._invoke(entry)
        self.drain()

    def process_watermark(self, watermark: Watermark) -> None:
        self._add_to_work_queue(watermark)
        # a watermark is complete at once: emit it now if nothing is ahead of it
        self.drain()

    def drain(self) -> int:
        """Apply finished invocations and emit everything the ordering allows; never blocks. Returns #emitted entries."""
        self._raise_if_failed()
        while True:
            try:
                message = self._mailbox.get_nowait()
            except _queue.Empty:
                break
            self._apply(message)
        return self._emit_completed()

    def advance_processing_time(self, now_ms: int) -> None:
        """The runtime's periodic tick: emit results that completed since the last call."""
        self.drain()

    def wait_for_completion(self, timeout_s: float | None = None) -> None:
        """Block until the queue is empty (all results and watermarks emitted)."""
        self.drain()
        while not self._queue.is_empty():
            self._wait_for_mailbox(timeout_s)
            self.drain()

    @property
    def num_in_flight(self) -> int:
        return self._queue.size()

    # ---- checkpoints -----------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """The not-yet-emitted inputs, in order, as JSON data (Flink snapshots ``queue.values()``)."""
        return encode_in_flight(self._queue.values())

    def restore(self, state: dict[str, Any]) -> None:
        """Re-invoke the records and re-enqueue the watermarks of a snapshot, in order (after :meth:`open`)."""
        for element in decode_in_flight(state):
            if isinstance(element, StreamRecord):
                self.process_element(element)
            else:
                self.process_watermark(element)

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot:
        metadata = self._snapshot_metadata(checkpoint_id)
        metadata[ASYNC_STATE_KEY] = self.snapshot()
        return _AsyncSnapshot(metadata)

    def initialize_state(self, snapshots: Iterable[Any], key_group_range: Any = None) -> None:
        for snap in materialize_all(snapshots):
            state = snap.metadata.get(ASYNC_STATE_KEY)
            if state is not None:
                self.restore(state)

    # ---- internals ----------------------------------------------------------------------------------------

    def _add_to_work_queue(self, element: StreamElement) -> StreamElementQueueEntry:
        self._raise_if_failed()
        if self._loop is None:
            raise IllegalStateError("AsyncWaitOperator used before open() or after close()")
        while (entry := self._queue.try_put(element)) is None:
            # backpressure: wait until an invocation finishes and the ordering lets something leave
            self._wait_for_mailbox(None)
            self.drain()
        return entry

    def _invoke(self, entry: StreamRecordQueueEntry) -> None:
        assert self._loop is not None
        value = entry.input_element.value  # type: ignore[attr-defined]
        asyncio.run_coroutine_threadsafe(self._run_invocation(entry, value), self._loop)

    async def _run_invocation(self, entry: StreamRecordQueueEntry, value: Any) -> None:
        """Loop thread: never touches the queue, only posts (entry, results, error) to the mailbox."""
        try:
            try:
                results = await asyncio.wait_for(self._fn.async_invoke(value), self.timeout_ms / 1000)
            except asyncio.TimeoutError:
                results = self._fn.timeout(value)
                if inspect.isawaitable(results):
                    results = await results
            self._mailbox.put((entry, _check_results(results), None))
        except asyncio.CancelledError:
            raise
        except BaseException as error:  # noqa: BLE001 - delivered to the task thread, which fails the operator
            self._mailbox.put((entry, None, error))

    def _apply(self, message: tuple[StreamRecordQueueEntry, list[Any] | None, BaseException | None]) -> None:
        entry, results, error = message
        if error is not None:
            if self._failure is None:
                self._failure = error
            self._raise_if_failed()
        entry.complete(results or [])

    def _emit_completed(self) -> int:
        emitted = 0
        while self._queue.has_completed_elements():
            self._queue.emit_completed_element(self.output)
            emitted += 1
        return emitted

    def _wait_for_mailbox(self, timeout_s: float | None) -> None:
        """Block until one completion arrives and apply it (Flink's mailboxExecutor.yield())."""
        waited = 0.0
        while True:
            try:
                message = self._mailbox.get(timeout=0.5)
                break
            except _queue.Empty:
                waited += 0.5
                if self._thread is None or not self._thread.is_alive():
                    raise IllegalStateError("the async I/O event loop stopped while elements were in flight") from None
                if timeout_s is not None and waited >= timeout_s:
                    raise TimeoutError(f"async I/O queue did not drain within {timeout_s} s") from None
        self._apply(message)

    def _raise_if_failed(self) -> None:
        if self._failure is not None:
            raise self._failure
