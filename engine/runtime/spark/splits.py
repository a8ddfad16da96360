"""The Spark job master's split tracker: every source split's position and watermark, and the valve over them.

Per split, keyed by (source uid, split id) (snapshot_metadata.source_split_key: split ids are unique within
their source only), the driver carries from epoch to epoch where the next epoch starts reading and the
split's watermark-generator snapshot, and judges idleness (:meth:`SplitTracker.idle_by_time`).  The split
reports of an epoch feed a SplitWatermarkValve with one channel per split (seed 004; a finished split counts
as MAX_WATERMARK when the input is bounded): its output is W(n) (:meth:`SplitTracker.advance`).  A monitored
folder (``read_files(..., monitor_interval=...)``) is listed again once its interval has passed: a new file
gets a channel, a finished one releases its channel (engine/watermarks/split_valve.py).  Each split's state
is a :class:`SplitEntry`.

A monitored source's subtask with no split to read holds event time back at its last watermark, as the local
runtime's source subtask does (``SourceTimestampsAndWatermarks(monitored=True)``, whose rule the tracker follows
per subtask, :class:`SubtaskHold`): the splits a subtask reads are the ones a hash of their id gives it
(engine/io/source.py ``monitored_subtask``), and while it has none its hold channel stands in the valve, at the
subtask's watermark, until a new split reaches it or the strategy's idleness marks it idle.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from engine.elements import MAX_WATERMARK, MIN_WATERMARK, Watermark, WatermarkStatus
from engine.errors import JobDefinitionError
from engine.io.source import monitored_subtask, source_monitor_interval_ms
from engine.runtime.snapshot_metadata import source_split_key
from engine.watermarks.split_valve import SplitWatermarkValve
from engine.watermarks.valve import ValveOutput


class _LastWatermark(ValveOutput):
    def __init__(self) -> None:
        self.watermark = MIN_WATERMARK

    def emit_watermark(self, watermark: Watermark) -> None:
        self.watermark = watermark.timestamp

    def emit_watermark_status(self, status: WatermarkStatus) -> None:
        pass


@dataclass(slots=True)
class SplitEntry:
    """What the driver carries for one split between epochs (driver memory only: a checkpoint stores the
    offset under ``source_positions`` and the rest under ``watermarks.splits``, checkpointing.py)."""

    #: the source vertex reading it, the source's operator uid, and the split itself
    vertex: int
    source_uid: str
    split: Any
    #: the source's WatermarksWithIdleness timeout (ms), or None
    idle_timeout: int | None
    #: where the next epoch starts reading (None: at the beginning) and the watermark generator's snapshot
    offset: Any = None
    watermarks: Any = None
    finished: bool = False
    idle: bool = False
    #: the split's own watermark after the last epoch that read it
    watermark: int = MIN_WATERMARK
    #: processing time (ms) of the first epoch without records since the split last read some, or None (idle_by_time)
    inactive_since: int | None = None


@dataclass(slots=True)
class SubtaskHold:
    """A monitored source subtask with no split to read: its hold channel in the valve, and its inactivity
    period, which starts with the hold (the epoch that read its last records, or the first one it had nothing
    to read in): the subtask is idle once the strategy's idle timeout has passed since, as the local source
    stage's first periodic check without records starts the period (SourceTimestampsAndWatermarks
    ``_check_idle_without_splits``).  The epoch's start stands for its time: the next epoch may come long after
    (a Spark job under load), and starting the period there would hold event time back for an epoch more."""

    channel: int
    inactive_since: int
    idle: bool = False


class SplitTracker:
    """The splits of a plan's source vertices (``sources``), their valve channels and the valve."""

    def __init__(self, sources: list[Any]) -> None:
        #: split key -> its entry: where the next epoch starts, the carried watermark-generator snapshot, its flags
        self.entries: dict[str, SplitEntry] = {}
        #: split key -> its channel in the valve
        self.channel: dict[str, int] = {}
        source_of_uid: dict[str, Any] = {}
        for v in sources:
            uid = v.head.operator_uid()
            if source_of_uid.setdefault(uid, v) is not v:
                raise JobDefinitionError("uid", uid, "must name one source only: its splits' positions are "
                                         "stored under it", "Give each source its own .uid(...)")
            for split in sorted(v.head.source.discover_splits(), key=lambda s: s.split_id):
                key = source_split_key(uid, split.split_id)
                if key in self.entries:
                    raise JobDefinitionError("split_id", split.split_id, f"must be unique within source {uid!r}")
                self.channel[key] = len(self.channel)
                self.entries[key] = self._entry(v, uid, split)
        self.bounded = all(v.head.source.is_bounded() for v in sources)
        #: monitored sources (read_files(..., monitor_interval=...)): vertex id -> (vertex, interval, next listing)
        self.monitored: dict[int, list[Any]] = {
            v.id: [v, interval, 0] for v in sources
            if (interval := source_monitor_interval_ms(v.head.source)) is not None}
        self._valve_output = _LastWatermark()
        self.valve = SplitWatermarkValve(max(1, len(self.channel)), self._valve_output)
        if not self.channel and self.monitored:
            self.valve.release_channel(0)  # an empty monitored folder: the placeholder must not hold time back
        #: (monitored source vertex, subtask index) -> the subtask's watermark, as its source stage combines it
        self.subtask_watermark: dict[tuple[int, int], int] = {}
        #: (monitored source vertex, subtask index) -> the hold of a subtask with no split to read; added at the
        #: first epoch (after a restore too: holds are not in the valve's snapshot)
        self.holds: dict[tuple[int, int], SubtaskHold] = {}

    @staticmethod
    def _entry(v: Any, uid: str, split: Any) -> SplitEntry:
        return SplitEntry(v.id, uid, split, getattr(v.source_watermark_strategy, "idle_timeout_ms", None))

    def all_finished(self) -> bool:
        return all(s.finished for s in self.entries.values())

    def unfinished_of(self, vertex_id: int) -> list[SplitEntry]:
        """The entries of a source vertex's splits still to read, in channel order."""
        return [s for s in self.entries.values() if s.vertex == vertex_id and not s.finished]

    def subtask_of(self, split: SplitEntry) -> tuple[int, int]:
        """(vertex, subtask index) of the monitored source subtask that reads ``split``."""
        v = self.monitored[split.vertex][0]
        return split.vertex, monitored_subtask(split.split.split_id, v.parallelism)

    def discover(self, now_ms: int) -> None:
        """List each monitored source whose interval has passed; a new split gets a valve channel and is read
        from this epoch on (engine/watermarks/split_valve.py).  A subtask the new split goes to stops holding."""
        for entry in self.monitored.values():
            v, interval, due = entry
            if now_ms < due:
                continue
            entry[2] = now_ms + interval
            uid = v.head.operator_uid()
            for split in sorted(v.head.source.discover_splits(), key=lambda s: s.split_id):
                key = source_split_key(uid, split.split_id)
                if key not in self.entries:
                    self.channel[key] = self.valve.add_channel()
                    self.entries[key] = self._entry(v, uid, split)
                    hold = self.holds.pop(self.subtask_of(self.entries[key]), None)
                    if hold is not None:
                        self.valve.release_channel(hold.channel)
        self._hold_empty_subtasks(now_ms)

    def _hold_empty_subtasks(self, now_ms: int) -> None:
        """Every monitored subtask without a split to read and without a hold gets one: at its watermark, or
        where the output stands (a subtask that never read, or one restored without splits, holds it there)."""
        busy = {self.subtask_of(s) for s in self.entries.values() if s.vertex in self.monitored and not s.finished}
        for vertex_id, (v, _, _) in self.monitored.items():
            for index in range(v.parallelism):
                sub = (vertex_id, index)
                if sub not in busy and sub not in self.holds:
                    watermark = max(self.subtask_watermark.get(sub, MIN_WATERMARK), self._valve_output.watermark)
                    self.holds[sub] = SubtaskHold(self.valve.add_hold_channel(watermark), now_ms)

    def barrier_view(self) -> dict[str, SplitEntry]:
        """A copy of every split's entry as it stands now (an entry's fields are replaced by :meth:`advance`, never
        mutated in place): what a barrier taken before the next reads records (job.py ``SparkJob.barrier``)."""
        return {key: replace(entry) for key, entry in self.entries.items()}

    def release_finished(self) -> None:
        """After a restore: finished splits of a monitored source no longer count in the valve."""
        for key, split in self.entries.items():
            if split.finished and split.vertex in self.monitored:
                self.valve.release_channel(self.channel[key])

    def restore_valve(self, state: Any, watermark: int) -> None:
        """The valve as a snapshot left it, its output at the restored ``watermark``."""
        self.valve.restore(state)
        self._valve_output.watermark = watermark

    def idle_by_time(self, split: SplitEntry, records: int, now_ms: int) -> bool:
        """Idleness judged on the driver, once per epoch (the epoch is the periodic-emit interval).

        The split's generator is rebuilt from its snapshot in every epoch's task, and a restored
        idleness generator restarts its inactivity period (right after a failure, wrong between
        epochs), so the driver keeps the period: WatermarksWithIdleness's rule — the first check
        without records starts it, a later one more than the timeout after that start is idle
        (engine/watermarks/generators.py, seed 004) — with the epoch's processing time.
        """
        timeout = split.idle_timeout
        if records:
            split.inactive_since = None
            return False
        if split.inactive_since is None:
            split.inactive_since = now_ms
            return False
        return timeout is not None and now_ms - split.inactive_since > timeout

    def advance(self, reports: list[dict], now_ms: int, watermark: int) -> int:
        """Feed an epoch's split reports to the valve; W(n), never below ``watermark`` (W(n-1))."""
        valve = self.valve
        leaving: list[int] = []
        for r in reports:
            split = self.entries[r["key"]]
            idle_by_time = self.idle_by_time(split, r["records"], now_ms)
            ch = self.channel[r["key"]]
            split.offset, split.watermarks, split.watermark = r["offset"], r["watermarks"], r["watermark"]
            if r["finished"]:
                split.finished = True
                if split.idle:
                    valve.input_watermark_status(WatermarkStatus.ACTIVE, ch)
                    split.idle = False
                if self.bounded:
                    valve.input_watermark(Watermark(MAX_WATERMARK), ch)
                elif split.vertex in self.monitored:
                    # the split's stage counted its progress before letting it go (SourceTimestampsAndWatermarks,
                    # monitored=True): the channel takes the watermark it left with, and leaves the valve with the
                    # epoch's other finished splits once every report is in
                    if r["watermark"] > MIN_WATERMARK:
                        valve.input_watermark(Watermark(r["watermark"]), ch)
                    leaving.append(ch)
                continue
            if r["idle"] or idle_by_time:
                if r["watermark"] > MIN_WATERMARK:
                    valve.input_watermark(Watermark(r["watermark"]), ch)
                if not split.idle:
                    valve.input_watermark_status(WatermarkStatus.IDLE, ch)
                    split.idle = True
            else:
                if split.idle:
                    valve.input_watermark_status(WatermarkStatus.ACTIVE, ch)
                    split.idle = False
                if r["watermark"] > MIN_WATERMARK:
                    valve.input_watermark(Watermark(r["watermark"]), ch)
        if self.monitored:
            self._follow_subtasks(reports, now_ms)
        valve.release_channels(leaving)
        if self.bounded and (not self.entries or self.all_finished()):
            return MAX_WATERMARK
        return max(watermark, self._valve_output.watermark)

    def _follow_subtasks(self, reports: list[dict], now_ms: int) -> None:
        """Each monitored subtask's watermark after the epoch, combined from its splits' reports as its source
        stage combines them (SourceTimestampsAndWatermarks(monitored=True): the minimum over its non-idle splits,
        never regressing; when its last splits leave together, the highest of theirs); a subtask left without
        splits gets a hold channel at that watermark, before its splits' channels leave.  A hold whose subtask
        read nothing for the idle timeout goes idle."""
        by_subtask: dict[tuple[int, int], list[tuple[SplitEntry, dict]]] = {}
        for r in reports:
            split = self.entries[r["key"]]
            if split.vertex in self.monitored:
                by_subtask.setdefault(self.subtask_of(split), []).append((split, r))
        for sub, hold in self.holds.items():
            timeout = getattr(self.monitored[sub[0]][0].source_watermark_strategy, "idle_timeout_ms", None)
            if not hold.idle and timeout is not None and now_ms - hold.inactive_since > timeout:
                hold.idle = True
                self.valve.input_watermark_status(WatermarkStatus.IDLE, hold.channel)
        for sub, splits in by_subtask.items():
            watermark = self.subtask_watermark.get(sub, MIN_WATERMARK)
            active = [split.watermark for split, _ in splits if not split.idle]
            if active:
                watermark = max(watermark, min(active))
            remaining = [split for split, _ in splits if not split.finished]
            if remaining:
                active = [split.watermark for split in remaining if not split.idle]
                if active:
                    watermark = max(watermark, min(active))
            else:
                watermark = max(watermark, max(r["watermark"] for _, r in splits if r["finished"]))
                if sub not in self.holds:
                    self.holds[sub] = SubtaskHold(self.valve.add_hold_channel(watermark), now_ms)
            self.subtask_watermark[sub] = watermark
