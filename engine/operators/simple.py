"""Stateless one-input operators: map, filter, flat_map, side-output selection and sink writers.

They process whole buffers (``process_batch``) with one Python-level loop and hand
the results on as one buffer (``Output.collect_batch``); a
user function's exception fails the task (Flink semantics: it is a bug, not
bad data), to be recovered from the last checkpoint.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from engine.elements import StreamRecord
from engine.operators.base import MaterializedOperatorSnapshot, OneInputStreamOperator, OperatorSnapshot, materialize_all
from engine.state.key_groups import KeyGroupRange


class MapOperator(OneInputStreamOperator):
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self._fn = fn

    def process_element(self, record: StreamRecord) -> None:
        self.output.collect(StreamRecord(self._fn(record.value), record.timestamp))

    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        fn = self._fn
        self.output.collect_batch([StreamRecord(fn(r.value), r.timestamp) for r in records])


class FilterOperator(OneInputStreamOperator):
    def __init__(self, fn: Callable[[Any], bool]) -> None:
        self._fn = fn

    def process_element(self, record: StreamRecord) -> None:
        if self._fn(record.value):
            self.output.collect(record)

    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        fn = self._fn
        kept = [r for r in records if fn(r.value)]
        if kept:
            self.output.collect_batch(kept)


class FlatMapOperator(OneInputStreamOperator):
    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self._fn = fn

    def process_element(self, record: StreamRecord) -> None:
        result = self._fn(record.value)
        if result is None:
            return
        for v in result:
            self.output.collect(StreamRecord(v, record.timestamp))

    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        fn = self._fn
        out: list[StreamRecord] = []
        append = out.append
        for r in records:
            result = fn(r.value)
            if result is None:
                continue
            timestamp = r.timestamp
            for v in result:
                append(StreamRecord(v, timestamp))
        if out:
            self.output.collect_batch(out)


class _SinkSnapshot(OperatorSnapshot):
    def __init__(self, metadata: dict[str, Any]) -> None:
        self._metadata = metadata

    def materialize(self) -> MaterializedOperatorSnapshot:
        return MaterializedOperatorSnapshot(dict(self._metadata), {})


class SinkOperator(OneInputStreamOperator):
    """Hands records to a sink writer; checkpoint hooks drive a two-phase-commit driver (seed 001 "notify").

    With a :class:`~engine.io.two_phase_commit.TwoPhaseCommitDriver`: ``snapshot_state(n)``
    pre-commits the open transaction and records every pending handle in the
    snapshot metadata (``sink_state``, JSON); ``notify_checkpoint_complete(n)`` commits;
    ``initialize_state`` commits what the restored checkpoint left pending (rescaling:
    the handles of several former subtasks).  ``finish()`` commits the rest at end of
    input only when checkpointing is off (``commit_on_finish``); with checkpointing,
    the runtime's final checkpoint commits it, so a crash while finishing never
    publishes output twice.
    """

    def __init__(self, writer: Any, commit_on_finish: bool = True) -> None:
        self._writer = writer
        self._two_phase = hasattr(writer, "snapshot_state") and hasattr(writer, "notify_checkpoint_complete")
        self._commit_on_finish = commit_on_finish
        self.records_written = 0

    @property
    def is_two_phase_commit(self) -> bool:
        return self._two_phase

    def process_element(self, record: StreamRecord) -> None:
        self._writer.write([record.value])
        self.records_written += 1

    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        self._writer.write([r.value for r in records])
        self.records_written += len(records)

    def process_watermark(self, watermark: Any) -> None:
        pass  # sinks end the chain

    def process_watermark_status(self, status: Any) -> None:
        pass

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot:
        metadata = self._snapshot_metadata(checkpoint_id)
        if self._two_phase:
            metadata["sink_state"] = self._writer.snapshot_state(checkpoint_id)
        return _SinkSnapshot(metadata)

    def initialize_state(self, snapshots: Iterable[Any], key_group_range: KeyGroupRange | None = None) -> None:
        if not self._two_phase:
            return
        pending: list[Any] = []
        version = None
        for snap in materialize_all(snapshots):
            state = snap.metadata.get("sink_state")
            if state is not None:
                version = state.get("format_version")
                pending.extend(state["pending"])
        if version is not None:
            self._writer.initialize_state({"format_version": version, "pending": pending})

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        if self._two_phase:
            self._writer.notify_checkpoint_complete(checkpoint_id)

    def finish(self) -> None:
        if self._two_phase and self._commit_on_finish:
            self._writer.finish(0)

    def close(self) -> None:
        if self._two_phase:
            self._writer.abort_current()  # a failed or cancelled attempt: drop the open transaction
        elif hasattr(self._writer, "close"):
            self._writer.close()


class CollectOperator(OneInputStreamOperator):
    """Appends values to a list (execute_and_collect on bounded input)."""

    def __init__(self, target: list[Any]) -> None:
        self._target = target
        self.records_written = 0

    def process_element(self, record: StreamRecord) -> None:
        self._target.append(record.value)
        self.records_written += 1

    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        self._target.extend([r.value for r in records])
        self.records_written += len(records)

    def process_watermark(self, watermark: Any) -> None:
        pass

    def process_watermark_status(self, status: Any) -> None:
        pass
