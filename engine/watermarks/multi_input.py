"""The minimum across several logical inputs: two-input and N-input operators, and the splits of a source.

Seed 004: a two-input operator keeps ``input1Watermark`` and
``input2Watermark`` and forwards ``min`` of them whenever that minimum rises
(``processWatermark1/2``); ``AbstractStreamOperatorV2.reportWatermark`` does the
same over N inputs.  Using the smallest input watermark can never be wrong.

:class:`CombinedWatermarkStatus` is that rule with idleness, as Flink later
wrote it (``CombinedWatermarkStatus``, used by ``WatermarkOutputMultiplexer``
and by multi-input operators): an idle input does not hold the minimum back;
when every input is idle the combination is idle and does not advance.  An
input's watermark never decreases, and the combined watermark never regresses.
The same class combines the splits of one source subtask
(:mod:`engine.operators.timestamps_watermarks`).

Both classes are pure and return what changed instead of calling out.
"""

from __future__ import annotations

from typing import Any, Hashable

from engine.elements import MIN_WATERMARK, Watermark, WatermarkStatus
from engine.errors import CorruptSnapshotError, IllegalStateError, JobDefinitionError, UnsupportedFormatVersion

COMBINER_FORMAT_VERSION = 1


class PartialWatermark:
    """One input's contribution: its highest watermark so far and whether it is idle."""

    __slots__ = ("watermark", "idle")

    def __init__(self, watermark: int = MIN_WATERMARK, idle: bool = False) -> None:
        self.watermark = watermark
        self.idle = idle

    def set_watermark(self, timestamp: int) -> None:
        """A watermark makes the input active; a lower one than before does not lower it."""
        self.idle = False
        if timestamp > self.watermark:
            self.watermark = timestamp

    def __repr__(self) -> str:
        return f"PartialWatermark({self.watermark}, idle={self.idle})"


class CombinedWatermarkStatus:
    """Minimum over the non-idle partial watermarks, idle when all are idle (Flink's CombinedWatermarkStatus)."""

    __slots__ = ("_partials", "_combined_watermark", "_idle")

    def __init__(self) -> None:
        self._partials: dict[Hashable, PartialWatermark] = {}
        self._combined_watermark = MIN_WATERMARK
        self._idle = False

    def add(self, input_id: Hashable, partial: PartialWatermark | None = None) -> PartialWatermark:
        if input_id in self._partials:
            raise IllegalStateError(f"input {input_id!r} is already registered")
        partial = partial or PartialWatermark()
        self._partials[input_id] = partial
        return partial

    def remove(self, input_id: Hashable) -> None:
        self._partials.pop(input_id, None)

    def get(self, input_id: Hashable) -> PartialWatermark:
        try:
            return self._partials[input_id]
        except KeyError:
            raise IllegalStateError(f"unknown input {input_id!r}; registered: {list(self._partials)!r}") from None

    def __contains__(self, input_id: Hashable) -> bool:
        return input_id in self._partials

    def input_ids(self) -> list[Hashable]:
        return list(self._partials)

    @property
    def combined_watermark(self) -> int:
        return self._combined_watermark

    def is_idle(self) -> bool:
        return self._idle

    def update_combined_watermark(self) -> bool:
        """Recompute; True when the combined watermark advanced.  With no inputs nothing changes."""
        if not self._partials:
            return False
        active = [p.watermark for p in self._partials.values() if not p.idle]
        self._idle = not active
        if active:
            new_min = min(active)
            if new_min > self._combined_watermark:
                self._combined_watermark = new_min
                return True
        return False

    def restore_combined(self, combined_watermark: int, idle: bool) -> None:
        self._combined_watermark = combined_watermark
        self._idle = idle


class InputWatermarkCombiner:
    """Combines the watermarks of N logical inputs of one operator (inputs numbered from 1, as in Flink).

    ``report_watermark`` returns the new combined Watermark when the minimum
    rose, else None; ``report_watermark_status`` returns the combined status
    when it changed, plus a watermark if excluding or re-including an input
    moved the minimum.  Two-input operators use ``process_watermark1/2``.
    """

    __slots__ = ("_num_inputs", "_status", "_last_status")

    def __init__(self, num_inputs: int) -> None:
        if isinstance(num_inputs, bool) or not isinstance(num_inputs, int) or num_inputs < 1:
            raise JobDefinitionError("num_inputs", num_inputs, "must be an int >= 1")
        self._num_inputs = num_inputs
        self._status = CombinedWatermarkStatus()
        for input_id in range(1, num_inputs + 1):
            self._status.add(input_id)
        self._last_status = WatermarkStatus.ACTIVE

    @property
    def num_inputs(self) -> int:
        return self._num_inputs

    @property
    def combined_watermark(self) -> int:
        return self._status.combined_watermark

    @property
    def combined_status(self) -> WatermarkStatus:
        return self._last_status

    def input_watermark(self, input_id: int) -> int:
        return self._partial(input_id).watermark

    def report_watermark(self, watermark: Watermark, input_id: int) -> Watermark | None:
        self._partial(input_id).set_watermark(watermark.timestamp)
        return self._update()[0]

    def process_watermark1(self, watermark: Watermark) -> Watermark | None:
        return self.report_watermark(watermark, 1)

    def process_watermark2(self, watermark: Watermark) -> Watermark | None:
        return self.report_watermark(watermark, 2)

    def report_watermark_status(
        self, status: WatermarkStatus, input_id: int
    ) -> tuple[Watermark | None, WatermarkStatus | None]:
        """Returns (watermark to emit or None, status to emit or None); the status goes first when becoming active."""
        self._partial(input_id).idle = status.is_idle()
        return self._update()

    def _update(self) -> tuple[Watermark | None, WatermarkStatus | None]:
        advanced = self._status.update_combined_watermark()
        new_status = WatermarkStatus.IDLE if self._status.is_idle() else WatermarkStatus.ACTIVE
        status_change = None
        if new_status is not self._last_status:
            self._last_status = new_status
            status_change = new_status
        return (Watermark(self._status.combined_watermark) if advanced else None), status_change

    def _partial(self, input_id: int) -> PartialWatermark:
        if not 1 <= input_id <= self._num_inputs:
            raise IllegalStateError(f"invalid input id {input_id}; inputs are numbered 1..{self._num_inputs}")
        return self._status.get(input_id)

    def snapshot(self) -> dict[str, Any]:
        return {
            "format_version": COMBINER_FORMAT_VERSION,
            "combined_watermark": self._status.combined_watermark,
            "status": self._last_status.value,
            "inputs": [
                {"watermark": self._status.get(i).watermark, "idle": self._status.get(i).idle}
                for i in range(1, self._num_inputs + 1)
            ],
        }

    def restore(self, state: dict[str, Any]) -> None:
        if not isinstance(state, dict) or state.get("format_version") != COMBINER_FORMAT_VERSION:
            version = state.get("format_version") if isinstance(state, dict) else None
            raise UnsupportedFormatVersion(f"input watermark combiner format_version {version!r} is not supported")
        try:
            inputs = state["inputs"]
            if len(inputs) != self._num_inputs:
                raise ValueError(f"{len(inputs)} inputs in the snapshot, {self._num_inputs} in the operator")
            for i, raw in enumerate(inputs, start=1):
                partial = self._status.get(i)
                partial.watermark = int(raw["watermark"])
                partial.idle = bool(raw["idle"])
            status = WatermarkStatus(state["status"])
            self._status.restore_combined(int(state["combined_watermark"]), status.is_idle())
            self._last_status = status
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptSnapshotError(f"input watermark combiner state is malformed ({exc})") from exc
