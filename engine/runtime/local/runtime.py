"""The local runtime: a pipelined mini-cluster in one process (ARCHITECTURE section 3).

Every vertex of the physical plan runs as ``parallelism`` subtasks; subtasks are
connected by channels carrying stream elements and are driven by a cooperative,
single-threaded scheduler.  Single-threaded is deliberate: the operator layer
knows nothing of threads, every interleaving is reproducible from the
scheduler's order, and the GIL would serialize threads anyway.  Backpressure is
real: a task whose output channels are full is not scheduled.

Supported: sources with per-split watermarks, chains of map/filter/flat_map,
key_by repartitioning by key group, union, window operators (keyed and
window_all), side outputs, sinks, execute_and_collect, dead letters.
Partial: processing-time timers fire as the injected clock advances between
scheduling rounds; at the end of bounded input pending processing-time timers
are not fired (Flink's behaviour).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from engine.api.environment import JobExecutionResult
from engine.api.graph import (
    AsyncTransformation,
    MapTransformation,
    Partitioning,
    SinkTransformation,
    TimestampsAndWatermarksTransformation,
    Transformation,
    WindowTransformation,
)
from engine.errors import IllegalStateError, JobDefinitionError
from engine.operators.base import Metrics, OneInputStreamOperator, OperatorContext
from engine.operators.simple import CollectOperator, FilterOperator, FlatMapOperator, MapOperator, SinkOperator
from engine.runtime.local.channels import Channel, InputGate
from engine.operators.timestamps_watermarks import SourceTimestampsAndWatermarks
from engine.runtime.local.tasks import SourceTask, SplitState, StreamTask, Subtask
from engine.runtime.local.writers import FanOutOutput, RecordWriter
from engine.runtime.operator_factory import build_operator
from engine.runtime.plan import PhysicalPlan, Vertex, build_plan
from engine.state.key_groups import key_group_range_for_operator
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


class LocalRuntime:
    def __init__(self, env: Any) -> None:
        self.env = env
        opts = env.get_runtime_options()
        self.bundle_size = int(opts.get("bundle_size", DEFAULT_BUNDLE_SIZE))
        self.channel_capacity = int(opts.get("channel_capacity", DEFAULT_CHANNEL_CAPACITY))
        if self.bundle_size < 1:
            raise JobDefinitionError("bundle_size", self.bundle_size, "must be >= 1")

    def execute(self, job_name: str, sinks: list[Transformation], collect: list[Transformation]) -> JobExecutionResult:
        collected: dict[int, list[Any]] = {}
        roots: list[Transformation] = list(sinks)
        for node in collect:
            target: list[Any] = []
            collected[node.id] = target
            roots.append(_CollectSinkNode(name="Collect", inputs=[node], sink=target))
        plan = build_plan(roots, self.env.get_parallelism(), self.env.get_max_parallelism())
        job = LocalJob(self, plan, job_name)
        started = time.monotonic()
        job.run()
        return JobExecutionResult(
            job_name=job_name,
            job_id=job.job_id,
            runtime="local",
            net_runtime_ms=int((time.monotonic() - started) * 1000),
            metrics=job.metrics(),
            dead_letters=job.dead_letters,
            collected=collected,
        )


class LocalJob:
    """One execution attempt of a plan."""

    def __init__(self, runtime: LocalRuntime, plan: PhysicalPlan, job_name: str) -> None:
        self.runtime = runtime
        self.env = runtime.env
        self.plan = plan
        self.job_name = job_name
        self.job_id = uuid.uuid4().hex[:16]
        self.clock = self.env.get_clock()
        self.dead_letters: list[dict[str, Any]] = []
        self.subtask_metrics: list[Metrics] = []
        self.tasks: list[Subtask] = []
        self._build()

    # -- dead letters ----------------------------------------------------------------------------
    def dead_letter(self, value: Any, error: BaseException, stage: str) -> None:
        self.dead_letters.append({"value": value, "error": f"{type(error).__name__}: {error}", "stage": stage})

    def metrics(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for m in self.subtask_metrics:
            for k, v in m.counters.items():
                total[k] = total.get(k, 0) + v
        total["num_dead_letter_records"] = len(self.dead_letters)
        return total

    # -- building --------------------------------------------------------------------------------
    def _build(self) -> None:
        plan = self.plan
        # channels: (edge index, source subtask, target subtask) -> Channel
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
                self.tasks.append(self._build_subtask(v, i, gates[(v.id, i)], edge_channels))

    def _context(self, node: Transformation, v: Vertex, index: int, metrics: Metrics) -> OperatorContext:
        mp = self.plan.max_parallelism
        return OperatorContext(
            operator_id=node.operator_uid(),
            subtask_index=index,
            parallelism=v.parallelism,
            max_parallelism=mp,
            key_group_range=key_group_range_for_operator(mp, v.parallelism, index),
            clock=self.clock,
            metrics=metrics,
            dead_letter=self.dead_letter,
        )

    def _make_operator(self, node: Transformation, v: Vertex) -> OneInputStreamOperator:
        if isinstance(node, _CollectSinkNode):
            return CollectOperator(node.sink)
        if isinstance(node, SinkTransformation):
            return SinkOperator(node.sink.create_writer() if hasattr(node.sink, "create_writer") else node.sink)
        if isinstance(node, MapTransformation):
            return {"map": MapOperator, "filter": FilterOperator, "flat_map": FlatMapOperator}[node.kind](node.fn)
        if isinstance(node, TimestampsAndWatermarksTransformation) and v.is_source() and (
            v.source_watermark_strategy is node.watermark_strategy
        ):
            return _PassThrough()
        return build_operator(node, self.env, self.clock)

    def _build_subtask(self, v: Vertex, index: int, gate_channels: list[Channel],
                       edge_channels: dict[int, dict[int, list[Channel]]]) -> Subtask:
        metrics = Metrics()
        self.subtask_metrics.append(metrics)
        outputs: dict[int, FanOutOutput] = {n.id: FanOutOutput() for n in v.nodes}
        operators: dict[int, OneInputStreamOperator] = {}
        for node in v.nodes:
            if node is v.head and v.is_source():
                continue
            op = self._make_operator(node, v)
            op.open(self._context(node, v, index, metrics), outputs[node.id])
            operators[node.id] = op
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
        name = f"{v.name} ({index + 1}/{v.parallelism})"
        if v.is_source():
            source = v.head.source
            splits = [s for k, s in enumerate(sorted(source.discover_splits(), key=lambda s: s.split_id))
                      if k % v.parallelism == index]
            states = [SplitState(s, source.create_reader(s, None)) for s in splits]
            stage = SourceTimestampsAndWatermarks(
                v.source_watermark_strategy or WatermarkStrategy.no_watermarks(), self.clock,
                lambda dl: self.dead_letter(dl.value, dl.error, f"timestamp_assigner:{dl.split_id}"))
            for s in splits:
                stage.add_split(s.split_id)
            return SourceTask(name, states, stage, outputs[v.head.id], ops, outs, self.runtime.bundle_size,
                              self.dead_letter, bounded=source.is_bounded())
        head = operators[v.head.id]
        return StreamTask(name, InputGate(gate_channels), head, ops, outs)

    # -- running ---------------------------------------------------------------------------------
    def run(self) -> None:
        budget = self.runtime.bundle_size * 4
        try:
            # downstream tasks first in each round so channels drain before producers refill them
            order = list(reversed(self.tasks))
            while not all(t.finished for t in self.tasks):
                progressed = False
                for task in order:
                    if task.runnable():
                        task.step(budget)
                        progressed = True
                now = self.clock.now_ms()
                for task in self.tasks:
                    if not task.finished:
                        task.advance_processing_time(now)
                if not progressed and not all(t.finished for t in self.tasks):
                    if any(isinstance(t, SourceTask) and not t.finished and not t.bounded for t in self.tasks):
                        time.sleep(0.001)  # an unbounded source has nothing right now
                        continue
                    stuck = [t.name for t in self.tasks if not t.finished]
                    raise IllegalStateError(f"Bug: local runtime made no progress; unfinished tasks: {stuck}")
        finally:
            for task in self.tasks:
                task.close()
