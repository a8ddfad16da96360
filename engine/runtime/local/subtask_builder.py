"""Building one attempt of a local job: its subtasks, channels and operators, restored from a checkpoint.

:class:`SubtaskBuilder` turns the physical plan into subtasks (ARCHITECTURE section 3): every vertex runs as
``parallelism`` subtasks connected by channels (one per producing subtask on a repartitioning edge, one on a
forward edge), each subtask a chain of opened operators.  With a restore point it restores them (seed 002
"Recovery"): keyed operators by key groups (rescaling included), the sources' split offsets and per-split
watermarks, the stream tasks' valves, and, for an unaligned checkpoint, the in-flight channel data (seed 003),
which is replayed before any new input.  With checkpointing enabled each subtask gets its
SubtaskCheckpointCoordinator and barrier handler from the attempt (:class:`~engine.runtime.local.runtime.LocalJob`),
which drives them.
"""

from __future__ import annotations

import copy
from typing import Any

from engine.checkpointing.barrier_handlers import create_checkpoint_barrier_handler
from engine.checkpointing.channel_state import InMemoryChannelStateWriter
from engine.elements import MIN_WATERMARK
from engine.errors import JobDefinitionError
from engine.graph.operator_factory import build_operator, keyed_operator, stateless_operator
from engine.graph.plan import Vertex
from engine.graph.transformations import (
    BroadcastProcessTransformation,
    KeyedProcessTransformation,
    MapTransformation,
    Partitioning,
    SinkTransformation,
    TimestampsAndWatermarksTransformation,
    Transformation,
    WindowTransformation,
)
from engine.io.sink import PrintSink
from engine.io.source import assigned_splits, source_monitor_interval_ms
from engine.operators.base import Metrics, OneInputStreamOperator, OperatorContext
from engine.operators.batch_input import BatchKeyedInput
from engine.operators.broadcast_process import BroadcastProcessOperator
from engine.operators.keyed_process import RollingAggregation
from engine.operators.simple import CollectOperator, SinkOperator
from engine.operators.timestamps_watermarks import SourceTimestampsAndWatermarks
from engine.runtime.local.channels import Channel, InputGate
from engine.runtime.local.checkpointing import JsonStateOperator
from engine.runtime.local.tasks import SourceTask, SplitState, StreamTask, Subtask
from engine.runtime.local.writers import FanOutOutput, RecordWriter
from engine.runtime.restore import task_id_of
from engine.runtime.snapshot_metadata import saved_split_key, source_split_key
from engine.state import codec
from engine.state.key_groups import KeyGroupRange, key_group_range_for_operator
from engine.watermarks.strategy import WatermarkStrategy


class _PassThrough(OneInputStreamOperator):
    """A timestamps/watermarks node whose work was folded into the source (per-split generation)."""

    def process_element(self, record: Any) -> None:
        self.output.collect(record)

    def process_batch(self, records: Any) -> None:
        collect = self.output.collect
        for r in records:
            collect(r)


class CollectSinkNode(SinkTransformation):
    """The sink ``execute_and_collect`` appends to a stream: its subtask collects into ``sink`` (a list)."""


def _is_keyed(node: Transformation) -> bool:
    """Whether ``node`` runs a keyed operator, whose input BATCH mode sorts (engine/operators/batch_input.py)."""
    if isinstance(node, (KeyedProcessTransformation, WindowTransformation)):
        return True
    return isinstance(node, BroadcastProcessTransformation) and node.key_selector is not None


def stable_uid(v: Vertex, position: int, node: Transformation) -> str:
    """The id an operator's state is stored under (assigned by build_plan; see Transformation.operator_uid)."""
    return node.operator_uid()


def _range(snapshot: Any) -> Any:
    start, end = snapshot.metadata["key_group_range"]
    return KeyGroupRange(start, end)


class SubtaskBuilder:
    """Builds and restores the subtasks of one attempt (``job``, a LocalJob) from its plan and restore point.

    Reads the attempt's runtime, environment, plan, clock, restore point and checkpoint configuration; asks it
    for each subtask's checkpoint coordinator (``subtask_coordinator``) and hands sources its barrier
    injection (``inject_barriers``).  ``subtask_metrics`` holds every subtask's counters after :meth:`build`."""

    def __init__(self, job: Any) -> None:
        self.job = job
        self.runtime = job.runtime
        self.env = job.env
        self.plan = job.plan
        self.clock = job.clock
        self.restore = job.restore
        self.dead_letter = job.dead_letter
        self.checkpointing = job.checkpointing
        self.batch = job.batch
        self.config = job.config
        self.scheduler = getattr(job, "scheduler", None)  # only with checkpointing enabled
        self.subtask_metrics: list[Metrics] = []

    # -- building --------------------------------------------------------------------------------
    def build(self) -> list[Subtask]:
        """Every vertex's subtasks, upstream first, connected by channels and restored from ``restore``."""
        tasks: list[Subtask] = []
        plan = self.plan
        gates: dict[tuple[int, int], list[Channel]] = {}
        #: (vertex, subtask) -> its channels of broadcast edges, which its gate polls first (InputGate)
        self._broadcast_channels: dict[tuple[int, int], list[int]] = {}
        edge_channels: dict[int, dict[int, list[Channel]]] = {}  # id(edge) -> source subtask -> channels by target
        for v in plan.vertices:
            for j in range(v.parallelism):
                channels: list[Channel] = []
                for edge in v.inputs:
                    sources = [j] if edge.partitioning is Partitioning.FORWARD else range(edge.source_vertex.parallelism)
                    for i in sources:
                        ch = Channel(len(channels), f"{edge.name}[{i}->{j}]", self.runtime.channel_capacity)
                        if edge.partitioning is Partitioning.BROADCAST:
                            self._broadcast_channels.setdefault((v.id, j), []).append(ch.index)
                        channels.append(ch)
                        edge_channels.setdefault(id(edge), {}).setdefault(i, []).append(ch)
                gates[(v.id, j)] = channels
        for v in plan.vertices:
            for i in range(v.parallelism):
                task = self._build_subtask(v, i, gates[(v.id, i)], edge_channels)
                task.task_id = task_id_of(f"v{v.id}", i)
                task.vertex = v
                tasks.append(task)
        return tasks

    def _context(self, uid: str, v: Vertex, index: int, metrics: Metrics) -> OperatorContext:
        mp = self.plan.max_parallelism
        return OperatorContext(
            operator_id=uid, subtask_index=index, parallelism=v.parallelism, max_parallelism=mp,
            key_group_range=key_group_range_for_operator(mp, v.parallelism, index),
            clock=self.clock, metrics=metrics, dead_letter=self.dead_letter)

    def _make_operator(self, node: Transformation, v: Vertex, index: int) -> OneInputStreamOperator:
        op = self._make_streaming_operator(node, v, index)
        if self.batch and _is_keyed(node):
            rolling = isinstance(node, KeyedProcessTransformation) and isinstance(node.function, RollingAggregation)
            return BatchKeyedInput(op, final_only=rolling)
        return op

    def _make_streaming_operator(self, node: Transformation, v: Vertex, index: int) -> OneInputStreamOperator:
        if isinstance(node, CollectSinkNode):
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
            return stateless_operator(node)
        if isinstance(node, TimestampsAndWatermarksTransformation) and v.is_source() and (
            v.source_watermark_strategy is node.watermark_strategy
        ):
            return _PassThrough()
        if isinstance(node, (KeyedProcessTransformation, BroadcastProcessTransformation)):
            return keyed_operator(node)
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
                                  self.dead_letter, start=index, producers=v.parallelism)
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
                monitored=monitored is not None,
                auto_watermark_interval_ms=self.env.get_config().get_auto_watermark_interval())
            restored_stage = self._restored_stage(vkey, [s.split_id for s in splits])
            if restored_stage is not None:
                stage.restore(restored_stage)
                if monitored is not None:
                    # a file the checkpoint had read to its end is skipped, not fetched again to find its end: the
                    # restored stage holds the unfinished splits only (a monitored split leaves it when finished)
                    unfinished = set(stage.split_ids)
                    for state in states:
                        key = saved_split_key(saved, source_uid, state.split_id)
                        state.finished = key is not None and state.split_id not in unfinished
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
                task.checkpointing = self.job.subtask_coordinator(task_id, task, state_ops, None, task.split_positions)
                task.before_read = self.job.inject_barriers
            return task
        head = operators[v.head.id]
        gate = InputGate(gate_channels, first=self._broadcast_channels.get((v.id, index), ()))
        task = StreamTask(name, gate, head, ops, outs)
        self._restore_valve(task, vkey, index, v.parallelism)
        self._replay_channel_state(gate, task_id, v)
        if self.checkpointing:
            state_ops[f"{vkey}.valve"] = JsonStateOperator(f"{vkey}.valve", task.valve.snapshot, mp)
            writer = InMemoryChannelStateWriter()
            task.checkpointing = self.job.subtask_coordinator(task_id, task, state_ops, writer, None)
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
