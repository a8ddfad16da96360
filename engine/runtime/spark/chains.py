"""Where a node's output goes inside a Spark task: chained operators, a keyed shuffle, or the driver.

The physical plan (engine/graph/plan.py) is shared with the local runtime.  On Spark a task
runs one source split's slice or one key group, and everything downstream of it that needs no
shuffle runs right there: chained map/filter/flat_map/process nodes, and also stateless vertices
reached over a FORWARD, REBALANCE, RESCALE, SHUFFLE or CUSTOM edge (a map after a union, say) — a
stateless operator gives the same records wherever it runs; over a CUSTOM edge the user's partitioner
still runs per record, so a bad partition index is a dead letter as on the local runtime — and over a
BROADCAST edge, once per consumer subtask.
A HASH edge into a window vertex becomes rows with the record's encoded key, shuffled by key
group in Spark SQL; a BROADCAST edge into a broadcast process vertex becomes broadcast rows the
job master copies to every subtask; sinks and collect targets become rows for the driver.

:func:`build_routes` (driver) turns the plan into plain data; :class:`Router` (task) follows it,
building operators with the same classes the local runtime uses (engine/operators/simple.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from engine.elements import MIN_WATERMARK, StreamRecord, TupleColumns, Watermark
from engine.errors import IllegalStateError, JobDefinitionError
from engine.graph.operator_factory import stateless_operator
from engine.graph.partitioners import BoundCustomPartitioning
from engine.graph.plan import PhysicalPlan, Vertex
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
from engine.operators.base import Metrics, OneInputStreamOperator, OperatorContext, Output, key_failure
from engine.runtime.keyed_edges import check_key, keyable
from engine.runtime.spark.preaggregation import INT_LIMIT, PreAggregation, preaggregation_for
from engine.runtime.spark.rows import (
    DEST_BROADCAST,
    DEST_DEAD_LETTER,
    DEST_DRIVER,
    DEST_OPERATOR_COUNTS,
    DEST_STAGED,
    RowBuffer,
    encode_record,
)
from engine.state import codec

OP = "op"  # a stateless operator node run in the task
PASS = "pass"  # a timestamps/watermarks node folded into its source (per-split generation ran already)
WINDOW = "window"  # a HASH edge into a keyed vertex: a window, or KeyedStream.process / a rolling aggregate
DRIVER = "driver"  # a sink or collect target
STAGED = "staged"  # an exactly-once file sink whose parts the task writes (staged_sinks.py)
BROADCAST = "broadcast"  # a BROADCAST edge into a broadcast process vertex: every subtask gets each record


@dataclass(frozen=True, slots=True)
class Consumer:
    kind: str
    node_id: int
    #: a keyed (HASH) edge into a consumer that does not key records itself: the selector each record must
    #: pass, as Flink's keyBy keys every record; one that raises makes the record a dead letter
    key_selector: Any = None
    #: a BROADCAST edge: each record is handed over (or, into a broadcast process vertex, counted) once per subtask
    #: of the consuming vertex
    copies: int = 1


@dataclass
class Routes:
    """node id and side-output tag id -> consumers; plus the nodes the tasks need."""

    consumers: dict[tuple[int, str | None], list[Consumer]] = field(default_factory=dict)
    nodes: dict[int, Transformation] = field(default_factory=dict)
    #: window node id -> its Spark SQL pre-aggregation (engine/runtime/spark/preaggregation.py)
    preaggregations: dict[int, PreAggregation] = field(default_factory=dict)
    #: source node id -> the window node id its records reach by the column path (preaggregation.py ColumnPath)
    column_paths: dict[int, int] = field(default_factory=dict)
    #: pre-aggregated window node id -> its vertex's parallelism (the reading tasks count each subtask's records)
    parallelism: dict[int, int] = field(default_factory=dict)

    def of(self, node_id: int, tag_id: str | None) -> list[Consumer]:
        return self.consumers.get((node_id, tag_id), [])


def _tag_id(tag: Any) -> str | None:
    return None if tag is None else tag.tag_id


def build_routes(plan: PhysicalPlan, driver_nodes: set[int], preaggregation: bool = True,
                 staged_nodes: frozenset[int] = frozenset(), column_fold: bool = True) -> Routes:
    """Routes for every node of ``plan``; ``driver_nodes`` are sink/collect node ids (rows to the driver).

    ``preaggregation=False`` keeps every window on the element path (to compare both paths);
    ``staged_nodes`` are sinks whose parts the tasks write (engine/runtime/spark/staged_sinks.py);
    ``column_fold=False`` keeps the column path's windows on the window stage's operator (column_fold.py).
    """
    routes = Routes()

    def consumer(node: Transformation, v: Vertex) -> Consumer:
        routes.nodes[node.id] = node
        if node.id in staged_nodes:
            return Consumer(STAGED, node.id)
        if node.id in driver_nodes or isinstance(node, SinkTransformation):
            return Consumer(DRIVER, node.id)
        if isinstance(node, MapTransformation):
            return Consumer(OP, node.id)
        if isinstance(node, TimestampsAndWatermarksTransformation) and v.is_source() \
                and v.source_watermark_strategy is node.watermark_strategy:
            return Consumer(PASS, node.id)
        if isinstance(node, WindowTransformation):
            pre = preaggregation_for(node, plan, column_fold) if preaggregation else None
            if pre is not None:
                routes.preaggregations[node.id] = pre
                routes.parallelism[node.id] = v.parallelism
                if pre.column is not None:
                    routes.column_paths[pre.column.source] = node.id
            return Consumer(WINDOW, node.id)
        if isinstance(node, (KeyedProcessTransformation, BroadcastProcessTransformation)):
            # a keyed vertex like a window: records keyed by its selector, shuffled by key group, one operator
            # per subtask per epoch with its state carried as state rows (stages.py window_stage); a broadcast
            # process vertex too, its broadcast side arriving on a BROADCAST edge (below), its non-keyed form
            # placed by the records' channel (Router._to_window)
            return Consumer(WINDOW, node.id)
        if isinstance(node, TimestampsAndWatermarksTransformation):
            raise JobDefinitionError(
                "runtime", "spark", f"cannot run {node.name!r} yet: on Spark, watermarks are generated per split as "
                "the source reads it, so assign_timestamps_and_watermarks must follow the source directly (partial)",
                "Give the strategy to the source instead -- env.from_source(source, strategy, name), with a "
                "timestamp assigner that parses the raw record itself -- and map after it; or run the job on the "
                "local runtime")
        raise JobDefinitionError(
            "runtime", "spark", f"cannot run {type(node).__name__} {node.name!r} yet",
            "Partial: add_async is not supported on Spark; run this job on the local runtime")

    for v in plan.vertices:
        for node in v.nodes:
            routes.nodes[node.id] = node
            chained = getattr(node, "_chained_input", None)
            if chained is not None and node is not v.head:
                producer, tag = chained
                routes.consumers.setdefault((producer.id, _tag_id(tag)), []).append(consumer(node, v))
    for v in plan.vertices:
        for edge in v.outputs:
            target = edge.target_vertex.head
            c = consumer(target, edge.target_vertex)
            if edge.partitioning is Partitioning.BROADCAST:
                if isinstance(target, BroadcastProcessTransformation):
                    # the job master copies each row to the vertex's subtasks: counted once per subtask, as Flink
                    c = Consumer(BROADCAST, target.id, copies=edge.target_vertex.parallelism)
                elif c.kind == WINDOW:
                    raise IllegalStateError(f"Bug: a BROADCAST edge into keyed vertex {target.name!r}")
                else:
                    # a plain DataStream.broadcast(): every subtask of a stateless vertex (or sink) gets every
                    # record, so the chain in this task runs once per consumer subtask
                    c = Consumer(c.kind, c.node_id, copies=edge.target_vertex.parallelism)
            if edge.partitioning is Partitioning.HASH and edge.key_selector is not None and c.kind != WINDOW:
                c = Consumer(c.kind, c.node_id, edge.key_selector)  # a window keys its records (Router._to_window)
            elif edge.partitioning is Partitioning.CUSTOM:
                if c.kind == WINDOW:
                    raise IllegalStateError(f"Bug: a CUSTOM edge into keyed vertex {target.name!r}")
                # the user's partitioner runs per record, as locally: a bad index is the same dead letter
                # (engine/graph/partitioners.py); the stateless consumer then runs in this task like REBALANCE's
                c = Consumer(c.kind, c.node_id, edge.key_selector.bound(edge.target_vertex.parallelism))
            routes.consumers.setdefault((edge.source_node.id, _tag_id(edge.tag)), []).append(c)
    return routes


class _ChannelKey:
    """The key of every record of one channel: the channel's name."""

    __slots__ = ("channel",)

    def __init__(self, channel: str) -> None:
        self.channel = channel

    def __call__(self, value: Any) -> str:
        return self.channel


class _NodeOutput(Output):
    """The output of one operator in a task: forwards to the router (watermarks are the driver's business)."""

    def __init__(self, router: Router, node_id: int) -> None:
        self.router = router
        self.node_id = node_id

    def collect(self, record: StreamRecord) -> None:
        self.router.emit(self.node_id, None, (record,))

    def collect_batch(self, records: list[StreamRecord]) -> None:
        self.router.emit(self.node_id, None, records)

    takes_columns = True  # the router stages a fired window's columns as they are

    def collect_columns(self, batch: TupleColumns | list[StreamRecord]) -> None:
        """A fired window's results: columns (engine/elements.py TupleColumns) or records."""
        if type(batch) is TupleColumns:
            self.router.emit_columns(self.node_id, batch)
        else:
            self.router.emit(self.node_id, None, batch)

    def collect_side(self, tag: Any, record: StreamRecord) -> None:
        self.router.emit(self.node_id, tag.tag_id, (record,))

    def emit_watermark(self, watermark: Any) -> None:
        pass

    def emit_watermark_status(self, status: Any) -> None:
        pass


class Router:
    """Runs the stateless part of a task's chain and turns what leaves it into rows."""

    def __init__(self, routes: Routes, rows: RowBuffer, context: OperatorContext, channel: str,
                 max_parallelism: int, watermark_before: int = MIN_WATERMARK,
                 staging: dict[int, Any] | None = None) -> None:
        self.routes = routes
        #: sink node id -> StagingTarget of this epoch, and the values this task produced for it
        self.staging = staging or {}
        #: sink node id -> what this task produced for it, in order: lists of values and TupleColumns
        self._staged_chunks: dict[int, list] = {}
        #: W(n-1): panes with a window at or behind it take the element path (preaggregation.py)
        self.watermark_before = watermark_before
        #: per pre-aggregated window node: whether a pane is behind W(n-1)
        self._behind: dict[int, dict[int, bool]] = {}
        #: str key -> its encode_key text (module codec), remembered per task
        self._str_keys: dict[str, str] = {}
        self.rows = rows
        self.context = context
        self.channel = channel
        self.max_parallelism = max_parallelism
        self.sequence = 0
        self._ops: dict[int, OneInputStreamOperator] = {}
        #: records handed to each consumer: (producer node id, side-output tag id, consumer node id) -> count
        self.received: dict[tuple[int, str | None, int], int] = {}
        #: the keyed vertex subtask this router runs in (stages.py window_stage), None in a source task
        self.subtask: int | None = None
        #: records the keyed operator of this subtask was given (None: pre-aggregated, or a source task)
        self.subtask_records_in: tuple[int, int] | None = None
        #: (pre-aggregated window node id, subtask) -> records this reading task sent it: a partial row stands for
        #: several, so the window stage cannot count them (:meth:`count_keyed_in`)
        self.keyed_in: dict[tuple[int, int], int] = {}
        #: while records a custom partitioner sent to subtask t of a stateless vertex run here: t, and what they
        #: handed each consumer, by (t, edge): that vertex's per-subtask counts (operator_counts.py)
        self.attributed: int | None = None
        self.received_by_target: dict[tuple[int, tuple[int, str | None, int]], int] = {}

    @property
    def metrics(self) -> Metrics:
        return self.context.metrics

    def dead_letter(self, value: Any, error: BaseException, stage: str) -> None:
        try:
            text = codec.encode(value)
        except Exception:  # noqa: BLE001 - a dead letter must never fail the task
            text = json.dumps(repr(value))
        self.rows.add(DEST_DEAD_LETTER, value=json.dumps(
            {"value": text, "error": f"{type(error).__name__}: {error}", "stage": stage}))

    def _operator(self, node_id: int) -> OneInputStreamOperator:
        op = self._ops.get(node_id)
        if op is None:
            node = self.routes.nodes[node_id]
            op = stateless_operator(node)
            op.open(self.context, _NodeOutput(self, node_id))
            if self.watermark_before > MIN_WATERMARK:
                # the watermark every record of the epoch is processed under (a process function reads it);
                # the operator forwards it to its output, which leaves watermarks to the driver
                op.process_watermark(Watermark(self.watermark_before))
            self._ops[node_id] = op
        return op

    def emit(self, node_id: int, tag_id: str | None, records: Any) -> None:
        for c in self.routes.of(node_id, tag_id):
            if type(c.key_selector) is BoundCustomPartitioning:
                self._deliver_partitioned(node_id, tag_id, c, records)
            else:
                self._deliver(node_id, tag_id, c, records)

    def _deliver(self, node_id: int, tag_id: str | None, c: Consumer, records: Any) -> None:
        got = records if c.key_selector is None else keyable(records, c.key_selector, self.dead_letter)
        if c.copies > 1 and c.kind != BROADCAST:
            got = [r for r in got for _ in range(c.copies)]
        if c.kind == OP:
            batch = list(got)
            n = len(batch)
            self._operator(c.node_id).process_batch(batch)
        elif c.kind == PASS:
            n = len(got)
            self.emit(c.node_id, None, got)
        elif c.kind == WINDOW:
            n = self._to_window(c.node_id, got)
        elif c.kind == BROADCAST:
            n = self._to_broadcast(c.node_id, got) * c.copies
        elif c.kind == STAGED:
            values = [r.value for r in got]
            n = len(values)
            self._staged_chunks.setdefault(c.node_id, []).append(values)
        else:
            tag = str(c.node_id)
            add = self.rows.add
            n = 0
            for r in got:
                add(DEST_DRIVER, ts=r.timestamp, value=encode_record(r.value), tag=tag)
                n += 1
        # one add per consumer and batch: the vertices' records in and out (engine/runtime/operator_metrics.py)
        edge = (node_id, tag_id, c.node_id)
        self.received[edge] = self.received.get(edge, 0) + n
        if self.attributed is not None:
            at = (self.attributed, edge)
            self.received_by_target[at] = self.received_by_target.get(at, 0) + n

    def _deliver_partitioned(self, node_id: int, tag_id: str | None, c: Consumer, records: Any) -> None:
        """A CUSTOM edge: the partitioner picks each record's subtask (a bad pick is a dead letter, as locally);
        the stateless consumer runs here one subtask's records at a time, so what it receives and sends is
        counted per subtask (``received_by_target``) as the local runtime counts it."""
        select = c.key_selector
        by_target: dict[int, list[Any]] = {}
        for r in records:
            try:
                target = select(r.value)
            except Exception as exc:  # noqa: BLE001 - the record is bad data for this partitioner: a dead letter
                key_failure(select, r.value, exc, self.dead_letter)
                continue
            by_target.setdefault(target, []).append(r)
        plain = Consumer(c.kind, c.node_id, None, c.copies)
        outer = self.attributed
        try:
            for target, group in by_target.items():
                self.attributed = target
                self._deliver(node_id, tag_id, plain, group)
        finally:
            self.attributed = outer

    def _staged_only(self, node_id: int) -> list[Consumer] | None:
        """The consumers of ``node_id`` when every one is a staged file sink (a part written from columns), else
        None."""
        consumers = self.routes.of(node_id, None)
        if consumers and all(c.kind == STAGED and c.key_selector is None for c in consumers):
            return consumers
        return None

    def emit_columns(self, node_id: int, batch: TupleColumns) -> None:
        """Results in column form (engine/elements.py TupleColumns): kept as columns when every consumer is
        a staged file sink (the part is written from them), else emitted as records."""
        consumers = self._staged_only(node_id)
        if consumers is not None:
            n = len(batch)
            for c in consumers:
                self._staged_chunks.setdefault(c.node_id, []).append(batch)
                edge = (node_id, None, c.node_id)
                self.received[edge] = self.received.get(edge, 0) + n
        else:
            self.emit(node_id, None, batch.records())

    def emit_table(self, node_id: int, table: Any, timestamps: Any) -> None:
        """Dict results as one Arrow table of their fields (a column fold's fired windows, engine/io/formats.py
        ArrowRows): staged as the table when every consumer is a staged file sink (a Parquet part is written from
        it, another format from its dicts), else emitted as records."""
        from engine.io.formats import ArrowRows

        rows = ArrowRows(table, timestamps)
        consumers = self._staged_only(node_id)
        if consumers is not None:
            n = len(rows)
            for c in consumers:
                self._staged_chunks.setdefault(c.node_id, []).append(rows)
                edge = (node_id, None, c.node_id)
                self.received[edge] = self.received.get(edge, 0) + n
        else:
            self.emit(node_id, None, rows.records())

    def _to_broadcast(self, node_id: int, records: Any) -> int:
        """One broadcast row per record (DEST_BROADCAST, ``_tag`` = the vertex): the job master copies it to
        every subtask of the vertex (epoch_frames.py ``_window_frame``), which applies it before the epoch's keyed
        records (stages.py); the channel and sequence keep each channel's order."""
        encode = encode_record
        stamps: list[Any] = []
        texts: list[str] = []
        for r in records:
            stamps.append(r.timestamp)
            texts.append(encode(r.value))
        n = len(texts)
        if n:
            first = self.sequence + 1
            self.sequence += n
            self.rows.extend(n, DEST_BROADCAST, split=self.channel, offset=range(first, first + n), ts=stamps,
                             value=texts, tag=str(node_id))
        return n

    def _to_window(self, node_id: int, records: Any) -> int:
        """The rows of ``records`` for window or keyed vertex ``node_id``; returns how many records it took.

        The key is the selector called per record, as its contract says.  An element row per record, except for
        a pre-aggregated window (preaggregation.py): there the records of this call are folded per (key, pane)
        as they come, one partial row per pair -- the pair's first record whole, at its own sequence, with the
        pane's sum/min/max as ``_num`` -- and only a record the fold cannot take (a pane behind W(n-1), a field
        that is not a plain int) is an element row.  So a task encodes one record per (key, pane) of the call,
        not one per record, and the shuffle moves as many rows.

        The rows are built column-wise and handed to the buffer once per call.  Encoded ``str`` keys are
        remembered per task (a key's encoding depends only on its text), since a task sees each key many times.
        """
        selector = self.routes.nodes[node_id].key_selector
        if selector is None:
            # the non-keyed side of a non-keyed broadcast process vertex: every record of a channel goes to one
            # subtask, in order (Flink's forward edge keeps a channel's order; which subtask is not observable
            # but through get_index_of_this_subtask)
            selector = _ChannelKey(self.channel)
        pre = counted = self.routes.preaggregations.get(node_id)
        if pre is not None and pre.column is not None:
            pre = None  # a column path's read that took the element path: whole elements (preaggregation.py)
        encode, encode_key = encode_record, codec.encode_key
        key_cache = self._str_keys
        offsets: list[int] = []
        stamps: list[Any] = []
        keys: list[str] = []
        texts: list[str] = []
        nums: list[int | None] = []
        sequence = self.sequence
        taken = 0
        #: (encoded key, pane) -> [sequence, timestamp, first value, aggregate, records] of this call's partial
        groups: dict[tuple[str, int], list] = {}
        if pre is not None:
            behind = self._behind.setdefault(node_id, {})
            watermark = self.watermark_before
            numeric, field, offset, pane_ms = pre.numeric, pre.field, pre.offset, pre.pane
            plain_field = type(field) is int
            kind = pre.kind
        for r in records:
            value = r.value
            try:
                k = selector(value)
                if type(k) is not str:
                    check_key(k)
            except Exception as exc:  # noqa: BLE001 - a key the selector cannot give is a dead letter (local runtime too)
                key_failure(selector, value, exc, self.dead_letter)
                continue
            # a hashable key the codec cannot write fails the job, as on the local runtime (StateSerializationError)
            if type(k) is str:
                key = key_cache.get(k)
                if key is None:
                    key = key_cache[k] = encode_key(k)
            else:
                key = encode_key(k)
            ts = r.timestamp
            taken += 1
            seq = sequence + taken
            if pre is not None and ts is not None:
                # pre.numeric, inlined for the common case: a tuple with an int field of Python int
                if plain_field and type(value) is tuple and field < len(value):
                    num = value[field]
                    if type(num) is not int or not -INT_LIMIT < num < INT_LIMIT:
                        num = None
                else:
                    num = numeric(value)
                if num is not None:
                    pane = ts - (ts - offset) % pane_ms
                    late = behind.get(pane)
                    if late is None:
                        late = behind[pane] = pre.oldest_window_max_timestamp(pane) <= watermark
                    if not late:
                        group = groups.get((key, pane))
                        if group is None:
                            groups[(key, pane)] = [seq, ts, value, num, 1]
                            continue
                        group[4] += 1
                        if kind == "sum":
                            group[3] += num
                        elif (num < group[3]) if kind == "min" else (num > group[3]):
                            group[3] = num
                        continue
            offsets.append(seq)
            stamps.append(ts)
            keys.append(key)
            texts.append(encode(value))
            nums.append(None)
        counts = [1] * len(keys)
        for (key, _), (seq, ts, value, aggregate, count) in groups.items():
            offsets.append(seq)
            stamps.append(ts)
            keys.append(key)
            texts.append(encode(value))
            nums.append(aggregate)
            counts.append(count)
        if counted is not None and keys:
            self.count_keyed_in(node_id, keys, counts)
        self.sequence += taken
        if offsets:
            self.rows.extend(len(offsets), node_id, split=self.channel, offset=offsets, ts=stamps, key=keys,
                             value=texts, num=nums)
        return taken

    def count_keyed_in(self, node_id: int, keys: list[str], counts: list[int]) -> None:
        """Records this task sent pre-aggregated window ``node_id``, ``counts[i]`` of encoded key ``keys[i]``,
        counted by the subtask their key group goes to (Flink's numRecordsIn of that subtask); the keys hashed in
        numpy (engine/state/key_hash.py)."""
        from engine.state.key_hash import key_groups_of

        self.count_keyed_in_groups(node_id, key_groups_of(pa.array(keys, pa.string()), self.max_parallelism),
                                   counts)

    def count_keyed_in_groups(self, node_id: int, key_groups: Any, counts: Any) -> None:
        """:meth:`count_keyed_in` of records whose key groups are known (numpy arrays, one entry per group)."""
        parallelism = self.routes.parallelism[node_id]
        subtasks = np.asarray(key_groups, np.int64) * parallelism // self.max_parallelism
        totals = np.bincount(subtasks, weights=np.asarray(counts, np.int64), minlength=parallelism)
        keyed_in = self.keyed_in
        for subtask in np.flatnonzero(totals):
            at = (node_id, int(subtask))
            keyed_in[at] = keyed_in.get(at, 0) + int(totals[subtask])

    def close(self) -> None:
        for op in self._ops.values():
            op.close()
        for node_id, chunks in self._staged_chunks.items():
            count = sum(map(len, chunks))
            if count:
                part = self.staging[node_id].write(self.channel, chunks)
                self.rows.add(DEST_STAGED, value=json.dumps({**part, "records": count}), tag=str(node_id))
        self._staged_chunks = {}
        if self.received or self.subtask_records_in is not None or self.keyed_in:
            self.rows.add(DEST_OPERATOR_COUNTS, value=json.dumps({
                "subtask": self.subtask, "split": self.channel if self.subtask is None else None,
                "in": self.subtask_records_in,
                "keyed_in": [[node, subtask, n] for (node, subtask), n in self.keyed_in.items()],
                "edges": [[p, t, c, n] for (p, t, c), n in self.received.items()],
                "by_target": [[i, p, t, c, n] for (i, (p, t, c)), n in self.received_by_target.items()]}))
            self.received = {}
            self.received_by_target = {}
            self.keyed_in = {}
        # the router and its context refer to each other: drop the per-task caches now, not at a later collection
        self._behind, self._str_keys, self._ops = {}, {}, {}
