"""Reading the window transcripts (``*.yaml`` here): the pieces both the operator harness run
(test_window_scenarios.py) and the runtime run (test_window_scenarios_on_runtimes.py) build from one.

Spark's Python workers import this module by name (tests/conftest.py puts this folder on their path).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from engine.api.functions import OutputTag
from engine.elements import MAX_WATERMARK
from engine.windowing import assigners, evictors, triggers

HERE = Path(__file__).parent
SCENARIOS = sorted(HERE.glob("*.yaml"))
LATE = OutputTag("late")


class TranscriptMismatch(AssertionError):
    """The operator's (or a runtime's) behaviour differs from the transcript."""


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def make_assigner(spec: dict[str, Any]) -> assigners.WindowAssigner:
    kind = spec["type"]
    if kind == "global":
        return assigners.GlobalWindows.create()
    if kind == "tumbling_event_time":
        return assigners.TumblingEventTimeWindows.of(spec["size_ms"], spec.get("offset_ms", 0))
    if kind == "sliding_event_time":
        return assigners.SlidingEventTimeWindows.of(spec["size_ms"], spec["slide_ms"], spec.get("offset_ms", 0))
    if kind == "session_event_time":
        return assigners.EventTimeSessionWindows.with_gap(spec["gap_ms"])
    if kind == "tumbling_processing_time":
        return assigners.TumblingProcessingTimeWindows.of(spec["size_ms"])
    if kind == "sliding_processing_time":
        return assigners.SlidingProcessingTimeWindows.of(spec["size_ms"], spec["slide_ms"])
    if kind == "session_processing_time":
        return assigners.ProcessingTimeSessionWindows.with_gap(spec["gap_ms"])
    raise ValueError(f"unknown assigner type {kind!r} in scenario")


def make_trigger(spec: dict[str, Any] | None) -> triggers.Trigger | None:
    if spec is None:
        return None
    kind = spec["type"]
    if kind == "count":
        return triggers.CountTrigger.of(spec["max_count"])
    if kind == "purging_count":
        return triggers.PurgingTrigger.of(triggers.CountTrigger.of(spec["max_count"]))
    if kind == "continuous_event_time":
        return triggers.ContinuousEventTimeTrigger.of(spec["interval_ms"])
    raise ValueError(f"unknown trigger type {kind!r} in scenario")


def make_evictor(spec: dict[str, Any] | None) -> evictors.Evictor | None:
    if spec is None:
        return None
    if spec["type"] == "count":
        return evictors.CountEvictor.of(spec["max_count"], spec.get("do_evict_after", False))
    if spec["type"] == "time":
        return evictors.TimeEvictor.of(spec["size_ms"], spec.get("do_evict_after", False))
    raise ValueError(f"unknown evictor type {spec['type']!r} in scenario")


def timestamp(value: Any) -> int:
    """A transcript timestamp: an int of ms, or ``max`` (MAX_WATERMARK, the timestamp of GlobalWindow results)."""
    return MAX_WATERMARK if value == "max" else int(value)
