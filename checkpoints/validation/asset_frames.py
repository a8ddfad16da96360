"""Which validation asset each derived frame feeds, and what of it reaches Great Expectations.

Shared by the two engines of :mod:`checkpoints.validation.runner` (pandas) and
:mod:`checkpoints.validation.spark_frames` (Spark), so both name assets, keep columns and build the
per-file layout frame the same way.  It imports Great Expectations (through the suite builder's asset
names): the Spark path imports it on the driver only, never in a Python worker.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from checkpoints.validation import frames as F
from checkpoints.validation.suite_builder import sessions_asset, state_asset, timers_asset


def asset_of(task: F.FileTask, kind: str) -> str:
    """The asset (suite) a frame of ``kind`` derived from ``task``'s file belongs to."""
    if kind == F.TIMERS:
        return timers_asset(task.operator_uid)
    if kind == F.SESSIONS:
        return sessions_asset(task.operator_uid)
    return state_asset(task.operator_uid, task.state_name or "")


def used_columns(expectations: list[Any], available: list[str]) -> list[str] | None:
    """The columns ``expectations`` read, in frame order; None when one names a column the frame
    lacks (GX must see the whole frame to report it) or none names a column (table-level only)."""
    used: set[str] = set()
    for expectation in expectations:
        for attr in ("column", "column_A", "column_B"):
            name = getattr(expectation, attr, None)
            if isinstance(name, str):
                used.add(name)
        used.update(getattr(expectation, "column_list", None) or ())
    if not used or not used <= set(available):
        return None
    return [c for c in available if c in used]


def file_row(task: F.FileTask, types: str) -> dict[str, Any]:
    """One row of an operator's files frame: the file's place and rows, its column types as read and as expected."""
    return {"file_index": task.file_index, "operator": task.operator_uid, "path": task.path, "table": task.table, "subtask": task.subtask,
            "rows": task.rows, "column_types": types, "expected_column_types": F.expected_column_types(task)}


def files_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The per-file layout frame (``file_row`` rows) in pandas: small, one row per state file."""
    columns = ["file_index", "operator", "path", "table", "subtask", "rows", "column_types", "expected_column_types"]
    return pd.DataFrame(rows, columns=columns)
