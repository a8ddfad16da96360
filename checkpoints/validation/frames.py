"""The frames a validation run checks: state, timers and session tables with computed columns.

Great Expectations checks one row (or one column pair) at a time, so every rule
that needs more than the stored columns gets a computed column here, and the
expectation then names the rule (ARCHITECTURE section 7):

- ``expected_key_group`` = ``key_group_for_encoded_key(key, max_parallelism)``
  (engine/state/key_groups.py, the stable XXH64 hash), ``file_kg_start`` /
  ``file_kg_end`` = the key-group range of the subtask that wrote the file;
- ``window_length`` = end - start and ``window_phase`` = (start - offset) mod slide,
  for tumbling and sliding assigners (seed 000: start = ts - (ts - offset) mod slide);
- ``cleanup_time`` = end - 1 + allowed lateness for event-time windows
  (WindowOperator.cleanup_time), next to the writing subtask's ``watermark``;
  a window whose cleanup time is <= the watermark was due to be purged
  (WindowOperator.is_window_late: ``cleanup_time(window) <= current_watermark``);
- ``event_timestamp`` = a timer's timestamp when it is an event-time timer: one
  at or before the watermark should have fired (seed 004, InternalTimerService.advance_watermark);
- ``acc_count`` / ``acc_min`` / ``acc_max``: accumulator fields by aggregate kind;
- ``value_chars``: the encoded value's length (for user bounds on state size per key);
- sessions: the merging-window-set's actual windows per key, sorted, with
  ``previous_window_end`` (cross-row: computed here so GE can name the overlap).

Derivation is per state file (:func:`derive_file`), which is what lets the
Spark path run the same code inside ``mapInArrow`` tasks: a key lives in one key
group, so one file holds all of a key's sessions.  It is columnar (Arrow compute
and numpy, the key hash in :mod:`engine.state.key_hash`): no Python
call per row except for JSON accumulator fields and session lists.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from engine.state.snapshot import SCHEMA_FIELDS
from engine.timers import EVENT_TIME, TIMER_SCHEMA_FIELDS

from engine.state.key_hash import key_groups_of
from checkpoints.validation.operator_config import (
    COUNT_TRIGGER_STATE,
    MERGING_WINDOW_SET_STATE,
    UNKNOWN,
    WindowOperatorFacts,
    state_name_of_table,
)

STATE = "state"
TIMERS = "timers"
SESSIONS = "sessions"

_F64 = pa.float64()
_I64 = pa.int64()
_STR = pa.string()

STATE_COLUMNS = pa.schema([
    ("key_group", _I64), ("key", _STR), ("namespace", _STR), ("window_start", _F64), ("window_end", _F64),
    ("value", _STR), ("value_num", _F64),
    ("expected_key_group", _I64), ("file_kg_start", _I64), ("file_kg_end", _I64), ("file_index", _I64),
    ("window_length", _F64), ("window_phase", _F64), ("cleanup_time", _F64), ("watermark", _F64),
    ("value_chars", _I64), ("acc_count", _F64), ("acc_min", _F64), ("acc_max", _F64),
])
TIMER_COLUMNS = pa.schema([
    ("key_group", _I64), ("key", _STR), ("namespace", _STR), ("timestamp", _I64), ("kind", _STR),
    ("expected_key_group", _I64), ("file_kg_start", _I64), ("file_kg_end", _I64), ("file_index", _I64),
    ("watermark", _F64), ("event_timestamp", _F64),
])
SESSION_COLUMNS = pa.schema([
    ("key_group", _I64), ("key", _STR), ("window_start", _F64), ("window_end", _F64),
    ("previous_window_end", _F64), ("cleanup_time", _F64), ("watermark", _F64), ("file_index", _I64),
])
COLUMNS = {STATE: STATE_COLUMNS, TIMERS: TIMER_COLUMNS, SESSIONS: SESSION_COLUMNS}

#: the stored layout each file must have (engine/state/snapshot.py, engine/timers.py)
EXPECTED_STATE_TYPES = ",".join(f"{f.name}:{f.type}" for f in SCHEMA_FIELDS)
EXPECTED_TIMER_TYPES = ",".join(f"{f.name}:{f.type}" for f in TIMER_SCHEMA_FIELDS)


@dataclass(frozen=True, slots=True)
class FileTask:
    """One state file to derive: plain data, sent to Spark tasks as JSON."""

    file_index: int
    operator_uid: str
    subtask: int
    table: str
    path: str
    rows: int
    kg_start: int
    kg_end: int
    max_parallelism: int
    watermark: int
    assigner_kind: str
    size_ms: Any
    slide_ms: Any
    offset_ms: Any
    is_event_time: Any
    merging: Any
    allowed_lateness_ms: Any
    aggregate_kind: str
    aggregate_field: Any
    accumulator_fields: dict[str, Any]
    trigger_kind: str

    @property
    def state_name(self) -> str | None:
        return state_name_of_table(self.table)

    def frame_kinds(self) -> tuple[str, ...]:
        """Which frames this file contributes rows to."""
        if self.state_name is None:
            return (TIMERS,)
        if self.state_name == MERGING_WINDOW_SET_STATE:
            return (STATE, SESSIONS)
        return (STATE,)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> FileTask:
        return FileTask(**json.loads(text))

    @staticmethod
    def of(index: int, facts: WindowOperatorFacts, subtask: int, key_group_range: tuple[int, int] | None,
           handle: Any) -> FileTask:
        start, end = key_group_range if key_group_range is not None else (0, facts.max_parallelism - 1)
        return FileTask(
            file_index=index, operator_uid=facts.uid, subtask=subtask, table=handle.table, path=handle.path,
            rows=handle.rows, kg_start=start, kg_end=end, max_parallelism=facts.max_parallelism,
            watermark=facts.watermark_of(subtask), assigner_kind=facts.assigner_kind, size_ms=facts.size_ms,
            slide_ms=facts.slide_ms, offset_ms=facts.offset_ms, is_event_time=facts.is_event_time,
            merging=facts.merging, allowed_lateness_ms=facts.allowed_lateness_ms,
            aggregate_kind=facts.aggregate_kind, aggregate_field=facts.aggregate_field,
            accumulator_fields=dict(facts.accumulator_fields), trigger_kind=facts.trigger_kind,
        )


def column_types(table: pa.Table) -> str:
    return ",".join(f"{f.name}:{f.type}" for f in table.schema)


def expected_column_types(task: FileTask) -> str:
    return EXPECTED_TIMER_TYPES if task.state_name is None else EXPECTED_STATE_TYPES


def expected_key_groups(keys: pd.Series | pa.Array | pa.ChunkedArray, max_parallelism: int) -> np.ndarray:
    """The stable key group of every encoded key (-1 for a null key), hashed in numpy (:mod:`engine.state.key_hash`)."""
    if isinstance(keys, pd.Series):
        keys = pa.array(keys, pa.string())
    return key_groups_of(keys, max_parallelism)


def _column(table: pa.Table, name: str, n: int, kind: pa.DataType) -> pa.Array:
    """Column ``name`` as one Arrow array of type ``kind`` (all null when the file lacks it)."""
    if name in table.column_names:
        column = table.column(name)
        array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
        return array if array.type == kind else array.cast(kind)
    return pa.nulls(n, kind)


def _floats(values: np.ndarray) -> pa.Array:
    """A float64 Arrow array with NaN as null (what pandas shows as NaN and Spark as null)."""
    return pa.array(values, _F64, from_pandas=True)


def _constant(value: Any, n: int, kind: pa.DataType) -> pa.Array:
    return pa.array(np.full(n, value, dtype=kind.to_pandas_dtype()), kind)


def derive_file(task: FileTask, table: pa.Table) -> dict[str, pa.Table]:
    """``{frame kind: rows}`` derived from one state file (see the module docstring), in the
    fixed Arrow schema of :data:`COLUMNS`: pandas converts each asset once, Spark tasks yield it."""
    n = table.num_rows
    key = _column(table, "key", n, _STR)
    common = {
        "key_group": pc.fill_null(_column(table, "key_group", n, _I64), -1),
        "key": key,
        "expected_key_group": pa.array(expected_key_groups(key, task.max_parallelism), _I64),
        "file_kg_start": _constant(task.kg_start, n, _I64),
        "file_kg_end": _constant(task.kg_end, n, _I64),
        "file_index": _constant(task.file_index, n, _I64),
        "watermark": _constant(float(task.watermark), n, _F64),
    }
    if task.state_name is None:
        return {TIMERS: _timer_frame(task, table, common, n)}
    state = _state_frame(task, table, common, n)
    out = {STATE: state}
    if task.state_name == MERGING_WINDOW_SET_STATE:
        out[SESSIONS] = _session_frame(task, state)
    return out


def _state_frame(task: FileTask, table: pa.Table, common: dict[str, Any], n: int) -> pa.Table:
    start = _column(table, "window_start", n, _F64)
    end = _column(table, "window_end", n, _F64)
    value = _column(table, "value", n, _STR)
    value_num = _column(table, "value_num", n, _F64)
    nan = np.full(n, np.nan)
    length, phase, cleanup = nan, nan, nan
    contents_hold_real_windows = task.merging is False and task.state_name != MERGING_WINDOW_SET_STATE
    if contents_hold_real_windows:
        start_np = start.to_numpy(zero_copy_only=False)
        end_np = end.to_numpy(zero_copy_only=False)
        length = end_np - start_np
        if isinstance(task.slide_ms, int) and isinstance(task.offset_ms, int) and task.assigner_kind.startswith(
                ("tumbling", "sliding")):
            phase = np.mod(start_np - task.offset_ms, task.slide_ms)
        if task.is_event_time is True and isinstance(task.allowed_lateness_ms, int):
            cleanup = end_np - 1 + task.allowed_lateness_ms
    count, lo, hi = _accumulators(task, value, value_num)
    columns = {
        "key_group": common["key_group"], "key": common["key"], "namespace": _column(table, "namespace", n, _STR),
        "window_start": start, "window_end": end, "value": value, "value_num": value_num,
        **{k: common[k] for k in ("expected_key_group", "file_kg_start", "file_kg_end", "file_index")},
        "window_length": _floats(length), "window_phase": _floats(phase), "cleanup_time": _floats(cleanup),
        "watermark": common["watermark"],
        "value_chars": pc.fill_null(pc.utf8_length(value), 0).cast(_I64),
        "acc_count": _floats(count), "acc_min": _floats(lo), "acc_max": _floats(hi),
    }
    return pa.Table.from_arrays([columns[f.name] for f in STATE_COLUMNS], schema=STATE_COLUMNS)


def _accumulators(task: FileTask, value: pa.Array, value_num: pa.Array) -> tuple[Any, Any, Any]:
    """``(count, min, max)`` columns of the accumulator, by aggregate kind (NaN where not applicable).

    Counts: CountTrigger's ``count`` state (engine/windowing/triggers.py) and aggregate kind "count";
    user AggregateFunctions name their accumulator's count/min/max fields in ``accumulator_fields``."""
    n = len(value)
    nan = np.full(n, np.nan)
    count, lo, hi = nan, nan, nan
    if task.state_name == COUNT_TRIGGER_STATE and ("count" in task.trigger_kind.split("/") or task.trigger_kind == UNKNOWN):
        count = _numbers(value, value_num, None)
    elif task.state_name == "window-contents":
        if task.aggregate_kind == "count":
            count = _numbers(value, value_num, task.aggregate_field)
        fields = task.accumulator_fields
        if "count" in fields:
            count = _numbers(value, value_num, fields["count"])
        if "min" in fields and "max" in fields:
            lo, hi = _numbers(value, value_num, fields["min"]), _numbers(value, value_num, fields["max"])
    return count, lo, hi


def _numbers(value: pa.Array, value_num: pa.Array, path: Any) -> np.ndarray:
    """The numeric accumulator field at ``path`` (None: the value itself); NaN where it is not a number.

    The value itself is ``value_num`` (stored by the state table for numbers), parsed from the
    JSON text only where that is null; a field of a JSON accumulator is parsed per row."""
    if path is None:
        nums = value_num.to_numpy(zero_copy_only=False).astype(np.float64, copy=True)
        missing = np.isnan(nums)
        if not missing.any():
            return nums
        texts = value.filter(pa.array(missing)).to_pylist()
        nums[missing] = [_pick(v, None) for v in texts]
        return nums
    return np.fromiter((_pick(v, path) for v in value.to_pylist()), dtype=np.float64, count=len(value))


def _pick(text: Any, path: Any) -> float:
    if not isinstance(text, str):
        return math.nan
    try:
        data = json.loads(text)
    except ValueError:
        return math.nan
    if isinstance(data, dict) and "$t" in data:  # the codec's tuple form
        data = data["$t"]
    if path is not None:
        try:
            data = data[path]
        except (KeyError, IndexError, TypeError):
            return math.nan
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        return math.nan
    return float(data)


def _timer_frame(task: FileTask, table: pa.Table, common: dict[str, Any], n: int) -> pa.Table:
    kind = _column(table, "kind", n, _STR)
    timestamp = _column(table, "timestamp", n, _I64)
    event = pc.fill_null(pc.equal(kind, EVENT_TIME), False)
    columns = {
        "key_group": common["key_group"], "key": common["key"], "namespace": _column(table, "namespace", n, _STR),
        "timestamp": pc.fill_null(timestamp, 0), "kind": kind,
        **{k: common[k] for k in ("expected_key_group", "file_kg_start", "file_kg_end", "file_index", "watermark")},
        "event_timestamp": pc.if_else(event, timestamp.cast(_F64), pa.scalar(None, _F64)),
    }
    return pa.Table.from_arrays([columns[f.name] for f in TIMER_COLUMNS], schema=TIMER_COLUMNS)


def _session_frame(task: FileTask, state: pa.Table) -> pa.Table:
    """One row per in-flight merged window, sorted per key, with the previous window's end."""
    keys, groups, starts, ends = [], [], [], []
    for key, group, text in zip(state.column("key").to_pylist(), state.column("key_group").to_pylist(),
                                state.column("value").to_pylist()):
        try:
            rows = json.loads(text) if isinstance(text, str) else []
        except ValueError:
            rows = []
        for row in rows if isinstance(rows, list) else []:
            row = row.get("$t", row) if isinstance(row, dict) else row
            if isinstance(row, list) and len(row) >= 2:
                keys.append(key)
                groups.append(group)
                starts.append(float(row[0]))
                ends.append(float(row[1]))
    frame = pd.DataFrame({"key_group": pd.Series(groups, dtype="int64"), "key": pd.Series(keys, dtype="object"),
                          "window_start": pd.Series(starts, dtype="float64"),
                          "window_end": pd.Series(ends, dtype="float64")})
    frame = frame.sort_values(["key", "window_start", "window_end"], kind="stable").reset_index(drop=True)
    frame["previous_window_end"] = frame.groupby("key", sort=False)["window_end"].shift(1).astype("float64")
    if task.is_event_time is True and isinstance(task.allowed_lateness_ms, int):
        frame["cleanup_time"] = frame["window_end"] - 1 + task.allowed_lateness_ms
    else:
        frame["cleanup_time"] = np.nan
    frame["watermark"] = float(task.watermark)
    frame["file_index"] = np.int64(task.file_index)
    return pa.Table.from_pandas(frame[SESSION_COLUMNS.names], schema=SESSION_COLUMNS, preserve_index=False)


def empty_frame(kind: str) -> pa.Table:
    return COLUMNS[kind].empty_table()
