"""Subtasks of the local runtime: source tasks and stream tasks, each running a chain of operators.

A :class:`SourceTask` reads its assigned splits round-robin, one bundle at a
time, stamps records and generates watermarks per split, and pushes results
into its chain.  A :class:`StreamTask` consumes an input gate: buffers go to
the chain head's ``process_batch``; watermarks and statuses go through the
StatusWatermarkValve (seed 004) when the gate has more than one channel;
barriers and cancel markers go to the barrier handler (seed 003) once
checkpointing is enabled; end-of-partition finishes a channel.
"""

from __future__ import annotations

from typing import Any, Callable

from engine.elements import (
    CancelCheckpointMarker,
    CheckpointBarrier,
    EndOfPartition,
    StreamRecord,
    Watermark,
    WatermarkStatus,
    WatermarkStatusElement,
    END_OF_PARTITION,
)
from engine.runtime.local.channels import InputGate
from engine.runtime.local.writers import FanOutOutput, RecordWriter
from engine.watermarks.valve import StatusWatermarkValve, ValveOutput


class Subtask:
    """What the scheduler sees of a task."""

    name: str
    finished: bool = False
    #: ``v<vertex>.<subtask>``: the id the checkpoint coordinator knows the task by
    task_id: str = ""
    is_source_task: bool = False
    #: a source stopped by a synchronous savepoint (stop-with-savepoint) reads no more
    suspended: bool = False
    #: the task's SubtaskCheckpointCoordinator when checkpointing is enabled
    checkpointing: Any = None
    #: raises JobMasterFenced when the job master lost the job's lease (set by the job when it holds one)
    fence_check: Any = None
    operators: list[Any]
    #: the plan vertex this task runs one subtask of (set by the runtime)
    vertex: Any = None
    outputs: list[FanOutOutput]

    def writers(self) -> list[RecordWriter]:
        return [w for out in self.outputs for w in out.all_writers()]

    def is_backpressured(self) -> bool:
        return any(w.is_backpressured() for w in self.writers())

    def flush(self) -> None:
        for w in self.writers():
            w.flush()

    def broadcast(self, element: Any) -> None:
        """Send a non-record element (barrier, cancel marker, end of partition) on every network output."""
        for w in self.writers():
            w.broadcast(element)

    def advance_processing_time(self, now_ms: int) -> None:
        for op in self.operators:
            op.advance_processing_time(now_ms)

    def finish_chain(self) -> None:
        if self.fence_check is not None:  # finishing flushes windows into sinks that commit at end of input
            self.fence_check(f"finish task {self.name} (end of input commits its sinks)")
        for op in self.operators:
            op.finish()
        self.flush()
        self.broadcast(END_OF_PARTITION)
        self.finished = True

    def close(self) -> None:
        for op in self.operators:
            op.close()


class _HeadValveOutput(ValveOutput):
    def __init__(self, head: Any) -> None:
        self.head = head

    def emit_watermark(self, watermark: Watermark) -> None:
        self.head.process_watermark(watermark)

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        self.head.process_watermark_status(status)


class StreamTask(Subtask):
    def __init__(self, name: str, gate: InputGate, head: Any, operators: list[Any], outputs: list[FanOutOutput]) -> None:
        self.name = name
        self.gate = gate
        self.head = head
        self.operators = operators
        self.outputs = outputs
        self.valve = StatusWatermarkValve(len(gate.channels), _HeadValveOutput(head))
        #: set by the runtime when checkpointing is enabled: handles barriers and cancel markers
        self.barrier_handler: Any = None
        self.finished = False
        self.records_in = 0

    def runnable(self) -> bool:
        return not self.finished and (self.gate.has_available() or self._ready_to_finish()) and not self.is_backpressured()

    def _ready_to_finish(self) -> bool:
        return self.gate.all_finished() and not self.gate.buffered()

    def step(self, budget: int) -> int:
        processed = 0
        gate, head = self.gate, self.head
        while processed < budget:
            polled = gate.poll()
            if polled is None:
                break
            channel, element = polled
            handler = self.barrier_handler
            if handler is not None and not isinstance(element, (CheckpointBarrier, CancelCheckpointMarker, EndOfPartition)):
                handler.process_element(element, channel)  # unaligned: in-flight data joins the channel state
            if type(element) is list:
                self.records_in += len(element)
                head.process_batch(element)
                processed += len(element)
            elif isinstance(element, Watermark):
                self.valve.input_watermark(element, channel)
                processed += 1
            elif isinstance(element, WatermarkStatusElement):
                self.valve.input_watermark_status(element.status, channel)
            elif isinstance(element, CheckpointBarrier):
                self._on_barrier(element, channel)
            elif isinstance(element, CancelCheckpointMarker):
                self._on_cancel(element, channel)
            elif isinstance(element, EndOfPartition):
                gate.channels[channel].finished = True
                if self.barrier_handler is not None:
                    self.barrier_handler.process_end_of_partition(channel)
            else:
                head.process_element(element)
                processed += 1
            if self.is_backpressured():
                break
        self.flush()
        if self._ready_to_finish() and not self.finished:
            self.finish_chain()
        return processed

    def _on_barrier(self, barrier: CheckpointBarrier, channel: int) -> None:
        if self.barrier_handler is None:
            return  # checkpointing disabled: barriers cannot appear
        self.barrier_handler.process_barrier(barrier, channel)

    def _on_cancel(self, marker: CancelCheckpointMarker, channel: int) -> None:
        if self.barrier_handler is not None:
            self.barrier_handler.process_cancellation_barrier(marker, channel)


class SplitState:
    """A split being read by a source task: its reader and the offset Sn a barrier would record."""

    def __init__(self, split: Any, reader: Any) -> None:
        self.split = split
        self.reader = reader
        self.finished = False

    @property
    def split_id(self) -> str:
        return self.split.split_id

    def offset(self) -> Any:
        return self.reader.current_offset()


class SourceTask(Subtask):
    """Reads splits and feeds the chain; ``stage`` (a SourceTimestampsAndWatermarks) stamps records and
    generates watermarks per split (ARCHITECTURE section 4)."""

    def __init__(self, name: str, splits: list[SplitState], stage: Any, head_output: FanOutOutput,
                 operators: list[Any], outputs: list[FanOutOutput], bundle_size: int,
                 dead_letter: Callable[[Any, BaseException, str], None], bounded: bool) -> None:
        self.name = name
        self.splits = splits
        self.stage = stage
        self.head_output = head_output
        self.operators = operators
        self.outputs = outputs
        self.bundle_size = bundle_size
        self.dead_letter = dead_letter
        self.bounded = bounded
        self._next_split = 0
        self.finished = False
        self.records_read = 0
        self.is_source_task = True
        #: (checkpoint id, timestamp, options) the coordinator asked to inject, in order
        self.pending_triggers: list[Any] = []
        #: set by the runtime: called before each read, may inject a barrier (checkpoint trigger)
        self.before_read: Callable[[SourceTask], None] | None = None
        #: epoch mode (runtime option ``epoch_records``): each split reads exactly this many offsets per
        #: epoch, watermarks are emitted only at the epoch's end, and the task then parks until the runtime
        #: starts the next epoch once the whole pipeline is quiescent -- the Spark runtime's cadence, where
        #: every record of epoch n is processed under the watermark of the end of epoch n-1.  A subtask's
        #: watermarks, statuses and end of input of epoch n are held (``holding``) until every source subtask
        #: parked and everything downstream ran (``release_epoch``, called by the runtime): otherwise one
        #: subtask's epoch-end watermark, or a split's end, would reach a shared consumer while another subtask's
        #: records of the same epoch are still on their way, where Spark judges them all under W(n-1)
        #: the last step found nothing to read (an unbounded source waiting for data)
        self.starved = False
        self.epoch_records: int | None = None
        self.epoch = 0
        self.parked = False
        self._epoch_end: dict[str, int] = {}
        self._held: list[Any] = []
        self._end_pending = False
        #: set by the runtime for a continuously monitored source: returns the splits that appeared since the
        #: last call (already readers, positioned), called at most every ``monitor_interval_ms`` of ``clock``
        self.discover: Callable[[], list[SplitState]] | None = None
        self.monitor_interval_ms = 0
        self.clock: Any = None
        self._next_discovery_ms: int | None = None

    def runnable(self) -> bool:
        if self.finished or self.is_backpressured():
            return False
        if self.suspended or self.parked:
            return bool(self.pending_triggers)
        return True

    def holding(self) -> bool:
        """Epoch mode: the epoch's watermarks (or its end of input) wait for :meth:`release_epoch`."""
        return bool(self._held) or self._end_pending

    def release_epoch(self) -> None:
        """Every source subtask parked and nothing is left downstream: send the held watermarks and statuses, then
        end the input if every split has finished (the next epoch starts once these are processed)."""
        held, self._held = self._held, []
        self._emit(held)
        self.flush()
        if self._end_pending:
            self._end_pending = False
            self._end_of_input()

    def start_epoch(self) -> None:
        """Begin the next epoch: every unfinished split may read ``epoch_records`` more offsets."""
        assert self.epoch_records is not None and not self.holding()
        self.epoch += 1
        self.parked = False
        self._epoch_end = {s.split_id: int(s.offset()) + self.epoch_records for s in self.active_splits()}

    def _epoch_splits(self, active: list[SplitState]) -> list[SplitState]:
        return [s for s in active if int(s.offset()) < self._epoch_end.get(s.split_id, 0)]

    def _end_epoch(self) -> None:
        """All splits reached their epoch end: the epoch's watermarks are held for :meth:`release_epoch`; park."""
        self._emit(self.stage.on_periodic_emit(), hold=True)
        self.flush()
        self.parked = True

    def _end_input_at_epoch_end(self) -> None:
        """Every split finished: end the input now, or in epoch mode once the epoch is released."""
        if self.epoch_records is None:
            self._end_of_input()
        else:
            self._emit(self.stage.on_periodic_emit(), hold=True)
            self.flush()
            self._end_pending = True
            self.parked = True

    def active_splits(self) -> list[SplitState]:
        return [s for s in self.splits if not s.finished]

    def step(self, budget: int) -> int:
        self.starved = False
        # in epoch mode barriers go in only at epoch ends: the epoch boundary is the barrier, as on Spark
        if self.before_read is not None and (self.epoch_records is None or (self.parked and not self.holding())):
            self.before_read(self)
        if self.suspended or self.parked:
            return 0
        listed = self.discover is not None and self._discover_splits()
        active = self.active_splits()
        if not active:
            if self.bounded:
                self._end_input_at_epoch_end()
            else:
                self.starved = True  # a monitored folder with nothing new: let the runtime back off
                if self.epoch_records is None:
                    # time passes without splits: the strategy's idleness may mark the subtask idle
                    self._emit(self.stage.on_periodic_emit())
                    self.flush()
                elif listed:
                    # nothing to read after a listing: the epoch ends here, so the other subtasks' epochs (and
                    # barriers) go on; at most one empty epoch per listing, as a Spark job waits for the next
                    self._end_epoch()
            return 0
        epoch_mode = self.epoch_records is not None
        if epoch_mode:
            active = self._epoch_splits(active)
            if not active:
                self._end_epoch()
                return 0
        split = active[self._next_split % len(active)]
        self._next_split += 1
        limit = min(budget, self.bundle_size)
        if epoch_mode:
            limit = min(limit, self._epoch_end[split.split_id] - int(split.offset()))
        before = split.offset()
        batch = split.reader.read(limit)
        # an unbounded split with nothing to read now (a live feed between records): no progress, so the runtime
        # may back off instead of polling it in a busy loop
        self.starved = not batch.values and not batch.dead_letters and not batch.finished \
            and split.offset() == before
        for dl in batch.dead_letters:
            self.dead_letter(dl.raw, ValueError(dl.error), f"source:{split.split_id}@{dl.offset}")
        stage, split_id = self.stage, split.split_id
        elements: list[Any] = stage.on_records(split_id, batch.values)
        self.records_read += len(batch.values)
        if batch.finished:
            split.finished = True
            if split_id in stage.split_ids:  # a restored split that had finished before the snapshot is not
                # a monitored folder's split leaves at the next periodic emission, its progress counted
                # (SourceTimestampsAndWatermarks(monitored=True)): below, or at the epoch's end in epoch mode
                elements.extend(stage.on_split_finished(split_id))
            if self.discover is not None:
                split.reader.close()  # a monitored folder grows without end: keep the offset, not the rows
        if not epoch_mode:
            elements.extend(stage.on_periodic_emit())
        self._emit(elements, hold=epoch_mode)
        self.flush()
        if self.bounded and not self.active_splits():
            self._end_input_at_epoch_end()
        elif epoch_mode and not self._epoch_splits(self.active_splits()):
            self._end_epoch()
        return len(batch.values)

    def _discover_splits(self) -> bool:
        """List the monitored folder again when its interval has passed (True when it did); new splits start
        their watermark generation at once (a new split holds the subtask's watermark back until it has read,
        as in Flink)."""
        now = self.clock.now_ms()
        if self._next_discovery_ms is not None and now < self._next_discovery_ms:
            return False
        self._next_discovery_ms = now + self.monitor_interval_ms
        assert self.discover is not None
        for split in self.discover():
            self.splits.append(split)
            if split.split_id not in self.stage.split_ids:
                self.stage.add_split(split.split_id)
            if self.epoch_records is not None and not self.parked:
                self._epoch_end[split.split_id] = int(split.offset()) + self.epoch_records
        return True

    def _emit(self, elements: list[Any], hold: bool = False) -> None:
        """Push stage output into the chain in order: consecutive records as one batch; with ``hold``, records
        only, the watermarks and statuses kept for :meth:`release_epoch`."""
        if hold:
            self._held.extend(e for e in elements if type(e) is not StreamRecord)
            elements = [e for e in elements if type(e) is StreamRecord]
        out = self.head_output
        pending: list[StreamRecord] = []
        record_type = StreamRecord
        for e in elements:
            if type(e) is record_type:
                pending.append(e)
                continue
            if pending:
                out.collect_batch(pending)
                pending = []
            if isinstance(e, Watermark):
                out.emit_watermark(e)
            elif isinstance(e, WatermarkStatusElement):
                out.emit_watermark_status(e.status)
        if pending:
            out.collect_batch(pending)

    def _end_of_input(self) -> None:
        """Bounded input is exhausted: MAX_WATERMARK (seed 004), then finish the chain and end the partitions."""
        if self.finished:
            return
        self._emit(self.stage.end_of_input())
        self.finish_chain()
