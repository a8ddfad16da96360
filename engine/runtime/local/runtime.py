"""The local runtime: a pipelined mini-cluster in one process (ARCHITECTURE section 3).

Every vertex of the physical plan runs as ``parallelism`` subtasks; subtasks are
connected by channels carrying stream elements and are driven by a cooperative,
single-threaded scheduler.  Single-threaded is deliberate: the operator layer
knows nothing of threads, every interleaving is reproducible from the
scheduler's order, and the GIL would serialize threads anyway.  Backpressure is
real: a task whose output channels are full is not scheduled.

With checkpointing enabled (seeds 001-003) a :class:`LocalJob` attempt also runs
a CheckpointCoordinator on the same thread (timers on :class:`~engine.checkpointing.scheduler.ClockScheduler`),
source tasks inject barriers at their current split offsets, stream tasks feed
their input through the barrier handler the configuration selects, snapshots are
uploaded on a small thread pool and acknowledged through the :class:`Mailbox`.
A failed attempt is restarted by :class:`~engine.runtime.local.job_run.JobRun`
from the latest completed checkpoint.

Supported: sources with per-split watermarks, chains of map/filter/flat_map,
key_by repartitioning by key group, union, window operators (keyed and
window_all), KeyedStream.process and rolling keyed aggregates (engine/operators/keyed_process.py),
connect with co-functions and broadcast state (engine/operators/co_functions.py, broadcast_process.py),
side outputs, sinks (two-phase commit), execute_and_collect, dead letters, checkpoints, savepoints,
restarts, rescaling on restore.
Partial: processing-time timers fire as the injected clock advances between
scheduling rounds; at the end of bounded input pending processing-time timers
are not fired (Flink's behaviour).  Once any source task has finished no further
periodic checkpoint is triggered (seed 001 pre-check "all tasks running"); the
job's final checkpoint then commits the sinks.
"""

from __future__ import annotations

import copy
import functools
import gc
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

from engine.checkpointing.barrier_handlers import create_checkpoint_barrier_handler
from engine.checkpointing.channel_state import InMemoryChannelStateWriter
from engine.checkpointing.completed_checkpoint import CompletedCheckpoint
from engine.checkpointing.coordinator import CheckpointCoordinator
from engine.checkpointing.properties import CheckpointProperties
from engine.checkpointing.scheduler import ClockScheduler
from engine.checkpointing.subtask_checkpoint_coordinator import SubtaskCheckpointCoordinator
from engine.checkpointing.task_state import TaskSnapshot
from engine.elements import MIN_WATERMARK, CheckpointType
from engine.errors import IllegalStateError, JobDefinitionError
from engine.graph.operator_factory import build_operator
from engine.graph.plan import PhysicalPlan, Vertex
from engine.graph.transformations import (
    BroadcastProcessTransformation,
    KeyedProcessTransformation,
    MapTransformation,
    Partitioning,
    SinkTransformation,
    TimestampsAndWatermarksTransformation,
    Transformation,
)
from engine.io.sink import PrintSink
from engine.io.source import assigned_splits, source_monitor_interval_ms
from engine.operators.base import Metrics, OneInputStreamOperator, OperatorContext
from engine.operators.broadcast_process import BroadcastProcessOperator, KeyedBroadcastProcessOperator
from engine.operators.keyed_process import KeyedProcessOperator
from engine.operators.simple import CollectOperator, FilterOperator, FlatMapOperator, MapOperator, SinkOperator
from engine.operators.timestamps_watermarks import SourceTimestampsAndWatermarks
from engine.runtime.checkpoint_storage_adapter import RestorePoint, task_id_of
from engine.runtime.local.channels import Channel, InputGate
from engine.runtime.local.checkpointing import JsonStateOperator, LocalTaskGateway, Mailbox
from engine.runtime.local.faults import FaultKind
from engine.runtime.local.job_client import LocalJobClient
from engine.runtime.local.job_run import JobRun, JobStopped
from engine.runtime.local.tasks import SourceTask, SplitState, StreamTask, Subtask
from engine.runtime.local.writers import FanOutOutput, RecordWriter
from engine.runtime.operator_metrics import operator_entry, smallest_watermark, vertex_key
from engine.runtime.snapshot_metadata import saved_split_key, source_split_key
from engine.state import codec
from engine.state.key_groups import KeyGroupRange, key_group_range_for_operator
from engine.watermarks.strategy import WatermarkStrategy

DEFAULT_BUNDLE_SIZE = 1024
DEFAULT_CHANNEL_CAPACITY = 64


class _PassThrough(OneInputStreamOperator):
    """A timestamps/watermarks node whose work was folded into the source (per-split generation)."""

    def process_element(self, record: Any) -> None:
        self.output.collect(record)

    def process_batch(self, records: Any) -> None:
        collect = self.output.collect
        for r in records:
            collect(r)


class _CollectSinkNode(SinkTransformation):
    pass


#: an idle unbounded job polls its sources with a sleep doubling from MIN to MAX; new data, a due
#: processing-time timer or checkpoint waits at most MAX for the loop to notice it
_IDLE_SLEEP_MIN_S = 0.001
_IDLE_SLEEP_MAX_S = 0.02

_gc_lock = threading.Lock()
_gc_jobs = 0
_gc_saved_thresholds: tuple[int, int, int] | None = None
#: while a job runs: young collections every 50k allocations, full ones (which walk all keyed state,
#: timers and window contents) at most every 50 x 1000 young ones; nearly all garbage of a job is freed
#: by reference counting, and a full collection over millions of live state entries cost about as
#: much CPU as the job itself (bench/bench_local.py, sliding windows)
_JOB_GC_THRESHOLDS = (50_000, 50, 1000)


@contextmanager
def _infrequent_full_gc() -> Iterator[None]:
    """Raise the cyclic GC's thresholds while any local job runs in this process; restore them after the last."""
    global _gc_jobs, _gc_saved_thresholds
    with _gc_lock:
        if _gc_jobs == 0:
            _gc_saved_thresholds = gc.get_threshold()
            gc.set_threshold(*(max(a, b) for a, b in zip(_gc_saved_thresholds, _JOB_GC_THRESHOLDS)))
        _gc_jobs += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_jobs -= 1
            if _gc_jobs == 0 and _gc_saved_thresholds is not None:
                gc.set_threshold(*_gc_saved_thresholds)
                _gc_saved_thresholds = None


class LocalRuntime:
    def __init__(self, env: Any) -> None:
        self.env = env
        opts = env.get_runtime_options()
        self.bundle_size = int(opts.get("bundle_size", DEFAULT_BUNDLE_SIZE))
        self.channel_capacity = int(opts.get("channel_capacity", DEFAULT_CHANNEL_CAPACITY))
        if self.bundle_size < 1:
            raise JobDefinitionError("bundle_size", self.bundle_size, "must be >= 1")
        #: advance a ManualClock by this much per scheduling round (deterministic checkpoint intervals in tests)
        self.clock_step_ms = int(opts.get("clock_step_ms", 0))
        #: records a stream task processes per scheduling step (a small value makes consumers lag: in-flight data)
        self.task_budget = int(opts.get("task_budget", self.bundle_size * 4))
        epoch_records = opts.get("epoch_records")
        if epoch_records is not None and (isinstance(epoch_records, bool) or not isinstance(epoch_records, int)
                                          or epoch_records < 1):
            raise JobDefinitionError("epoch_records", epoch_records, "must be an int >= 1 (offsets per split per epoch)")
        #: epoch mode: the Spark runtime's watermark cadence on the local runtime (see SourceTask.epoch_records)
        self.epoch_records: int | None = epoch_records
        self.fault_plan = opts.get("fault_plan")
        #: finish each round's uploads before the next round, so the number of checkpoints per run does not
        #: depend on thread scheduling or storage speed (the asynchronous part still runs on the writer pool);
        #: on by default with simulated time (clock_step_ms), where runs are meant to be exact
        self.wait_for_uploads = bool(opts.get("wait_for_uploads", self.clock_step_ms > 0))
        self.from_savepoint = opts.get("from_savepoint")

    def _prepare(self, job_name: str, sinks: list[Transformation], collect: list[Transformation],
                 from_savepoint: str | None = None) -> Any:
        collected: dict[int, list[Any]] = {}
        roots: list[Transformation] = list(sinks)
        for node in collect:
            target: list[Any] = []
            collected[node.id] = target
            # non-parallel, as Flink's collect sink: a non-parallel stream (window_all) arrives in its order
            roots.append(_CollectSinkNode(name="Collect", inputs=[node], sink=target, parallelism=1))
        return JobRun(self, job_name, roots, collected, from_savepoint or self.from_savepoint, new_attempt=LocalJob)

    def execute(self, job_name: str, sinks: list[Transformation], collect: list[Transformation],
                from_savepoint: str | None = None) -> Any:
        """Run to the end in this thread (restarts included) and return the JobExecutionResult."""
        return self._prepare(job_name, sinks, collect, from_savepoint).run()

    def submit(self, job_name: str, sinks: list[Transformation], collect: list[Transformation] = (),  # type: ignore[assignment]
               from_savepoint: str | None = None) -> Any:
        """Start the job on its own scheduler thread and return its control handle (LocalJobClient)."""
        client = LocalJobClient(self._prepare(job_name, sinks, list(collect), from_savepoint))
        client.start()
        return client


def stable_uid(v: Vertex, position: int, node: Transformation) -> str:
    """The id an operator's state is stored under (assigned by build_plan; see Transformation.operator_uid)."""
    return node.operator_uid()


class LocalJob:
    """One execution attempt of a plan, optionally restoring from ``restore``."""

    def __init__(self, run: Any, plan: PhysicalPlan, restore: RestorePoint | None) -> None:
        self.run_ = run
        self.runtime = run.runtime
        self.env = run.env
        self.plan = plan
        self.job_name = run.job_name
        self.job_id = run.job_id
        self.clock = run.clock
        self.restore = restore
        self.dead_letters = run.dead_letters
        self.subtask_metrics: list[Metrics] = []
        self.tasks: list[Subtask] = []
        self.task_by_id: dict[str, Subtask] = {}
        self.failure: BaseException | None = None
        self.stop_requested: str | None = None  # "cancel" | "savepoint"
        self.checkpointing = run.checkpointing_enabled
        self.config = self.env.get_checkpoint_config()
        self.mailbox = Mailbox()
        self.outstanding_uploads = 0
        #: tasks whose end the coordinator was told of (engine/checkpointing/coordinator.py report_task_finished)
        self._reported_finished: set[str] = set()
        if self.checkpointing:
            self.scheduler = ClockScheduler(self.clock)
            self.gateway = LocalTaskGateway(self)
        self._build()
        if run.adapter.has_fence():
            for task in self.tasks:
                task.fence_check = run.adapter.check_fence
        if self.checkpointing:
            self.coordinator = CheckpointCoordinator(
                self.job_id, self.config, self.gateway, run.store, run.counter, run.adapter.discarder,
                self.clock, self.scheduler, self._fail)

    def _fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc

    # -- dead letters and metrics ----------------------------------------------------------------
    def dead_letter(self, value: Any, error: BaseException, stage: str) -> None:
        self.dead_letters.append({"value": value, "error": f"{type(error).__name__}: {error}", "stage": stage})

    def metrics(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for m in self.subtask_metrics:
            for k, v in list(m.counters.items()):  # a snapshot: the control API reads while the scheduler counts
                total[k] = total.get(k, 0) + v
        total["num_dead_letter_records"] = self.dead_letters.total  # the run's, also those no longer kept
        return total

    def records_read(self) -> int:
        return sum(t.records_read for t in self.tasks if isinstance(t, SourceTask))

    def split_watermarks(self) -> dict[str, dict[str, Any]]:
        """Each unfinished split's watermark and idleness, by split id (see JobStatusReport.splits)."""
        out: dict[str, dict[str, Any]] = {}
        for task in self.tasks:
            stage = getattr(task, "stage", None) if isinstance(task, SourceTask) else None
            if stage is not None and hasattr(stage, "split_watermarks"):
                for split_id, (watermark, idle) in stage.split_watermarks().items():
                    out[str(split_id)] = {"watermark_ms": watermark, "idle": idle}
        return out

    def records_written(self) -> int:
        return sum(op.records_written for t in self.tasks for op in t.operators if isinstance(op, SinkOperator))

    def operator_metrics(self) -> dict[str, dict[str, Any]]:
        """Each vertex's records in and out and input watermark, per subtask (engine/runtime/operator_metrics.py).

        Read from another thread while the scheduler runs: every figure is an int the scheduler replaces."""
        by_vertex: dict[int, list[Subtask]] = {}
        for task in self.tasks:
            by_vertex.setdefault(task.vertex.id, []).append(task)
        out: dict[str, dict[str, Any]] = {}
        for v in self.plan.vertices:
            subtasks = []
            for index, task in enumerate(by_vertex.get(v.id, ())):
                if isinstance(task, SourceTask):
                    records_in, mark = task.records_read, task.stage.current_watermark
                else:
                    records_in, mark = task.records_in, task.valve.last_output_watermark  # type: ignore[attr-defined]
                records_out = sum(w.records_sent for w in task.writers()) + sum(
                    op.records_written for op in task.operators if isinstance(op, (SinkOperator, CollectOperator)))
                subtasks.append({"index": index, "records_in": records_in, "records_out": records_out,
                                 "watermark_ms": mark if mark > MIN_WATERMARK else None})
            out[vertex_key(v)] = operator_entry(
                v, sum(s["records_in"] for s in subtasks), sum(s["records_out"] for s in subtasks),
                smallest_watermark(s["watermark_ms"] for s in subtasks) if all(
                    s["watermark_ms"] is not None for s in subtasks) else None, subtasks)
        return out

    def current_watermark(self) -> int:
        marks = [t.valve.last_output_watermark for t in self.tasks if isinstance(t, StreamTask)]
        return min(marks) if marks else MIN_WATERMARK

    # -- building --------------------------------------------------------------------------------
    def _build(self) -> None:
        plan = self.plan
        gates: dict[tuple[int, int], list[Channel]] = {}
        edge_channels: dict[int, dict[int, list[Channel]]] = {}  # id(edge) -> source subtask -> channels by target
        for v in plan.vertices:
            for j in range(v.parallelism):
                channels: list[Channel] = []
                for edge in v.inputs:
                    sources = [j] if edge.partitioning is Partitioning.FORWARD else range(edge.source_vertex.parallelism)
                    for i in sources:
                        ch = Channel(len(channels), f"{edge.name}[{i}->{j}]", self.runtime.channel_capacity)
                        channels.append(ch)
                        edge_channels.setdefault(id(edge), {}).setdefault(i, []).append(ch)
                gates[(v.id, j)] = channels
        for v in plan.vertices:
            for i in range(v.parallelism):
                task = self._build_subtask(v, i, gates[(v.id, i)], edge_channels)
                task.task_id = task_id_of(f"v{v.id}", i)
                task.vertex = v
                self.tasks.append(task)
                self.task_by_id[task.task_id] = task

    def _context(self, uid: str, v: Vertex, index: int, metrics: Metrics) -> OperatorContext:
        mp = self.plan.max_parallelism
        return OperatorContext(
            operator_id=uid, subtask_index=index, parallelism=v.parallelism, max_parallelism=mp,
            key_group_range=key_group_range_for_operator(mp, v.parallelism, index),
            clock=self.clock, metrics=metrics, dead_letter=self.dead_letter)

    def _make_operator(self, node: Transformation, v: Vertex, index: int) -> OneInputStreamOperator:
        if isinstance(node, _CollectSinkNode):
            return CollectOperator(node.sink)
        if isinstance(node, SinkTransformation):
            sink = node.sink
            if isinstance(sink, PrintSink):
                # each subtask prints through its own opened copy: "<subtask+1>> " leads its lines when the sink
                # has more than one subtask, none at parallelism 1 (Flink's PrintSinkOutputWriter)
                writer = copy.copy(sink)
                writer.open(index, v.parallelism)
            else:
                writer = sink.create_writer(index, v.parallelism) if hasattr(sink, "create_writer") else sink
            return SinkOperator(writer, commit_on_finish=not self.checkpointing)
        if isinstance(node, MapTransformation):
            return {"map": MapOperator, "filter": FilterOperator, "flat_map": FlatMapOperator}[node.kind](node.fn)
        if isinstance(node, TimestampsAndWatermarksTransformation) and v.is_source() and (
            v.source_watermark_strategy is node.watermark_strategy
        ):
            return _PassThrough()
        if isinstance(node, KeyedProcessTransformation):
            return KeyedProcessOperator(node.function, node.key_selector)
        if isinstance(node, BroadcastProcessTransformation):
            if node.key_selector is not None:
                return KeyedBroadcastProcessOperator(node.function, node.key_selector, node.descriptors)
            return BroadcastProcessOperator(node.function, node.descriptors)
        return build_operator(node, self.env, self.clock)

    def _restore_operator(self, op: OneInputStreamOperator, uid: str, v: Vertex, index: int) -> None:
        """Seed 002 "Recovery", rescaling by key groups: keyed operators get every former subtask whose
        key groups meet theirs; others get former subtask j when j % parallelism == index."""
        if self.restore is None:
            return
        entries = self.restore.snapshots_of(uid)
        if not entries:
            return
        mine = op.context.key_group_range
        if hasattr(op, "keyed_state_backend"):
            chosen = [s for _, s in entries if len(mine.intersection(_range(s))) > 0]
        elif isinstance(op, BroadcastProcessOperator):
            # every former subtask held the same broadcast state: each new one restores one copy (Flink)
            former = sorted(entries, key=lambda e: e[0])
            chosen = [former[index % len(former)][1]]
        else:
            chosen = [s for j, s in entries if j % v.parallelism == index]
        if chosen:
            op.initialize_state(chosen, mine)

    def _build_subtask(self, v: Vertex, index: int, gate_channels: list[Channel],
                       edge_channels: dict[int, dict[int, list[Channel]]]) -> Subtask:
        metrics = Metrics()
        self.subtask_metrics.append(metrics)
        outputs: dict[int, FanOutOutput] = {n.id: FanOutOutput() for n in v.nodes}
        operators: dict[int, OneInputStreamOperator] = {}
        uids: dict[int, str] = {}
        for position, node in enumerate(v.nodes):
            if node is v.head and v.is_source():
                continue
            uid = stable_uid(v, position, node)
            op = self._make_operator(node, v, index)
            op.open(self._context(uid, v, index, metrics), outputs[node.id])
            self._restore_operator(op, uid, v, index)
            operators[node.id] = op
            uids[node.id] = uid
            chained_input = getattr(node, "_chained_input", None)
            if chained_input is not None and node is not v.head:
                producer, tag = chained_input
                out = outputs[producer.id]
                if tag is None:
                    out.chained_main.append(op)
                else:
                    out.chained_side.setdefault(tag.tag_id, []).append(op)
        for edge in v.outputs:
            channels = edge_channels[id(edge)][index]
            writer = RecordWriter(channels, edge.partitioning, edge.key_selector, self.plan.max_parallelism,
                                  self.dead_letter, start=index)
            out = outputs[edge.source_node.id]
            if edge.tag is None:
                out.writers_main.append(writer)
            else:
                out.writers_side.setdefault(edge.tag.tag_id, []).append(writer)
        ops = [operators[n.id] for n in v.nodes if n.id in operators]
        outs = [outputs[n.id] for n in v.nodes]
        state_ops: dict[str, Any] = {uids[n.id]: operators[n.id] for n in v.nodes if n.id in operators}
        name = f"{v.name} ({index + 1}/{v.parallelism})"
        vkey = f"v{v.id}"
        task_id = task_id_of(vkey, index)
        mp = self.plan.max_parallelism
        if v.is_source():
            source = v.head.source
            monitored = source_monitor_interval_ms(source)
            splits = assigned_splits(source.discover_splits(), v.parallelism, index, monitored is not None)
            # a split is named per source in snapshots: split ids are unique within their source only
            source_uid = v.head.operator_uid()
            saved = self.restore.source_positions if self.restore is not None else {}
            starts = {s.split_id: saved.get(saved_split_key(saved, source_uid, s.split_id)) for s in splits}
            states = [SplitState(s, source.create_reader(s, starts[s.split_id])) for s in splits]
            stage = SourceTimestampsAndWatermarks(
                v.source_watermark_strategy or WatermarkStrategy.no_watermarks(), self.clock,
                lambda dl: self.dead_letter(dl.value, dl.error, f"timestamp_assigner:{dl.split_id}"),
                monitored=monitored is not None)
            restored_stage = self._restored_stage(vkey, [s.split_id for s in splits])
            if restored_stage is not None:
                stage.restore(restored_stage)
            else:
                for s in splits:
                    stage.add_split(s.split_id)
            task: Subtask = SourceTask(name, states, stage, outputs[v.head.id], ops, outs, self.runtime.bundle_size,
                                       self.dead_letter, bounded=source.is_bounded())
            #: the positions Sn a snapshot records for this subtask's splits
            task.split_positions = lambda task=task: {
                source_split_key(source_uid, s.split_id): s.offset() for s in task.splits}
            if monitored is not None:
                task.discover = lambda: [
                    SplitState(s, source.create_reader(
                        s, saved.get(saved_split_key(saved, source_uid, s.split_id))))
                    for s in assigned_splits(source.discover_splits(), v.parallelism, index, True)
                    if s.split_id not in {t.split_id for t in task.splits}]
                task.monitor_interval_ms, task.clock = monitored, self.clock
            if self.checkpointing:
                state_ops[f"{vkey}.watermarks"] = JsonStateOperator(f"{vkey}.watermarks", stage.snapshot, mp)
                task.checkpointing = self._subtask_coordinator(task_id, task, state_ops, None, task.split_positions)
                task.before_read = self._inject_barriers
            return task
        head = operators[v.head.id]
        gate = InputGate(gate_channels)
        task = StreamTask(name, gate, head, ops, outs)
        self._restore_valve(task, vkey, index, v.parallelism)
        self._replay_channel_state(gate, task_id, v)
        if self.checkpointing:
            state_ops[f"{vkey}.valve"] = JsonStateOperator(f"{vkey}.valve", task.valve.snapshot, mp)
            writer = InMemoryChannelStateWriter()
            task.checkpointing = self._subtask_coordinator(task_id, task, state_ops, writer, None)
            handler = create_checkpoint_barrier_handler(
                self.config, list(range(len(gate_channels))), task.checkpointing, self.clock, writer, self.scheduler)
            task.barrier_handler = handler
            gate.blocked_by = handler.is_blocked
        return task

    # -- restore helpers -----------------------------------------------------------------------------
    def _json_states(self, uid: str) -> list[tuple[int, dict[str, Any]]]:
        if self.restore is None:
            return []
        return [(j, s.metadata["task_state"]) for j, s in self.restore.snapshots_of(uid)]

    def _restored_stage(self, vkey: str, split_ids: list[str]) -> dict[str, Any] | None:
        """The per-split watermark state of exactly this subtask's splits, merged from former subtasks."""
        states = self._json_states(f"{vkey}.watermarks")
        if not states:
            return None
        wanted = set(split_ids)
        entries = [e for _, st in states for e in st["splits"] if codec.decode(e["split_id"]) in wanted]
        for _, st in states:
            if {codec.decode(e["split_id"]) for e in st["splits"]} == wanted:
                return st
        merged = dict(states[0][1])
        merged.update({"splits": entries, "ended": False, "num_dead_letters": 0, "status": "ACTIVE",
                       "combined_watermark": min((int(e["watermark"]) for e in entries), default=MIN_WATERMARK)})
        return merged

    def _restore_valve(self, task: StreamTask, vkey: str, index: int, parallelism: int) -> None:
        states = self._json_states(f"{vkey}.valve")
        if not states:
            return
        same = [st for j, st in states if j == index]
        if len(states) == parallelism and same:
            task.valve.restore(same[0])
        else:  # rescaled: keep the smallest output watermark so the restored watermark never runs ahead
            task.valve.restore(min((st for _, st in states), key=lambda st: st["last_output_watermark"]))

    def _replay_channel_state(self, gate: InputGate, task_id: str, v: Vertex) -> None:
        """Unaligned checkpoints: in-flight input persisted with the snapshot goes first (seed 003)."""
        if self.restore is None:
            return
        state = self.restore.channel_state.get(task_id)
        if state is None or state.is_empty():
            return
        former = len(self.restore.snapshots_of(f"v{v.id}.valve"))
        if former != v.parallelism or any(int(c) >= len(gate.channels) for c in state.elements):
            raise JobDefinitionError(
                "parallelism", v.parallelism,
                f"cannot change while restoring in-flight channel data of an unaligned checkpoint (vertex {v.name!r} "
                f"had {former} subtasks)", "restore from a savepoint (always aligned) to rescale")
        for channel, elements in state.elements.items():
            gate.channels[int(channel)].queue.extend(elements)

    # -- checkpointing ---------------------------------------------------------------------------
    def _subtask_coordinator(self, task_id: str, task: Subtask, state_ops: dict[str, Any],
                             writer: InMemoryChannelStateWriter | None, positions: Any) -> SubtaskCheckpointCoordinator:
        return SubtaskCheckpointCoordinator(
            task_id, state_ops, task.broadcast, self._async_writer(task_id), self._acknowledge, self._decline,
            self.clock, channel_state_writer=writer, source_positions=positions)

    def _async_writer(self, task_id: str) -> Any:
        run, mailbox, faults = self.run_, self.mailbox, self.runtime.fault_plan

        def async_writer(checkpoint_id: int, snapshot: TaskSnapshot, on_done: Any, on_error: Any) -> None:
            self.outstanding_uploads += 1

            def upload() -> None:
                try:
                    if faults is not None:
                        faults.fire(FaultKind.UPLOAD_ERROR, checkpoint_id)
                    result = run.adapter.write_task_state(task_id, snapshot)
                except BaseException as exc:  # noqa: BLE001 - becomes a decline on the scheduler thread
                    # bind the error now: Python unbinds ``exc`` when the except block ends, and a lambda that
                    # read it later raised NameError instead of declining with the real cause
                    mailbox.post(functools.partial(self._settle, functools.partial(on_error, exc)))
                    return

                def acknowledge() -> None:
                    if faults is not None:
                        faults.fire(FaultKind.BEFORE_ACK, checkpoint_id)  # the attempt dies before the ack
                    on_done(result)

                mailbox.post(lambda: self._settle(acknowledge))

            run.executor.submit(upload)

        return async_writer

    def _settle(self, action: Any) -> None:
        self.outstanding_uploads -= 1
        action()

    def _acknowledge(self, task_id: str, checkpoint_id: int, state: Any, metrics: Any) -> None:
        self.run_.record_task_metrics(checkpoint_id, metrics)
        self.coordinator.receive_acknowledge_message(self.job_id, task_id, checkpoint_id, state, metrics)

    def _decline(self, task_id: str, checkpoint_id: int, reason: Any, cause: Any) -> None:
        self.coordinator.receive_decline_message(self.job_id, task_id, checkpoint_id, reason, cause)

    def _inject_barriers(self, task: SourceTask) -> None:
        """Barrier n goes out between two bundles, so Sn is the split offsets right now (seed 002)."""
        while task.pending_triggers and not task.finished:
            checkpoint_id, timestamp_ms, options = task.pending_triggers.pop(0)
            if options.checkpoint_type is CheckpointType.SAVEPOINT_TERMINATE:
                task._emit(task.stage.end_of_input())  # drain: MAX_WATERMARK fires every window first
                task.flush()
            task.checkpointing.trigger_checkpoint(checkpoint_id, timestamp_ms, options)
            if options.checkpoint_type.is_synchronous():
                task.suspended = True  # stop-with-savepoint: no data after the savepoint barrier

    def notify_complete(self, task_id: str, checkpoint_id: int) -> None:
        """Gateway: checkpoint n completed; the first notification of n is where BEFORE_COMMIT faults fire."""
        self.run_.on_checkpoint_completed(self, checkpoint_id, first_task=task_id == self.tasks[0].task_id)
        self.task_by_id[task_id].checkpointing.notify_checkpoint_complete(checkpoint_id)

    def final_checkpoint(self) -> None:
        """All input consumed: one last checkpoint holding the sinks' final transactions and the end offsets.

        Committing at end of input only after this checkpoint is in the store means a
        crash while sinks commit restores from it (sinks re-commit, nothing is replayed),
        never from an older one whose records were already published."""
        run = self.run_
        checkpoint_id = run.counter.get_and_increment()
        now = self.clock.now_ms()
        states = {}
        for task in self.tasks:
            # every operator's final state, not only the sinks': a restore of this checkpoint (on either runtime)
            # must find the job's operators, whose windows have all fired by now
            if task.checkpointing is not None:
                ops = task.checkpointing.state_operators
            else:
                ops = {op.context.operator_id: op for op in task.operators
                       if isinstance(op, SinkOperator) and op.is_two_phase_commit}
            positions = task.split_positions() if isinstance(task, SourceTask) else {}
            if ops or positions:
                snapshot = TaskSnapshot(checkpoint_id, now, {u: op.snapshot_state(checkpoint_id) for u, op in ops.items()},
                                        positions)
                states[task.task_id] = run.adapter.write_task_state(task.task_id, snapshot)
        completed = CompletedCheckpoint(
            self.job_id, checkpoint_id, now, now,
            CheckpointProperties.for_checkpoint(self.config.get_externalized_checkpoint_retention()), states)
        run.store.add_checkpoint_and_subsume_oldest(completed)
        run.on_checkpoint_completed(self, checkpoint_id, first_task=True, final=True)
        for task in self.tasks:
            for op in task.operators:
                if isinstance(op, SinkOperator):
                    op.notify_checkpoint_complete(checkpoint_id)

    # -- running ---------------------------------------------------------------------------------
    def run(self) -> None:
        with _infrequent_full_gc():
            self._run()

    def _run(self) -> None:
        budget = self.runtime.task_budget
        source_budget = self.runtime.bundle_size
        run, faults = self.run_, self.runtime.fault_plan
        step_ms = self.runtime.clock_step_ms
        advance = getattr(self.clock, "advance", None) if step_ms > 0 else None
        if self.checkpointing:
            self.coordinator.start_checkpoint_scheduler()
        order = list(reversed(self.tasks))  # downstream first so channels drain before producers refill them
        if self.runtime.epoch_records is not None:
            for task in self.tasks:
                if isinstance(task, SourceTask):
                    task.epoch_records = self.runtime.epoch_records
                    task.start_epoch()
        threshold = faults.next_record_threshold() if faults is not None else None
        idle_s = _IDLE_SLEEP_MIN_S
        while True:
            run.control.drain()
            if self.failure is not None:
                raise self.failure
            if self.stop_requested is not None:
                raise JobStopped(self.stop_requested)
            progressed = False
            for task in order:
                if task.runnable():
                    task.step(source_budget if task.is_source_task else budget)
                    progressed = progressed or not getattr(task, "starved", False)
            if progressed:
                idle_s = _IDLE_SLEEP_MIN_S
            if self.checkpointing:
                self._report_finished_tasks()
            if threshold is not None and run.records_before_attempt + self.records_read() >= threshold:
                faults.fire(FaultKind.RECORDS, run.records_before_attempt + self.records_read())
                threshold = faults.next_record_threshold()
            self.mailbox.drain()
            while self.runtime.wait_for_uploads and self.outstanding_uploads and self.failure is None:
                self.mailbox.drain(timeout_s=0.05)
            if advance is not None:
                advance(step_ms)
            now = self.clock.now_ms()
            for task in self.tasks:
                if not task.finished:
                    task.advance_processing_time(now)
            if self.checkpointing:
                self.scheduler.run_due()
            if self.failure is not None:
                raise self.failure
            if all(t.finished for t in self.tasks):
                if self.checkpointing:
                    if self.outstanding_uploads or self.coordinator.get_number_of_pending_checkpoints():
                        self.mailbox.drain(timeout_s=0.002)
                        continue
                    self.final_checkpoint()
                return
            if self.runtime.epoch_records is not None and self._epoch_quiescent():
                for task in self.tasks:
                    if isinstance(task, SourceTask) and not task.finished:
                        task.start_epoch()
                continue
            if not progressed:
                if self.checkpointing and (self.outstanding_uploads or self.coordinator.get_number_of_pending_checkpoints()
                                           or any(t.suspended for t in self.tasks)):
                    self.mailbox.drain(timeout_s=0.002)
                    continue
                if any(isinstance(t, SourceTask) and not t.finished and not t.bounded for t in self.tasks):
                    # an unbounded source has nothing right now: back off so an idle job costs ~1% of a core,
                    # not a busy poll that takes the GIL from everything else in the process
                    time.sleep(idle_s)
                    idle_s = min(idle_s * 2, _IDLE_SLEEP_MAX_S)
                    continue
                stuck = [t.name for t in self.tasks if not t.finished]
                raise IllegalStateError(f"Bug: local runtime made no progress; unfinished tasks: {stuck}")

    def _report_finished_tasks(self) -> None:
        """Checkpoints go on after a task finished (FLIP-147): pending ones take its final state at once."""
        for task in self.tasks:
            if task.finished and task.task_id not in self._reported_finished:
                self._reported_finished.add(task.task_id)
                self.coordinator.report_task_finished(task.task_id)

    def _epoch_quiescent(self) -> bool:
        """Every source parked at its epoch end (or finished) and nothing left to process downstream."""
        sources = [t for t in self.tasks if isinstance(t, SourceTask) and not t.finished]
        if not sources or not all(t.parked for t in sources):
            return False
        if any(t.pending_triggers for t in sources):
            return False
        return not any(t.runnable() for t in self.tasks if not isinstance(t, SourceTask))

    def end(self, failed: bool) -> None:
        """The attempt is over: no more protocol calls reach its tasks; close every operator."""
        if self.checkpointing:
            self.gateway.enabled = False
            if failed or self.stop_requested:
                self.coordinator.stop_checkpoint_scheduler()
        for task in self.tasks:
            task.close()


def _range(snapshot: Any) -> Any:
    start, end = snapshot.metadata["key_group_range"]
    return KeyGroupRange(start, end)
