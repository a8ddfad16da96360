"""``Time`` and ``Duration`` where users import them (``from engine.api.time import Time``, also ``from engine
import Time``); they and the one conversion to ms live in engine/durations.py, low in the layering, so the
layers below the API use them without importing it."""

from __future__ import annotations

from engine.durations import Duration, SizeLike, Time, non_negative_millis, positive_millis, to_millis

__all__ = ["Duration", "SizeLike", "Time", "non_negative_millis", "positive_millis", "to_millis"]
