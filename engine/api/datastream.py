"""``DataStream``, ``KeyedStream`` and ``SingleOutputStreamOperator`` (PyFlink's DataStream API).

Methods only record transformations in the logical graph (engine.graph.transformations)
after validating their arguments; running happens in ``execute`` /
``execute_and_collect`` through the environment's runtime.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Iterable

from engine.api.connected_streams import BroadcastConnectedStream, BroadcastStream, ConnectedStreams
from engine.api.fields import FieldKeySelector, check_field_of_input, is_field
from engine.api.functions import KeyedProcessFunction, OutputTag, ProcessFunction, ReduceFunction, check_callable
from engine.graph.partitioners import CustomPartitioning
from engine.api.time import SizeLike, positive_millis
from engine.api.typeinfo import check_type_info, typed_key_selector
from engine.api.windowed_stream import AllWindowedStream, WindowedStream
from engine.errors import JobDefinitionError
from engine.graph.transformations import (
    AsyncTransformation,
    declared_output_type,
    KeyedProcessTransformation,
    MapTransformation,
    Partitioning,
    PartitionTransformation,
    SideOutputTransformation,
    SinkTransformation,
    TimestampsAndWatermarksTransformation,
    Transformation,
    UnionTransformation,
)
from engine.io.file_sink import FileSink
from engine.io.sink import PrintSink
from engine.operators.keyed_process import RollingAggregation
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.aggregations import ReduceAggregate, builtin_aggregation
from engine.windowing.assigners import (
    GlobalWindows,
    SlidingEventTimeWindows,
    SlidingProcessingTimeWindows,
    TumblingEventTimeWindows,
    TumblingProcessingTimeWindows,
)
from engine.windowing.evictors import CountEvictor
from engine.windowing.triggers import CountTrigger, PurgingTrigger

if TYPE_CHECKING:
    from engine.api.environment import StreamExecutionEnvironment
    from engine.windowing.assigners import WindowAssigner


class DataStream:
    """A stream of records in the logical graph."""

    #: how records are keyed: None here, the ``key_by`` selector on a KeyedStream
    _key_selector: Callable[[Any], Any] | None = None

    def __init__(self, env: StreamExecutionEnvironment, node: Transformation) -> None:
        self._env = env
        self._node = node

    def _result(self, node: Transformation) -> SingleOutputStreamOperator:
        """The stream ``node`` (an operator applied to this stream) produces, in this stream's job.

        Windowed and connected streams build their results through this, so their modules need not
        import this one (which imports them)."""
        return SingleOutputStreamOperator(self._env, node)

    # -- configuration of the node that produced this stream ------------------------------------
    def set_parallelism(self, parallelism: int) -> DataStream:
        if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
            raise JobDefinitionError("parallelism", parallelism, "must be an int >= 1")
        self._node.parallelism = parallelism
        return self

    def uid(self, uid: str) -> DataStream:
        """A stable operator id: state in savepoints is matched to operators by uid."""
        if not isinstance(uid, str) or not uid:
            raise JobDefinitionError("uid", uid, "must be a non-empty string")
        self._node.uid = uid
        return self

    def name(self, name: str) -> DataStream:
        self._node.name = name
        return self

    def get_name(self) -> str:
        return self._node.name

    # -- transformations -----------------------------------------------------------------------
    def map(self, func: Any, output_type: Any = None) -> SingleOutputStreamOperator:
        """``output_type`` (PyFlink's TypeInformation) is checked and shapes ``print()``; ``func``'s results are
        passed on as returned, not converted to it (engine/api/typeinfo.py)."""
        fn = check_callable(func, "func", "map")
        return self._add(MapTransformation(name="Map", inputs=[self._node], kind="map", fn=fn,
                                           output_type=check_type_info(output_type, "output_type")))

    def filter(self, func: Any) -> SingleOutputStreamOperator:
        fn = check_callable(func, "func", "filter")
        return self._add(MapTransformation(name="Filter", inputs=[self._node], kind="filter", fn=fn))

    def flat_map(self, func: Any, output_type: Any = None) -> SingleOutputStreamOperator:
        fn = check_callable(func, "func", "flat_map")
        return self._add(MapTransformation(name="FlatMap", inputs=[self._node], kind="flat_map", fn=fn,
                                           output_type=check_type_info(output_type, "output_type")))

    def key_by(self, key_selector: Any, key_type: Any = None) -> KeyedStream:
        """Key by a function (or a KeySelector) or by a field: ``key_by("user")`` (a dict key) or
        ``key_by(0)`` (a tuple position).  ``key_type`` (PyFlink's TypeInformation of the key) converts the key
        as PyFlink's does when the key crosses into Java: a ``Types.FLOAT()`` key is rounded to 32 bits, a
        ``Types.ROW_NAMED`` key becomes a Row with those names (engine/api/typeinfo.py); a key that does not
        fit is a dead letter of the key selector."""
        check_type_info(key_type, "key_type")
        if is_field(key_selector):
            fn = FieldKeySelector(key_selector).get_key
        elif callable(key_selector) or callable(getattr(key_selector, "get_key", None)):
            fn = check_callable(key_selector, "key_selector", "get_key")
        else:  # key_by(-1), key_by(""), key_by(4.2): say what a field is, not only that functions exist
            raise JobDefinitionError("key_selector", key_selector, "must be a function (or a KeySelector), a dict "
                                     "key (a non-empty str) or a tuple position (an int >= 0)")
        fn = typed_key_selector(fn, key_type)
        node = PartitionTransformation(name="KeyBy", inputs=[self._node], partitioning=Partitioning.HASH, key_selector=fn)
        return KeyedStream(self._env, node, fn)

    def rebalance(self) -> DataStream:
        return DataStream(self._env, PartitionTransformation(name="Rebalance", inputs=[self._node],
                                                             partitioning=Partitioning.REBALANCE))

    def union(self, *streams: DataStream) -> DataStream:
        for i, s in enumerate(streams):
            if not isinstance(s, DataStream):
                raise JobDefinitionError(f"streams[{i}]", s, "must be a DataStream")
            if s._env is not self._env:
                raise JobDefinitionError(f"streams[{i}]", s, "belongs to another StreamExecutionEnvironment")
        node = UnionTransformation(name="Union", inputs=[self._node] + [s._node for s in streams])
        return DataStream(self._env, node)

    def connect(self, ds: Any) -> Any:
        """Connect another stream: a ConnectedStreams (``map(CoMapFunction)``, ``flat_map(CoFlatMapFunction)``,
        ``key_by(k1, k2)``, on two keyed inputs ``process(KeyedCoProcessFunction)``), or, for a BroadcastStream,
        a BroadcastConnectedStream (``process(KeyedBroadcastProcessFunction)`` after key_by,
        ``process(BroadcastProcessFunction)`` otherwise).  See engine/api/connected_streams.py."""
        if isinstance(ds, BroadcastStream):
            self._check_same_env(ds.stream, "stream")
            return BroadcastConnectedStream(self, ds, self._key_selector)
        if not isinstance(ds, DataStream):
            raise JobDefinitionError("ds", ds, "must be a DataStream or a BroadcastStream")
        self._check_same_env(ds, "ds")
        return ConnectedStreams(self, ds, self._key_selector, ds._key_selector)

    def _check_same_env(self, other: DataStream, parameter: str) -> None:
        if other._env is not self._env:
            raise JobDefinitionError(parameter, other, "belongs to another StreamExecutionEnvironment")

    def broadcast(self, *broadcast_state_descriptors: Any) -> Any:
        """With MapStateDescriptors: a BroadcastStream carrying those broadcast states, to ``connect`` to.
        Without: this stream with every record sent to every subtask of the next operator (broadcast
        partitioning).  Both runtimes run both."""
        if not broadcast_state_descriptors:
            return DataStream(self._env, PartitionTransformation(name="Broadcast", inputs=[self._node],
                                                                 partitioning=Partitioning.BROADCAST))
        return BroadcastStream(self, tuple(broadcast_state_descriptors))

    def assign_timestamps_and_watermarks(self, watermark_strategy: Any) -> SingleOutputStreamOperator:
        """Assign event timestamps and generate watermarks.

        Directly after a source (nothing in between), the strategy runs per source
        split, as Flink's ``from_source(source, strategy)`` does; elsewhere it runs per
        subtask.
        """
        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise JobDefinitionError(
                "watermark_strategy", watermark_strategy, "must be a WatermarkStrategy",
                "Use WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5))",
            )
        return self._add(TimestampsAndWatermarksTransformation(
            name="Timestamps/Watermarks", inputs=[self._node], watermark_strategy=watermark_strategy))

    def window_all(self, window_assigner: WindowAssigner) -> AllWindowedStream:
        return AllWindowedStream(self, window_assigner)

    def time_window_all(self, size: SizeLike, slide: SizeLike | None = None) -> AllWindowedStream:
        """Tumbling or sliding time window over all records (one subtask), following the environment's time
        characteristic: :meth:`KeyedStream.time_window` without a key (Flink's ``timeWindowAll``)."""
        return self.window_all(_time_assigner(self._env, size, slide))

    def count_window_all(self, size: int, slide: int | None = None) -> AllWindowedStream:
        """Tumbling or sliding count window over all records (one subtask): :meth:`KeyedStream.count_window`
        without a key (Flink's ``countWindowAll``)."""
        return _count_windowed(self.window_all, size, slide, "count_window_all")

    def window(self, window_assigner: WindowAssigner) -> WindowedStream:
        """Windows per key need a keyed stream (Flink has no ``DataStream.window`` either)."""
        raise JobDefinitionError(
            "window", window_assigner, "needs a keyed stream",
            "Call .key_by(...) first for windows per key, or use .window_all(...) for one window over all records")

    def process(self, func: Any, output_type: Any = None) -> SingleOutputStreamOperator:
        """Run a ProcessFunction on this non-keyed stream: ``process_element(value, ctx)`` per record, with
        ``ctx.timestamp()``, ``ctx.timer_service().current_processing_time()`` / ``current_watermark()``; yield
        ``(output_tag, value)`` for a side output.  No keyed state, no timers (they raise, as in PyFlink): for
        those ``key_by(...).process(KeyedProcessFunction)``.  It keeps no state and chains like a flat_map; both
        runtimes run it (engine/operators/process.py)."""
        output_type = check_type_info(output_type, "output_type")
        if not isinstance(func, ProcessFunction):
            if isinstance(func, KeyedProcessFunction):
                raise JobDefinitionError(
                    "func", func, "is a KeyedProcessFunction, which needs a keyed stream (keyed state and timers)",
                    "Call .key_by(...) first, or subclass engine.ProcessFunction for a non-keyed stream")
            raise JobDefinitionError("func", func, "must be a ProcessFunction instance on a non-keyed DataStream",
                                     "Subclass engine.ProcessFunction and implement process_element(value, ctx)")
        return self._add(MapTransformation(name="Process", inputs=[self._node], kind="process", fn=func,
                                           output_type=output_type))

    def add_async(self, async_function: Any, timeout: SizeLike, capacity: int = 100,
                  ordered: bool = True) -> SingleOutputStreamOperator:
        """Async I/O for enrichment calls (Flink's AsyncDataStream.orderedWait / unorderedWait)."""
        if not hasattr(async_function, "async_invoke"):
            raise JobDefinitionError("async_function", async_function, "must define `async def async_invoke(value)`")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise JobDefinitionError("capacity", capacity, "must be an int >= 1")
        return self._add(AsyncTransformation(name="AsyncWait", inputs=[self._node], async_function=async_function,
                                             timeout_ms=positive_millis(timeout, "timeout"), capacity=capacity,
                                             ordered=ordered))

    # -- sinks ---------------------------------------------------------------------------------
    def sink_to(self, sink: Any) -> DataStream:
        type_info = declared_output_type(self._node)
        if type_info is not None and callable(getattr(sink, "set_input_type", None)):
            sink.set_input_type(type_info)  # Flink's InputTypeConfigurable (a text FileSink writes toString)
        node = SinkTransformation(name=f"Sink({type(sink).__name__})", inputs=[self._node], sink=sink)
        self._env._register_sink(node)
        return DataStream(self._env, node)

    add_sink = sink_to

    def print(self, sink_identifier: str | None = None) -> DataStream:
        """Print every record on a line, as PyFlink does: a record of a declared type (``output_type``,
        ``type_info``) the way Java's ``toString`` shows it (``(hi,0,5,4)`` for a ``Types.TUPLE``), any
        other with Python's ``str``."""
        type_info = declared_output_type(self._node)
        if sink_identifier is not None and not isinstance(sink_identifier, str):
            raise JobDefinitionError("sink_identifier", sink_identifier, "must be a string (it leads every line)")
        return self.sink_to(PrintSink(sink_identifier=sink_identifier) if type_info is None
                            else _TypedPrintSink(type_info, sink_identifier))

    def write_files(self, path: str, format: str = "parquet") -> DataStream:
        """Write to a local or ``s3://`` folder; exactly-once under checkpointing (two-phase commit).  ``format``:
        ``parquet``, ``jsonl``, or ``text`` (a line per record: Java's ``toString`` of a declared type, else
        Python's ``str``)."""
        return self.sink_to(FileSink(path, format=format))  # FileSink refuses a format it cannot write

    def execute_and_collect(self, job_name: str = "collect", limit: int | None = None) -> CollectedRecords:
        """Run the job (bounded input) and return this stream's records: a list that is also PyFlink's
        ``CloseableIterator`` (``with stream.execute_and_collect() as results:``, ``next(results)``).  As in Flink,
        the job also runs the sinks added since the previous job (``print()`` ...), and consumes them: a later
        job does not rerun them."""
        result = self._env._execute_collect(self._node, job_name)
        return CollectedRecords(result if limit is None else result[:limit])

    # -- partitioning and chaining (PyFlink names; engine/graph/partitioners.py, engine/graph/plan.py) --------
    def forward(self) -> DataStream:
        """Records go to the next operator's subtask of the same index; the plan refuses it when the next
        operator's parallelism differs (Flink: "Forward partitioning does not allow change of parallelism")."""
        return self._partitioned("Forward", Partitioning.FORWARD)

    def shuffle(self) -> DataStream:
        """Each record goes to a uniformly random subtask of the next operator."""
        return self._partitioned("Shuffle", Partitioning.SHUFFLE)

    def rescale(self) -> DataStream:
        """Round-robin to the subset of the next operator's subtasks this subtask is wired to, as Flink wires a
        pointwise edge (parallelism 2 -> 4: subtask 0 feeds 0 and 1, subtask 1 feeds 2 and 3)."""
        return self._partitioned("Rescale", Partitioning.RESCALE)

    def partition_custom(self, partitioner: Any, key_selector: Any) -> DataStream:
        """Each record goes to subtask ``partitioner.partition(key_selector(record), num_partitions)`` of the
        next operator (``num_partitions`` = its parallelism); ``partitioner`` may be a ``Partitioner`` or a plain
        ``f(key, num_partitions)``, ``key_selector`` a KeySelector, a callable or a field (as for ``key_by``).  A
        record whose index is not an int in ``[0, num_partitions)``, or whose partitioner or key selector raises,
        becomes a dead letter (stage ``partition_custom``)."""
        fn = check_callable(partitioner, "partitioner", "partition")
        if is_field(key_selector):
            key = FieldKeySelector(key_selector).get_key
        else:
            key = check_callable(key_selector, "key_selector", "get_key")
        custom = CustomPartitioning(fn, key, getattr(partitioner, "__qualname__", type(partitioner).__name__))
        return DataStream(self._env, PartitionTransformation(name="CustomPartition", inputs=[self._node],
                                                             partitioning=Partitioning.CUSTOM, key_selector=custom))

    def _partitioned(self, name: str, partitioning: Partitioning) -> DataStream:
        return DataStream(self._env, PartitionTransformation(name=name, inputs=[self._node], partitioning=partitioning))

    def disable_chaining(self) -> DataStream:
        """Run this operator in a task of its own: chained neither to its producer nor to its consumers."""
        self._node.chaining = "never"
        return self

    def start_new_chain(self) -> DataStream:
        """Start a new chain at this operator: not chained to its producer (its consumers may chain to it)."""
        self._node.chaining = "head"
        return self

    def set_max_parallelism(self, max_parallelism: int) -> DataStream:
        """This operator's upper bound of parallelism: building the plan refuses a larger one.  Key groups are
        the job's (``env.set_max_parallelism``): Sluice keeps one number of key groups for all keyed state."""
        if isinstance(max_parallelism, bool) or not isinstance(max_parallelism, int) or max_parallelism < 1:
            raise JobDefinitionError("max_parallelism", max_parallelism, "must be an int >= 1")
        self._node.max_parallelism = max_parallelism
        return self

    def force_non_parallel(self) -> DataStream:
        """Parallelism and max parallelism 1 for this operator (PyFlink's ``force_non_parallel``)."""
        self._node.parallelism = 1
        self._node.max_parallelism = 1
        return self

    def set_description(self, description: str) -> DataStream:
        """Free text about the operator, shown in ``env.get_execution_plan()``."""
        if not isinstance(description, str):
            raise JobDefinitionError("description", description, "must be a str")
        self._node.description_text = description
        return self

    def set_uid_hash(self, uid_hash: str) -> DataStream:
        """Flink's user-provided operator hash (32 hex digits): in Sluice, the id this operator's state is stored
        under, like ``uid`` (which it replaces), so state saved under that id is matched on restore."""
        if not isinstance(uid_hash, str) or len(uid_hash) != 32 or any(c not in "0123456789abcdefABCDEF"
                                                                      for c in uid_hash):
            raise JobDefinitionError("uid_hash", uid_hash, "must be 32 hexadecimal digits (Flink's operator hash)")
        self._node.uid = uid_hash.lower()
        return self

    def slot_sharing_group(self, slot_sharing_group: Any) -> DataStream:
        """Accepted for porting and otherwise without effect: Sluice has no task slots (the local runtime runs
        every subtask in threads of one process, Spark schedules its own tasks)."""
        name = slot_sharing_group if isinstance(slot_sharing_group, str) else getattr(
            slot_sharing_group, "get_name", lambda: None)()
        if not isinstance(name, str) or not name:
            raise JobDefinitionError("slot_sharing_group", slot_sharing_group,
                                     "must be a non-empty str (a slot sharing group's name)")
        return self

    def set_buffer_timeout(self, timeout_millis: int) -> DataStream:
        """Accepted for porting (-1, 0 or a positive number of ms) and otherwise without effect: the local
        runtime ships a subtask's output buffers after every step (``bundle_size`` records, a runtime option),
        the Spark runtime once per epoch (``epoch_records``)."""
        if isinstance(timeout_millis, bool) or not isinstance(timeout_millis, int) or timeout_millis < -1:
            raise JobDefinitionError("timeout_millis", timeout_millis, "must be an int >= -1")
        return self

    def get_execution_environment(self) -> StreamExecutionEnvironment:
        return self._env

    def get_execution_config(self) -> Any:
        """The environment's ExecutionConfig (engine/api/execution_config.py), as PyFlink's."""
        return self._env.get_config()

    def _add(self, node: Transformation) -> SingleOutputStreamOperator:
        return SingleOutputStreamOperator(self._env, node)


class SingleOutputStreamOperator(DataStream):
    """A stream produced by an operator that may also have side outputs."""

    def get_side_output(self, output_tag: OutputTag) -> DataStream:
        if not isinstance(output_tag, OutputTag):
            raise JobDefinitionError("output_tag", output_tag, "must be an OutputTag")
        node = SideOutputTransformation(name=f"SideOutput({output_tag.tag_id})", inputs=[self._node], tag=output_tag)
        return DataStream(self._env, node)


class KeyedStream(DataStream):
    """A stream partitioned by key (key groups); windows on it are per key."""

    def __init__(self, env: StreamExecutionEnvironment, node: Transformation, key_selector: Callable[[Any], Any]) -> None:
        super().__init__(env, node)
        self._key_selector = key_selector

    def window(self, window_assigner: WindowAssigner) -> WindowedStream:
        return WindowedStream(self, self._key_selector, window_assigner)

    # -- partitioning and chaining: a KeyedStream is partitioned by its key, and is no operator ----------------
    def _not_on_keyed(self, method: str, hint: str) -> Any:
        raise JobDefinitionError("KeyedStream", method, "is not supported on a KeyedStream (as in PyFlink)", hint)

    def forward(self) -> DataStream:
        return self._not_on_keyed("forward", "Cannot override partitioning for KeyedStream: key_by already partitions")

    def shuffle(self) -> DataStream:
        return self._not_on_keyed("shuffle", "Cannot override partitioning for KeyedStream: key_by already partitions")

    def rescale(self) -> DataStream:
        return self._not_on_keyed("rescale", "Cannot override partitioning for KeyedStream: key_by already partitions")

    def partition_custom(self, partitioner: Any, key_selector: Any) -> DataStream:
        return self._not_on_keyed("partition_custom",
                                  "Cannot override partitioning for KeyedStream: call it before key_by, or instead")

    def disable_chaining(self) -> DataStream:
        return self._not_on_keyed("disable_chaining", "Call it on the operator after key_by (map, process, ...)")

    def start_new_chain(self) -> DataStream:
        return self._not_on_keyed("start_new_chain", "Call it on the operator after key_by (map, process, ...)")

    def set_max_parallelism(self, max_parallelism: int) -> DataStream:
        return self._not_on_keyed("set_max_parallelism", "Call it on the operator after key_by (map, process, ...)")

    def force_non_parallel(self) -> DataStream:
        return self._not_on_keyed("force_non_parallel", "Call it on the operator after key_by (map, process, ...)")

    def set_uid_hash(self, uid_hash: str) -> DataStream:
        return self._not_on_keyed("set_uid_hash", "Call it on the operator after key_by (map, process, ...)")

    def set_buffer_timeout(self, timeout_millis: int) -> DataStream:
        return self._not_on_keyed("set_buffer_timeout", "Call it on the operator after key_by (map, process, ...)")


    def time_window(self, size: SizeLike, slide: SizeLike | None = None) -> WindowedStream:
        """Tumbling or sliding time window following the environment's time characteristic (seed 000)."""
        return self.window(_time_assigner(self._env, size, slide))

    def count_window(self, size: int, slide: int | None = None) -> WindowedStream:
        """Tumbling: GlobalWindows + PurgingTrigger(CountTrigger(size)); sliding: GlobalWindows +
        CountEvictor(size) + CountTrigger(slide) (seed 000, Flink's Java API)."""
        return _count_windowed(self.window, size, slide)


    # -- keyed processing (engine/operators/keyed_process.py) ---------------------------------------
    def process(self, func: Any, output_type: Any = None) -> SingleOutputStreamOperator:
        """Run a KeyedProcessFunction: ``process_element(value, ctx)`` per record and ``on_timer(timestamp, ctx)``
        per timer, with keyed state from ``open(runtime_context)``; yield ``(output_tag, value)`` for a side
        output.  State and timers are in checkpoints and savepoints; both runtimes run it.
        """
        check_type_info(output_type, "output_type")
        if not isinstance(func, KeyedProcessFunction):
            raise JobDefinitionError(
                "func", func, "must be a KeyedProcessFunction instance on a KeyedStream",
                "Subclass engine.KeyedProcessFunction and implement process_element(value, ctx) (and on_timer)"
                + ("; a ProcessFunction runs on a stream without key_by" if isinstance(func, ProcessFunction) else ""))
        return self._keyed_process(func, "process", "KeyedProcess", output_type)

    def reduce(self, func: Any) -> SingleOutputStreamOperator:
        """Rolling reduce: per record, the key's reduced value so far (``func(previous, record)``), emitted."""
        if not isinstance(func, ReduceFunction) and not callable(func):
            raise JobDefinitionError("func", func, "must be a ReduceFunction or a callable (a, b) -> c")
        return self._rolling(ReduceAggregate(func), "reduce", user_function=func)

    def sum(self, field: int | str = 0) -> SingleOutputStreamOperator:
        """Rolling sum of ``field`` (a tuple position or dict key): the key's FIRST record with ``field`` replaced
        by the sum so far, per record (Flink's SumAggregator)."""
        return self._rolling_builtin("sum", field)

    def min(self, field: int | str = 0) -> SingleOutputStreamOperator:
        """Rolling minimum of ``field``: the key's FIRST record with ``field`` replaced by the minimum so far (the
        other fields are not those of the minimal record: that is :meth:`min_by`)."""
        return self._rolling_builtin("min", field)

    def max(self, field: int | str = 0) -> SingleOutputStreamOperator:
        """Rolling maximum of ``field``, like :meth:`min`."""
        return self._rolling_builtin("max", field)

    def min_by(self, field: int | str = 0) -> SingleOutputStreamOperator:
        """Rolling: the whole record with the smallest ``field`` so far, the first one on ties."""
        return self._rolling_builtin("min_by", field)

    def max_by(self, field: int | str = 0) -> SingleOutputStreamOperator:
        """Rolling: the whole record with the largest ``field`` so far, the first one on ties."""
        return self._rolling_builtin("max_by", field)

    def _rolling_builtin(self, kind: str, field: Any) -> SingleOutputStreamOperator:
        if not is_field(field):
            raise JobDefinitionError("field", field, "must be a tuple position (an int >= 0) or a dict key (a "
                                     "non-empty str)", f"e.g. .{kind}(1) or .{kind}('amount')")
        check_field_of_input(self._node, field)
        return self._rolling(builtin_aggregation(kind, field), kind)

    def _rolling(self, aggregate: Any, kind: str, user_function: Any = None) -> SingleOutputStreamOperator:
        # the result has the input's type, as in PyFlink
        return self._keyed_process(RollingAggregation(aggregate, kind, user_function), kind,
                                   f"Keyed({kind})", declared_output_type(self._node))

    def _keyed_process(self, func: Any, description: str, name: str, output_type: Any) -> SingleOutputStreamOperator:
        node = KeyedProcessTransformation(name=name, inputs=[self._node], key_selector=self._key_selector,
                                          function=func, description=description, output_type=output_type)
        return SingleOutputStreamOperator(self._env, node)


def _time_assigner(env: StreamExecutionEnvironment, size: SizeLike, slide: SizeLike | None) -> Any:
    processing = env.get_stream_time_characteristic() == TimeCharacteristic.ProcessingTime
    if slide is None:
        return (TumblingProcessingTimeWindows if processing else TumblingEventTimeWindows).of(size)
    return (SlidingProcessingTimeWindows if processing else SlidingEventTimeWindows).of(size, slide)


def _count_windowed(window: Callable[[Any], Any], size: int, slide: int | None, where: str = "count_window") -> Any:
    for name, value in (("size", size), ("slide", slide)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise JobDefinitionError(name, value, f"must be an int >= 1 (a number of elements) in {where}(size, slide)")
    windowed = window(GlobalWindows.create())
    if slide is None:
        return windowed.trigger(PurgingTrigger.of(CountTrigger.of(size)))
    return windowed.evictor(CountEvictor.of(size)).trigger(CountTrigger.of(slide))


class TimeCharacteristic:
    """Flink's (deprecated but still meaningful for ``time_window``) time characteristic."""

    EventTime = "EventTime"
    ProcessingTime = "ProcessingTime"
    IngestionTime = "IngestionTime"


class CollectedRecords(list):
    """``execute_and_collect``'s result.  The job has ended and every record is here, so it is a list; it is also
    what PyFlink returns, a ``CloseableIterator``: ``next()`` walks it once, ``close()`` and ``with`` work (there
    is nothing left to release: the job and its collect sink are done)."""

    def __init__(self, records: Any = ()) -> None:
        super().__init__(records)
        self._position = 0

    def __next__(self) -> Any:
        if self._position >= len(self):
            raise StopIteration
        self._position += 1
        return self[self._position - 1]

    def close(self) -> None:
        self._position = len(self)

    def __enter__(self) -> CollectedRecords:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class _TypedPrintSink(PrintSink):
    """A PrintSink that renders each record with its declared TypeInformation (Flink's toString)."""

    def __init__(self, type_info: Any, sink_identifier: str | None = None) -> None:
        super().__init__(sink_identifier=sink_identifier)
        self.type_info = type_info

    def write(self, values: Any, epoch: int = 0) -> None:
        super().write([self.type_info.format_value(v) for v in values], epoch)


def accepts_arity(fn: Callable[..., Any], n: int) -> bool:
    """Whether ``fn`` can be called with ``n`` positional arguments (decided once, at build time)."""
    try:
        inspect.signature(fn).bind(*([None] * n))
        return True
    except (TypeError, ValueError):
        return False


def as_iterable(result: Any) -> Iterable[Any]:
    return () if result is None else result
