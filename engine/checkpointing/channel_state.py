"""In-flight input data of an unaligned checkpoint (Flink's ChannelStateWriter, seed 003 "Unaligned Barrier").

With unaligned checkpoints the first barrier n triggers the snapshot at once and
overtakes the data still queued in the other channels.  That data belongs to
checkpoint n (it precedes barrier n in its channel) but is not in the operator
snapshot, so the barrier handler hands each such element to a
:class:`ChannelStateWriter` as the task consumes it, until barrier n (or the end
of the partition) arrives on that channel.  On restore the runtime replays each
channel's persisted elements before any new data from it.

Partial: channel state is kept per input channel; restoring it into a job whose
parallelism changed (channels re-mapped) is left to the runtime.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Hashable, Mapping

from engine.checkpointing.failure_reason import CheckpointFailureReason, checkpoint_exception
from engine.checkpointing.promise import Promise
from engine.elements import CheckpointOptions, StreamElement
from engine.errors import IllegalStateError


@dataclass(frozen=True, slots=True)
class InputChannelState:
    """One task's persisted in-flight input of one checkpoint: per channel, the elements in arrival order."""

    checkpoint_id: int
    elements: Mapping[Hashable, tuple[StreamElement, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "elements", MappingProxyType({c: tuple(e) for c, e in self.elements.items()}))

    def elements_for(self, channel: Hashable) -> tuple[StreamElement, ...]:
        """What to replay on ``channel`` before its new data after a restore."""
        return self.elements.get(channel, ())

    def is_empty(self) -> bool:
        return not any(self.elements.values())


class ChannelStateWriter(ABC):
    """Receives in-flight input data from the barrier handler (called in the task thread)."""

    @abstractmethod
    def start(self, checkpoint_id: int, options: CheckpointOptions) -> None:
        """Checkpoint ``checkpoint_id`` starts unaligned: collect its in-flight data."""

    @abstractmethod
    def add_input_data(self, checkpoint_id: int, channel: Hashable, element: StreamElement) -> None:
        """``element`` arrived on ``channel`` before barrier n there, after the snapshot was taken."""

    @abstractmethod
    def finish_input(self, checkpoint_id: int) -> None:
        """Every channel delivered barrier n (or ended): the channel state of n is complete."""

    @abstractmethod
    def abort(self, checkpoint_id: int, reason: CheckpointFailureReason) -> None:
        """Checkpoint n was aborted: drop what was collected."""


class InMemoryChannelStateWriter(ChannelStateWriter):
    """Collects channel state in memory; :meth:`get_result` settles when :meth:`finish_input` is called."""

    def __init__(self) -> None:
        self._collecting: dict[int, dict[Hashable, list[StreamElement]]] = {}
        self._results: dict[int, Promise[InputChannelState]] = {}

    def start(self, checkpoint_id: int, options: CheckpointOptions) -> None:
        if checkpoint_id in self._results:
            raise IllegalStateError(f"Bug: channel state of checkpoint {checkpoint_id} started twice")
        self._collecting[checkpoint_id] = {}
        self._results[checkpoint_id] = Promise()

    def add_input_data(self, checkpoint_id: int, channel: Hashable, element: StreamElement) -> None:
        collecting = self._collecting.get(checkpoint_id)
        if collecting is None:
            raise IllegalStateError(f"Bug: in-flight data for checkpoint {checkpoint_id}, which is not collecting")
        collecting.setdefault(channel, []).append(element)

    def finish_input(self, checkpoint_id: int) -> None:
        collecting = self._collecting.pop(checkpoint_id, None)
        if collecting is not None:
            self._results[checkpoint_id].resolve(InputChannelState(checkpoint_id, collecting))

    def abort(self, checkpoint_id: int, reason: CheckpointFailureReason) -> None:
        if self._collecting.pop(checkpoint_id, None) is not None:
            self._results[checkpoint_id].reject(checkpoint_exception(reason, checkpoint_id))

    def get_result(self, checkpoint_id: int) -> Promise[InputChannelState]:
        """The channel state of ``checkpoint_id`` once complete (rejected if the checkpoint is aborted)."""
        if checkpoint_id not in self._results:
            raise IllegalStateError(f"Bug: no channel state was started for checkpoint {checkpoint_id}")
        return self._results[checkpoint_id]

    def release(self, checkpoint_id: int) -> None:
        """Forget a settled result (the task has handed it to the async writer)."""
        self._results.pop(checkpoint_id, None)

    def collecting_checkpoints(self) -> list[int]:
        return sorted(self._collecting)

    def peek(self, checkpoint_id: int) -> dict[Hashable, list[Any]]:
        """What has been collected so far (for tests and diagnostics)."""
        return {c: list(e) for c, e in self._collecting.get(checkpoint_id, {}).items()}
