"""Choosing the barrier handler for a task's input gate (seed 003, ``InputProcessorUtils#createCheckpointBarrierHandler``).

- AT_LEAST_ONCE                   -> :class:`CheckpointBarrierTracker` (unaligned is refused)
- EXACTLY_ONCE                    -> :class:`CheckpointBarrierAligner`
- EXACTLY_ONCE + unaligned        -> :class:`AlternatingCheckpointBarrierHandler`
"""

from __future__ import annotations

from typing import Any, Hashable, Sequence

from engine.checkpointing.barrier_handler import CheckpointableTask, CheckpointBarrierHandler
from engine.checkpointing.barrier_tracker import CheckpointBarrierTracker
from engine.checkpointing.channel_state import ChannelStateWriter, InMemoryChannelStateWriter
from engine.checkpointing.config import CheckpointConfig, CheckpointingMode
from engine.checkpointing.scheduler import Scheduler
from engine.checkpointing.single_checkpoint_barrier_handler import (
    AlternatingCheckpointBarrierHandler,
    CheckpointBarrierAligner,
    SingleCheckpointBarrierHandler,
)
from engine.errors import JobDefinitionError

__all__ = [
    "AlternatingCheckpointBarrierHandler",
    "CheckpointBarrierAligner",
    "CheckpointBarrierHandler",
    "CheckpointBarrierTracker",
    "CheckpointableTask",
    "SingleCheckpointBarrierHandler",
    "create_checkpoint_barrier_handler",
]


def create_checkpoint_barrier_handler(
    config: CheckpointConfig,
    channels: Sequence[Hashable],
    task: CheckpointableTask,
    clock: Any,
    channel_state_writer: ChannelStateWriter | None = None,
    scheduler: Scheduler | None = None,
) -> CheckpointBarrierHandler:
    """The handler seed 003 selects for this configuration."""
    if config.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE:
        if config.is_unaligned_checkpoints_enabled():
            raise JobDefinitionError("unaligned_checkpoints", True,
                                     "cannot be used with CheckpointingMode.AT_LEAST_ONCE (seed 003)")
        return CheckpointBarrierTracker(channels, task, clock)
    if config.is_unaligned_checkpoints_enabled():
        return AlternatingCheckpointBarrierHandler(
            channels, task, clock, channel_state_writer or InMemoryChannelStateWriter(), scheduler)
    return CheckpointBarrierAligner(channels, task, clock)
