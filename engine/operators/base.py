"""The operator contract both runtimes drive (Flink's ``OneInputStreamOperator`` + ``Output``).

An operator is pure logic (STYLE section 3): elements arrive as method calls, results
leave through the :class:`Output` it was opened with, processing time comes from the
injected :class:`~engine.clock.Clock`.  The local pipelined runtime calls it element by
element; the Spark runtime calls it once per key group per epoch with
:meth:`OneInputStreamOperator.process_batch`.  Both must see the same results.

Lifecycle, in the order a runtime calls it::

    op.open(context, output)                      # builds state backend and timer service
    op.initialize_state(snapshots, key_group_range)   # only when restoring; before any element
    op.process_element / process_batch / process_watermark / process_watermark_status
      / advance_processing_time                   # any interleaving, one thread at a time
    op.snapshot_state(checkpoint_id) -> OperatorSnapshot    # cheap, copy-on-write (seed 002)
    op.notify_checkpoint_complete(id) / notify_checkpoint_aborted(id)
    op.finish()                                   # end of input: flush (after MAX_WATERMARK)
    op.close()                                    # release resources, always called

A snapshot is taken synchronously and *materialized* later (seed 002, "asynchronous
state snapshots"): :meth:`OperatorSnapshot.materialize` turns it into a
:class:`MaterializedOperatorSnapshot` — Arrow tables plus a small JSON-able dict — which
is what checkpoint storage writes and what :meth:`initialize_state` accepts back.
Nothing in it is pickled (STYLE section 9).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

import pyarrow as pa

from engine.api.functions import OutputTag
from engine.clock import Clock, ManualClock
from engine.elements import StreamRecord, TupleColumns, Watermark, WatermarkStatus
from engine.errors import CorruptSnapshotError, MalformedRecordError, UnsupportedFormatVersion
from engine.state.key_groups import DEFAULT_MAX_PARALLELISM, KeyGroupRange, key_group_range_for_operator

#: version of the MaterializedOperatorSnapshot layout (metadata dict + table names)
OPERATOR_SNAPSHOT_FORMAT_VERSION = 1


class Output(ABC):
    """Where an operator's results go (Flink's ``Output``); implemented by each runtime and the test harness."""

    @abstractmethod
    def collect(self, record: StreamRecord) -> None:
        """Emit a record to the main output."""

    @abstractmethod
    def collect_side(self, tag: OutputTag, record: StreamRecord) -> None:
        """Emit a record to the side output named by ``tag`` (late data, ProcessWindowFunction outputs)."""

    @abstractmethod
    def emit_watermark(self, watermark: Watermark) -> None:
        """Forward a watermark downstream, after the timers it made due have fired (seed 004)."""

    @abstractmethod
    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        """Forward an ACTIVE/IDLE status downstream."""

    #: whether :meth:`collect_columns` takes :class:`~engine.elements.TupleColumns` as they are (a Spark
    #: task's router stages them without building a record each); for any other output an operator builds
    #: the records at once, which is cheaper than columns turned into records here
    takes_columns: bool = False

    def collect_batch(self, records: list[StreamRecord]) -> None:
        """Emit records to the main output, in order, as one buffer.  An operator calls it only where no side
        output can come between the records.  Default: :meth:`collect` for each."""
        collect = self.collect
        for record in records:
            collect(record)

    def collect_columns(self, batch: TupleColumns | list[StreamRecord]) -> None:
        """Emit one fired window's results, as columns (only to an output that ``takes_columns``) or as
        records.  Default: the records the batch stands for, through :meth:`collect_batch`."""
        self.collect_batch(batch.records() if type(batch) is TupleColumns else batch)


class ListOutput(Output):
    """An Output that keeps everything in memory, in order: for tests and for the Spark runtime's per-key-group calls."""

    def __init__(self) -> None:
        #: main output records and watermarks/statuses, in emission order
        self.elements: list[Any] = []
        #: side outputs by tag id, each in emission order
        self.side_outputs: dict[str, list[StreamRecord]] = {}

    def collect(self, record: StreamRecord) -> None:
        self.elements.append(record)

    def collect_side(self, tag: OutputTag, record: StreamRecord) -> None:
        self.side_outputs.setdefault(tag.tag_id, []).append(record)

    def emit_watermark(self, watermark: Watermark) -> None:
        self.elements.append(watermark)

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        self.elements.append(status)

    def records(self) -> list[StreamRecord]:
        return [e for e in self.elements if isinstance(e, StreamRecord)]

    def clear(self) -> None:
        self.elements.clear()
        self.side_outputs.clear()


class Metrics:
    """A minimal counter registry (name -> int), shared by the operators of a subtask.

    Counter names used by the window operator: ``num_late_records_dropped``,
    ``num_dead_letter_records``, ``num_records_in``.
    """

    __slots__ = ("counters",)

    def __init__(self) -> None:
        self.counters: dict[str, int] = {}

    def inc(self, name: str, n: int = 1) -> None:
        self.counters[name] = self.counters.get(name, 0) + n

    def get(self, name: str) -> int:
        return self.counters.get(name, 0)

    def __repr__(self) -> str:
        return f"Metrics({self.counters})"


DeadLetter = Callable[[Any, BaseException, str], None]


def key_failure(selector: Callable[[Any], Any], value: Any, error: BaseException, dead_letter: DeadLetter) -> None:
    """Send ``value``, whose key ``selector`` could not give, to ``dead_letter``: the stage is ``key_selector``, or
    what the selector's ``dead_letter_of(value)`` says (the untagged record and the input of a connected stream,
    engine/operators/co_functions.py).  Both runtimes' keyed edges (engine/runtime/keyed_edges.py) and the keyed
    process operator send keyless records through here."""
    explain = getattr(selector, "dead_letter_of", None)
    if explain is None:
        dead_letter(value, error, dead_letter_stage(error))
    else:
        record, stage = explain(value)
        dead_letter(record, error, stage)


def dead_letter_stage(error: BaseException) -> str:
    """The stage a record the key selector rejected is dead-lettered under: ``key_selector``, or the stage a
    :class:`MalformedRecordError` names (a built-in aggregate's field check, engine/windowing/aggregations.py)."""
    return error.stage if isinstance(error, MalformedRecordError) else "key_selector"


def checking_key_selector(key_selector: Any, aggregate: Any) -> Any:
    """``key_selector``, made to call ``aggregate.check_element(value)`` first when the aggregate has one (the
    built-in sum/min/max/min_by/max_by, engine/windowing/aggregations.py "Bad data": it raises
    MalformedRecordError for a field it cannot fold); ``key_selector`` itself otherwise.  The window and keyed
    process operators send what their key selector rejects to the dead-letter output (under
    :func:`dead_letter_stage`), so such records go there in every window operator variant and in the rolling
    aggregates, before any window or accumulator sees them."""
    check = getattr(aggregate, "check_element", None)
    if key_selector is None or check is None:
        return key_selector
    field = getattr(aggregate, "field", None)

    # a closure, not a class with __call__: it runs once per record on every element path, and the common
    # case (an int or float field) costs one subscript and two type tests before the user's selector
    def select(value: Any) -> Any:
        try:
            x = value[field]
        except Exception:  # noqa: BLE001 - not subscriptable by the field: the full check decides
            check(value)
        else:
            t = type(x)
            if t is not int and t is not float:
                check(value)
        return key_selector(value)

    return select


def _raise_dead_letter(value: Any, error: BaseException, stage: str) -> None:
    """Default dead-letter policy when a runtime provides none: fail loudly, naming the stage."""
    raise error


@dataclass
class OperatorContext:
    """What the runtime tells an operator about where and when it runs (Flink's StreamingRuntimeContext).

    ``dead_letter(record_value, error, stage)`` receives records the operator cannot
    process for data reasons (key selector raised, no timestamp for an event-time
    window); the operator counts them and carries on.  User-function exceptions are
    not dead letters: they fail the task and the runtime restarts from a checkpoint.
    """

    operator_id: str
    subtask_index: int = 0
    parallelism: int = 1
    max_parallelism: int = DEFAULT_MAX_PARALLELISM
    key_group_range: KeyGroupRange | None = None
    clock: Clock = field(default_factory=ManualClock)
    metrics: Metrics = field(default_factory=Metrics)
    dead_letter: DeadLetter = _raise_dead_letter

    def __post_init__(self) -> None:
        if self.key_group_range is None:
            self.key_group_range = key_group_range_for_operator(
                self.max_parallelism, self.parallelism, self.subtask_index
            )


@dataclass(frozen=True)
class MaterializedOperatorSnapshot:
    """An operator's state as data: Arrow tables plus a JSON-able dict (what storage writes, what restore reads).

    Table names: ``keyed/<state name>`` for each keyed state (layout of
    engine.state.snapshot) and ``timers`` (layout of engine.timers).  ``metadata``
    holds ``format_version``, ``operator_id``, ``operator_class``, ``checkpoint_id``,
    ``max_parallelism``, ``key_group_range`` ([start, end]) and operator-specific
    entries such as ``current_watermark``.
    """

    metadata: dict[str, Any]
    tables: dict[str, pa.Table]

    @property
    def operator_id(self) -> str:
        return self.metadata["operator_id"]

    @property
    def key_group_range(self) -> KeyGroupRange:
        start, end = self.metadata["key_group_range"]
        return KeyGroupRange(start, end)

    def metadata_json(self) -> str:
        return json.dumps(self.metadata, sort_keys=True, separators=(",", ":"))

    @staticmethod
    def from_parts(metadata_json: str, tables: dict[str, pa.Table]) -> MaterializedOperatorSnapshot:
        """Rebuild from stored parts, refusing unknown format versions and missing fields."""
        try:
            metadata = json.loads(metadata_json)
        except ValueError as exc:
            raise CorruptSnapshotError(f"operator snapshot metadata is not JSON ({exc})") from exc
        check_snapshot_metadata(metadata)
        return MaterializedOperatorSnapshot(metadata, dict(tables))


def check_snapshot_metadata(metadata: Any) -> None:
    if not isinstance(metadata, dict):
        raise CorruptSnapshotError(f"operator snapshot metadata must be a JSON object, got {type(metadata).__name__}")
    version = metadata.get("format_version")
    if version != OPERATOR_SNAPSHOT_FORMAT_VERSION:
        raise UnsupportedFormatVersion(
            f"operator snapshot format_version {version!r}; this Sluice reads {OPERATOR_SNAPSHOT_FORMAT_VERSION}"
        )
    for name in ("operator_id", "max_parallelism", "key_group_range"):
        if name not in metadata:
            raise CorruptSnapshotError(f"operator snapshot metadata lacks {name!r}")


class OperatorSnapshot(ABC):
    """A state snapshot taken at a barrier, not yet written anywhere (copy-on-write; seed 002).

    Further processing does not change what :meth:`materialize` returns.
    """

    @abstractmethod
    def materialize(self) -> MaterializedOperatorSnapshot:
        """Build the Arrow tables and metadata; may run later, off the processing path."""


class OneInputStreamOperator(ABC):
    """Base of single-input operators; subclasses override what they need."""

    context: OperatorContext
    output: Output

    def open(self, context: OperatorContext, output: Output) -> None:
        """Attach to a subtask; called once before anything else."""
        self.context = context
        self.output = output

    @abstractmethod
    def process_element(self, record: StreamRecord) -> None: ...

    def process_batch(self, records: Sequence[StreamRecord]) -> None:
        """Process records that arrived with no watermark or barrier between them (default: one by one)."""
        for record in records:
            self.process_element(record)

    def process_watermark(self, watermark: Watermark) -> None:
        self.output.emit_watermark(watermark)

    def process_watermark_status(self, status: WatermarkStatus) -> None:
        self.output.emit_watermark_status(status)

    def advance_processing_time(self, now_ms: int) -> None:  # noqa: B027 - optional hook
        """Processing time reached ``now_ms``: fire due processing-time timers."""

    def snapshot_state(self, checkpoint_id: int) -> OperatorSnapshot:
        return _EmptySnapshot(self._snapshot_metadata(checkpoint_id))

    def snapshot_now(self, checkpoint_id: int) -> MaterializedOperatorSnapshot:
        """``snapshot_state(checkpoint_id).materialize()`` for a caller that processes nothing in between;
        an operator may then skip the copy that keeps an asynchronous snapshot unchanged."""
        return self.snapshot_state(checkpoint_id).materialize()

    def initialize_state(
        self,
        snapshots: Iterable[OperatorSnapshot | MaterializedOperatorSnapshot],
        key_group_range: KeyGroupRange | None = None,
    ) -> None:  # noqa: B027 - stateless operators ignore it
        """Restore from the snapshots of one or more former subtasks (rescaling passes several)."""

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:  # noqa: B027 - optional hook
        pass

    def notify_checkpoint_aborted(self, checkpoint_id: int) -> None:  # noqa: B027 - optional hook
        pass

    def finish(self) -> None:  # noqa: B027 - optional hook
        """End of input; called after MAX_WATERMARK was processed."""

    def close(self) -> None:  # noqa: B027 - optional hook
        pass

    def release(self) -> None:
        """After ``close``: drop every reference the operator holds, so its state is freed at once.

        An operator, its timer service and its contexts refer to each other, so without this a
        closed operator's state waits for Python's cycle collector, which a Spark task pauses
        (engine/runtime/gc_pause.py).  The operator cannot be used afterwards.
        """
        attributes = getattr(self, "__dict__", None)
        if attributes is not None:
            attributes.clear()

    def _snapshot_metadata(self, checkpoint_id: int) -> dict[str, Any]:
        ctx = self.context
        krange = ctx.key_group_range
        return {
            "format_version": OPERATOR_SNAPSHOT_FORMAT_VERSION,
            "operator_id": ctx.operator_id,
            "operator_class": type(self).__name__,
            "checkpoint_id": checkpoint_id,
            "max_parallelism": ctx.max_parallelism,
            "key_group_range": [krange.start_key_group, krange.end_key_group],
        }


class _EmptySnapshot(OperatorSnapshot):
    def __init__(self, metadata: dict[str, Any]) -> None:
        self._metadata = metadata

    def materialize(self) -> MaterializedOperatorSnapshot:
        return MaterializedOperatorSnapshot(dict(self._metadata), {})


def materialize_all(
    snapshots: Iterable[OperatorSnapshot | MaterializedOperatorSnapshot],
) -> list[MaterializedOperatorSnapshot]:
    """Accept both forms in ``initialize_state``; checks each one's metadata."""
    result = []
    for snap in snapshots:
        if isinstance(snap, OperatorSnapshot):
            snap = snap.materialize()
        if not isinstance(snap, MaterializedOperatorSnapshot):
            raise CorruptSnapshotError(f"cannot restore an operator from a {type(snap).__name__}")
        check_snapshot_metadata(snap.metadata)
        result.append(snap)
    return result
