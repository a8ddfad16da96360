"""Per-split timestamps and watermarks in a source subtask (Flink's ``ProgressiveTimestampsAndWatermarks``).

ARCHITECTURE section 4: watermark generators run *per source split*.  A
source subtask reading several splits keeps one timestamp assigner and one
:class:`~engine.watermarks.generators.WatermarkGenerator` per split and
combines the splits' watermarks the way Flink's ``WatermarkOutputMultiplexer``
does (:class:`~engine.watermarks.multi_input.CombinedWatermarkStatus`): the
subtask watermark is the minimum over non-idle splits, it never regresses, and
the subtask is IDLE when every split is idle.  Watermarks emitted from
``on_event`` (punctuated generators) are combined at once; periodic ones after
every split had its ``on_periodic_emit``.

Every method returns the stream elements to emit, **in order** -- a record
first, then any watermark its generator produced from it; an ACTIVE status
before the first record or watermark after IDLE, because records never flow
between IDLE and ACTIVE (seed 004).  End of bounded input emits
MAX_WATERMARK.  The class is pure: processing time comes from the injected
clock.

A timestamp assigner that raises, or returns something other than an int of
ms, does not fail the job: the record goes to the dead-letter callback (with
the error) and is counted in :attr:`num_dead_letters`.

:meth:`snapshot` records each split's generator progress, watermark and idle
flag as JSON data, so a restored subtask does not emit lower watermarks than
before the failure.

``monitored=True`` is for a source whose splits come and go (a monitored folder,
``read_files(..., monitor_interval=...)``), and is the one place both runtimes
take these two rules from:

* **a finished split counts before it leaves.**  :meth:`on_split_finished` only
  marks the split; it is released at the next :meth:`on_periodic_emit`, after its
  generator's periodic watermark has been combined.  A file often fits in one
  read, and the next may be minutes away: released at once, its records would
  never move event time.  When the last splits leave together, the subtask's
  watermark is the highest of theirs, so it does not depend on the order they
  finished in (one after another, each would have carried it there).  The
  local runtime's epoch mode and the Spark runtime both emit at epoch ends
  only, so the release waits for the epoch's end there too, and a finished
  split's watermark is the one its epoch reports.
* **a subtask with nothing to read follows the strategy's idleness.**  With no
  split left, and ``with_idleness(d)`` in the strategy, the subtask goes IDLE
  once ``d`` has passed without records, by the rule of
  :class:`~engine.watermarks.generators.WatermarksWithIdleness` (the first
  periodic check without records starts the period; seed 004).  Without
  idleness it keeps its last watermark and holds consumers back.  A new split
  makes it ACTIVE again.  The Spark runtime's driver follows the same rule per
  subtask (engine/runtime/spark/splits.py, a hold channel in its valve).

  Measured on PyFlink 2.3 (a monitored ``FileSource`` at parallelism 2): this is
  what ``assign_timestamps_and_watermarks`` with a Python timestamp assigner
  does.  A Java strategy given to ``fromSource`` (per split, in the source)
  holds back the same way without idleness, and marks a reader that never had a
  split idle, but never marks idle a reader whose splits all finished: its
  split outputs, released, are not idle, and the reader is idle only when they
  and its main output both are.  Sluice keeps the first: with ``with_idleness``
  a quiet folder does not hold event time back for good.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Sequence

from engine.clock import Clock
from engine.elements import (
    MAX_WATERMARK,
    MIN_WATERMARK,
    StreamElement,
    StreamRecord,
    Watermark,
    WatermarkStatus,
    WatermarkStatusElement,
)
from engine.errors import CorruptSnapshotError, IllegalStateError, UnsupportedFormatVersion
from engine.state import codec
from engine.watermarks.generators import (
    AscendingTimestampsWatermarks,
    BoundedOutOfOrdernessWatermarks,
    NoWatermarksGenerator,
    WatermarkGenerator,
    WatermarkOutput,
)
from engine.watermarks.multi_input import CombinedWatermarkStatus, PartialWatermark
from engine.watermarks.strategy import TimestampAssigner, WatermarkStrategy, _CallableTimestampAssigner

FORMAT_VERSION = 1
#: the timestamp a generator sees for a record that has none (Flink's TimestampAssigner.NO_TIMESTAMP)
NO_TIMESTAMP = MIN_WATERMARK
#: generators whose on_event only raises a running maximum (or does nothing) and never emits: on_records
#: may hand them a bundle's highest timestamp once (exact types: a subclass may override on_event)
_MAX_TRACKING_GENERATORS = (BoundedOutOfOrdernessWatermarks, AscendingTimestampsWatermarks, NoWatermarksGenerator)


@dataclass(frozen=True, slots=True)
class TimestampAssignmentFailure:
    """A record whose timestamp could not be assigned, and why."""

    split_id: Hashable
    value: Any
    record_timestamp: int | None
    error: BaseException


class _SplitOutput(WatermarkOutput):
    """A split's view of the multiplexer; ``immediate`` outputs combine at once, deferred ones on periodic emit."""

    __slots__ = ("_owner", "_partial", "_immediate")

    def __init__(self, owner: SourceTimestampsAndWatermarks, partial: PartialWatermark, immediate: bool) -> None:
        self._owner = owner
        self._partial = partial
        self._immediate = immediate

    def emit_watermark(self, watermark: Watermark) -> None:
        self._partial.set_watermark(watermark.timestamp)
        if self._immediate:
            self._owner._update_combined()

    def mark_idle(self) -> None:
        self._partial.idle = True
        if self._immediate:
            self._owner._update_combined()

    def mark_active(self) -> None:
        self._partial.idle = False
        if self._immediate:
            self._owner._update_combined()


class _Split:
    __slots__ = ("assigner", "generator", "partial", "immediate", "deferred")

    def __init__(self, owner: SourceTimestampsAndWatermarks, assigner: TimestampAssigner, generator: WatermarkGenerator) -> None:
        self.assigner = assigner
        self.generator = generator
        self.partial = PartialWatermark()
        self.immediate = _SplitOutput(owner, self.partial, immediate=True)
        self.deferred = _SplitOutput(owner, self.partial, immediate=False)


class SourceTimestampsAndWatermarks:
    """Timestamp assignment and per-split watermark generation for one source subtask."""

    def __init__(
        self,
        strategy: WatermarkStrategy,
        clock: Clock,
        on_dead_letter: Callable[[TimestampAssignmentFailure], None] | None = None,
        *,
        monitored: bool = False,
        auto_watermark_interval_ms: int | None = None,
    ) -> None:
        self._strategy = strategy
        #: ``env.get_config().set_auto_watermark_interval``: None asks the generators at every periodic emission,
        #: 0 never (periodic watermarks off), n at most once per n ms of ``clock`` (engine/api/execution_config.py)
        self._interval_ms = auto_watermark_interval_ms
        self._last_periodic_ms: int | None = None
        #: see the module docstring: splits come and go (a monitored folder)
        self._monitored = bool(monitored)
        #: finished splits that leave at the next periodic emission (monitored only)
        self._finishing: list[Hashable] = []
        #: the inactivity period of a monitored subtask without splits: records seen, at the last check, and since
        self._records_seen = 0
        self._records_at_check = 0
        self._empty_since_ms: int | None = None
        self._clock = clock
        self._on_dead_letter = on_dead_letter
        self._uses_source_timestamp = not strategy.has_timestamp_assigner()
        self._splits: dict[Hashable, _Split] = {}
        self._combined = CombinedWatermarkStatus()
        self._status = WatermarkStatus.ACTIVE
        self._pending: list[StreamElement] = []
        self._ended = False
        #: restored after event time had ended: end_of_input announces MAX_WATERMARK once more (see end_of_input)
        self._ended_before_restore = False
        self.num_dead_letters = 0

    # ---- splits -----------------------------------------------------------------------------------

    def add_split(self, split_id: Hashable) -> None:
        """Start tracking a split (also done implicitly by its first record)."""
        if split_id in self._splits:
            raise IllegalStateError(f"split {split_id!r} is already assigned to this source subtask")
        split = _Split(self, self._strategy.create_timestamp_assigner(self._clock), self._strategy.create_watermark_generator(self._clock))
        self._splits[split_id] = split
        self._combined.add(split_id, split.partial)
        if self._status.is_idle() and self._monitored:
            self._update_combined()  # a subtask idle for want of splits is active again: ACTIVE before any record

    def on_split_finished(self, split_id: Hashable) -> list[StreamElement]:
        """A split is exhausted: it no longer holds the subtask's watermark back (monitored: from the next
        periodic emission on, which still counts its progress; see the module docstring)."""
        if split_id not in self._splits:
            raise IllegalStateError(f"unknown split {split_id!r}; assigned: {list(self._splits)!r}")
        if self._monitored:
            if split_id not in self._finishing:
                self._finishing.append(split_id)
            return self._take()
        self._release(split_id)
        return self._take()

    def _release(self, split_id: Hashable) -> None:
        del self._splits[split_id]
        self._combined.remove(split_id)
        self._update_combined()

    @property
    def split_ids(self) -> list[Hashable]:
        return list(self._splits)

    # ---- records and time -----------------------------------------------------------------------------

    def on_record(self, split_id: Hashable, value: Any, record_timestamp: int | None = None) -> list[StreamElement]:
        """Assign the record's timestamp and run its split's generator.

        Returns ``[StreamRecord, ...watermark/status elements]``, or ``[]`` when
        the record went to the dead-letter output.
        """
        self._check_not_ended("on_record")
        split = self._splits.get(split_id)
        if split is None:
            self.add_split(split_id)
            split = self._splits[split_id]
        try:
            timestamp = self._extract_timestamp(split.assigner, value, record_timestamp)
        except Exception as error:  # noqa: BLE001 - user code: any failure is a dead letter, the job goes on
            self.num_dead_letters += 1
            if self._on_dead_letter is not None:
                self._on_dead_letter(TimestampAssignmentFailure(split_id, value, record_timestamp, error))
            return []
        if split.partial.idle:
            # records never flow while idle: the split (and, if needed, the subtask) turns active first
            split.partial.idle = False
            self._update_combined()
        self._records_seen += 1
        self._pending.append(StreamRecord(value, timestamp))
        split.generator.on_event(value, NO_TIMESTAMP if timestamp is None else timestamp, split.immediate)
        return self._take()

    def on_records(self, split_id: Hashable, values: Sequence[Any]) -> list[StreamElement]:
        """:meth:`on_record` for each value of a split's bundle (no source timestamps), in one loop.

        Returns exactly the elements the calls one by one would, in the same order.  Generators
        whose ``on_event`` can emit (punctuated, idleness-wrapped, user generators) are called
        per record so every watermark still follows the record that produced it.  The built-in
        bounded-out-of-orderness (and ascending) generators only track the highest timestamp in
        ``on_event`` and never emit from it, and no-watermarks generators do nothing, so those
        see one ``on_event`` with the bundle's highest timestamp: their state afterwards is the
        same, and nothing could have been observed in between.
        """
        self._check_not_ended("on_records")
        split = self._splits.get(split_id)
        if split is None:
            self.add_split(split_id)
            split = self._splits[split_id]
        generator = split.generator
        if split.partial.idle or type(generator) not in _MAX_TRACKING_GENERATORS:
            out: list[StreamElement] = []
            for value in values:
                out.extend(self.on_record(split_id, value))
            return out
        assigner = split.assigner
        extract = assigner.extract_timestamp
        if type(assigner) is _CallableTimestampAssigner and assigner.takes_record_timestamp:
            extract = assigner.fn  # called as (value, None) below: the adapter's own call, one level less
        uses_source_timestamp = self._uses_source_timestamp
        records: list[StreamElement] = []
        append = records.append
        highest: int | None = None
        last_value: Any = None
        for value in values:
            try:
                timestamp = extract(value, None)
                if type(timestamp) is not int or not MIN_WATERMARK <= timestamp <= MAX_WATERMARK:
                    if timestamp is None and uses_source_timestamp:
                        append(StreamRecord(value, None))
                        continue
                    timestamp = self._check_timestamp(timestamp)
            except Exception as error:  # noqa: BLE001 - user code: any failure is a dead letter, the job goes on
                self.num_dead_letters += 1
                if self._on_dead_letter is not None:
                    self._on_dead_letter(TimestampAssignmentFailure(split_id, value, None, error))
                continue
            append(StreamRecord(value, timestamp))
            if highest is None or timestamp > highest:
                highest = timestamp
                last_value = value
        if highest is not None:
            self._records_seen += 1
            generator.on_event(last_value, highest, split.immediate)
        if self._pending:  # nothing is pending between calls; kept general should that change
            records.extend(self._take())
        return records

    def on_highest_timestamp(self, split_id: Hashable, highest: int) -> bool:
        """What :meth:`on_records` does to the split's generator for a bundle whose every record has a valid
        timestamp and whose highest is ``highest``, for a caller that stamped the bundle itself (the Spark
        runtime's column path, engine/runtime/spark/column_path.py).  False, with nothing changed, when the
        generator must see each record (:meth:`on_records` calls it per record then): the caller takes the
        element path for that bundle."""
        self._check_not_ended("on_highest_timestamp")
        split = self._splits.get(split_id)
        if split is None:
            self.add_split(split_id)
            split = self._splits[split_id]
        if split.partial.idle or type(split.generator) not in _MAX_TRACKING_GENERATORS:
            return False
        self._records_seen += 1
        split.generator.on_event(None, highest, split.immediate)  # a max-tracking generator reads the timestamp only
        return True

    def on_periodic_emit(self) -> list[StreamElement]:
        """Every auto-watermark interval: ask each split's generator, then combine once."""
        if self._ended:
            return []
        if self._periodic_due():
            for split in self._splits.values():
                split.generator.on_periodic_emit(split.deferred)
        self._update_combined()
        if self._finishing:
            finishing, self._finishing = self._finishing, []
            leaving = max(self._splits[split_id].partial.watermark for split_id in finishing)
            for split_id in finishing:
                del self._splits[split_id]
                self._combined.remove(split_id)
            if self._splits:
                self._update_combined()
            elif leaving > self._combined.combined_watermark:
                # the last splits left together: event time is where the furthest of them got, whatever order
                # they finished in (as the valve flushes to the max when all channels go idle, seed 004)
                self._combined.restore_combined(leaving, False)
                self._pending.append(Watermark(leaving))
        if self._monitored and not self._splits:
            self._check_idle_without_splits()
        else:
            self._empty_since_ms = None
        return self._take()

    def _periodic_due(self) -> bool:
        if self._interval_ms is None:
            return True
        if self._interval_ms == 0:
            return False
        now_ms = self._clock.now_ms()
        if self._last_periodic_ms is not None and now_ms - self._last_periodic_ms < self._interval_ms:
            return False
        self._last_periodic_ms = now_ms
        return True

    def _check_idle_without_splits(self) -> None:
        """A monitored subtask without splits: IDLE once the strategy's idle timeout passed without records."""
        timeout = self._strategy.idle_timeout_ms
        if timeout is None or self._status.is_idle():
            return
        if self._records_seen != self._records_at_check:
            self._records_at_check = self._records_seen
            self._empty_since_ms = None
            return
        now_ms = self._clock.now_ms()
        if self._empty_since_ms is None:
            self._empty_since_ms = now_ms
        elif now_ms - self._empty_since_ms > timeout:
            self._status = WatermarkStatus.IDLE
            self._pending.append(WatermarkStatusElement(WatermarkStatus.IDLE))

    def end_of_input(self) -> list[StreamElement]:
        """Bounded input is exhausted: event time ends (MAX_WATERMARK, preceded by ACTIVE if idle)."""
        if self._ended:
            if self._ended_before_restore:
                # this subtask ended event time before the snapshot; after a rescale the consumers' channels
                # from it are new and start at MIN_WATERMARK (StatusWatermarkValve.restore), so without this
                # they would hold every downstream watermark back for good.  Repeating it is harmless: a
                # channel already at MAX_WATERMARK ignores it.
                self._ended_before_restore = False
                return [Watermark(MAX_WATERMARK)]
            return []
        self._ended = True
        if self._status.is_idle():
            self._status = WatermarkStatus.ACTIVE
            self._pending.append(WatermarkStatusElement(WatermarkStatus.ACTIVE))
        if self._combined.combined_watermark < MAX_WATERMARK:
            self._combined.restore_combined(MAX_WATERMARK, False)
            self._pending.append(Watermark(MAX_WATERMARK))
        return self._take()

    # ---- views ------------------------------------------------------------------------------------------

    @property
    def current_watermark(self) -> int:
        return self._combined.combined_watermark

    @property
    def status(self) -> WatermarkStatus:
        return self._status

    def is_ended(self) -> bool:
        return self._ended

    def split_watermarks(self) -> dict[Hashable, tuple[int, bool]]:
        """Each unfinished split's current (watermark, idle): what the job status and metrics show per split.
        Read from other threads (the control API) while the task runs: a snapshot of the dict first."""
        return {split_id: (split.partial.watermark, split.partial.idle) for split_id, split in list(self._splits.items())}

    # ---- snapshot ---------------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Per-split generator progress, watermark and idle flag, plus the combined output, as JSON data."""
        return {
            "format_version": FORMAT_VERSION,
            "combined_watermark": self._combined.combined_watermark,
            "status": self._status.value,
            "ended": self._ended,
            "num_dead_letters": self.num_dead_letters,
            "splits": [
                {
                    "split_id": codec.encode(split_id),
                    "watermark": split.partial.watermark,
                    "idle": split.partial.idle,
                    "generator": split.generator.snapshot_state(),
                }
                for split_id, split in self._splits.items()
            ],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`snapshot` on a fresh instance; emits nothing."""
        if self._splits or self._ended:
            raise IllegalStateError("restore() must be called on a fresh SourceTimestampsAndWatermarks")
        if not isinstance(state, dict):
            raise CorruptSnapshotError(f"source watermark state must be an object, got {type(state).__name__}")
        if state.get("format_version") != FORMAT_VERSION:
            raise UnsupportedFormatVersion(
                f"source watermark state format_version {state.get('format_version')!r} is not supported "
                f"(this Sluice reads {FORMAT_VERSION})"
            )
        try:
            for raw in state["splits"]:
                split_id = codec.decode(raw["split_id"])
                self.add_split(split_id)
                split = self._splits[split_id]
                split.generator.restore_state(raw["generator"])
                split.partial.watermark = int(raw["watermark"])
                split.partial.idle = bool(raw["idle"])
            status = WatermarkStatus(state["status"])
            self._combined.restore_combined(int(state["combined_watermark"]), status.is_idle())
            self._status = status
            self._ended = self._ended_before_restore = bool(state["ended"])
            self.num_dead_letters = int(state["num_dead_letters"])
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptSnapshotError(f"source watermark state is malformed ({exc!r})") from exc

    # ---- internals ----------------------------------------------------------------------------------------

    def _extract_timestamp(self, assigner: TimestampAssigner, value: Any, record_timestamp: int | None) -> int | None:
        timestamp = assigner.extract_timestamp(value, record_timestamp)
        if timestamp is None and self._uses_source_timestamp:
            return None  # no assigner and no source timestamp: a record without event time
        return self._check_timestamp(timestamp)

    @staticmethod
    def _check_timestamp(timestamp: Any) -> int:
        """The assigner's result as an int of ms, or TypeError/ValueError saying what is wrong with it."""
        if isinstance(timestamp, bool) or not isinstance(timestamp, numbers.Integral):
            raise TypeError(
                f"timestamp assigner returned {timestamp!r} ({type(timestamp).__name__}); it must return an int of "
                "milliseconds since the epoch"
            )
        timestamp = int(timestamp)
        if not MIN_WATERMARK <= timestamp <= MAX_WATERMARK:
            raise ValueError(f"timestamp assigner returned {timestamp}, outside the 64-bit range of event time")
        return timestamp

    def _update_combined(self) -> None:
        advanced = self._combined.update_combined_watermark()
        if self._combined.is_idle():
            if self._status.is_active():
                self._status = WatermarkStatus.IDLE
                self._pending.append(WatermarkStatusElement(WatermarkStatus.IDLE))
            return
        if self._status.is_idle() and self._splits:
            self._status = WatermarkStatus.ACTIVE
            self._pending.append(WatermarkStatusElement(WatermarkStatus.ACTIVE))
        if advanced:
            self._pending.append(Watermark(self._combined.combined_watermark))

    def _take(self) -> list[StreamElement]:
        out, self._pending = self._pending, []
        return out

    def _check_not_ended(self, what: str) -> None:
        if self._ended:
            raise IllegalStateError(f"{what} after end_of_input(): the source subtask has already ended event time")

    def __repr__(self) -> str:
        return (
            f"SourceTimestampsAndWatermarks({self._strategy!r}, splits={len(self._splits)}, "
            f"watermark={self._combined.combined_watermark}, status={self._status.value})"
        )
