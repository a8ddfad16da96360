"""The column fold's functions (engine/runtime/spark/column_fold.py) against the window operator, without Spark.

Random epochs of dict records (a few keys, out-of-order, late and negative timestamps, int fields) are folded per
(key, pane) by two "reading tasks" as ``read_columns`` folds them, and go through :func:`fold` epoch by epoch; the
same partials, as whole records in (key group, channel, sequence) order, go through the window operator the
window stage runs (``create_window_operator(..., specialized=True)``) under W(n-1), then W(n).  Each epoch's fired
results (values, timestamps, order), the late records dropped, and the snapshot (:func:`to_general` of the fold's
state against the operator's own ``snapshot_now``: every table and the metadata) must be the operator's; the
snapshot read back by :func:`from_general` must fold on to the same results.  ``codec_texts`` must be the codec's
bytes.
"""

from __future__ import annotations

import datetime
from math import gcd

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.elements import StreamRecord, Watermark
from engine.io.formats import table_to_pylist
from engine.operators.base import ListOutput, OperatorContext
from engine.runtime.spark.arrow_text import codec_texts, encode_key_column
from engine.runtime.spark.column_fold import (
    NO_STATE,
    blob_tables,
    concat_partials,
    empty_state,
    fold,
    from_general,
    key_groups_of,
    result_columns,
    result_timestamps,
    to_general,
)
from engine.runtime.spark.rows import ipc_bytes
from engine.state import codec
from engine.windowing.aggregations import builtin_aggregation
from engine.windowing.assigners import SlidingEventTimeWindows, TumblingEventTimeWindows
from engine.windowing.slicing import create_window_operator

MAX_PARALLELISM = 16
GEOMETRIES = [(10, 10, 0), (10, 10, 3), (15, 5, 0), (14, 4, 3), (20, 5, 1), (7, 7, -2)]  # slide <= size: the fold's
_UTC = datetime.timezone.utc


def _operator(kind: str, size: int, slide: int, offset: int):
    assigner = (TumblingEventTimeWindows.of(size, offset) if size == slide
                else SlidingEventTimeWindows.of(size, slide, offset))
    op = create_window_operator(assigner, incremental_aggregate=builtin_aggregation(kind, "v"),
                                key_selector=lambda v: v["k"], specialized=True)
    output = ListOutput()
    op.open(OperatorContext("w", 0, 1, MAX_PARALLELISM), output)
    return op, output


def _partials(records: list[tuple[str, int, int, float]], first_seq: int, kind: str, pane: int,
              offset: int) -> pa.Table:
    """A reading task's partials of ``records`` (key, ts, v, x) in arrival order: column_path.py ``_fold_read``."""
    folded: dict[tuple, list] = {}
    for i, (k, ts, v, x) in enumerate(records):
        group = (k, ts - (ts - offset) % pane)
        entry = folded.get(group)
        if entry is None:
            folded[group] = [i, ts, v, 1, {"k": k, "x": x, "v": v}]
        else:
            entry[2] = {"sum": lambda a, b: a + b, "min": min, "max": max}[kind](entry[2], v)
            entry[3] += 1
    rows = sorted(folded.values(), key=lambda e: e[0])
    keys = encode_key_column(pa.array([r[4]["k"] for r in rows], pa.string()))
    return pa.table({
        "_kg": pa.array(key_groups_of(keys, MAX_PARALLELISM), pa.int32()), "_key": keys,
        "_seq": pa.array([first_seq + r[0] for r in rows], pa.int64()), "_ts": pa.array([r[1] for r in rows], pa.int64()),
        "_num": pa.array([r[2] for r in rows], pa.int64()), "_count": pa.array([r[3] for r in rows], pa.int64()),
        "_record": pa.array([r[4] for r in rows], pa.struct([("k", pa.string()), ("x", pa.float64()), ("v", pa.int64())])),
    })


record = st.tuples(st.sampled_from("abcde"), st.integers(-15, 60), st.integers(-50, 50),
                   st.sampled_from([0.5, 2.25, -1.0, 1e-7]))
epochs_strategy = st.lists(st.tuples(st.lists(record, max_size=12), st.lists(record, max_size=12),
                                     st.integers(0, 25)), min_size=1, max_size=5)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(epochs=epochs_strategy, geometry=st.sampled_from(GEOMETRIES), kind=st.sampled_from(["sum", "min", "max"]),
       restore_at=st.integers(0, 5))
def test_the_fold_is_the_operator(epochs, geometry, kind, restore_at) -> None:
    size, slide, offset = geometry
    pane = gcd(size, slide)
    op, output = _operator(kind, size, slide, offset)
    state = None
    watermark = -(2**63)
    seq = {"t0": 0, "t1": 0}
    for epoch, (first, second, advance) in enumerate(epochs):
        blobs, channels = [], []
        # the second task's blob first: the window stage ranks channels by their text, not by arrival
        for channel, records in (("t1", second), ("t0", first)):
            if records:
                blobs.append(ipc_bytes(_partials(records, seq[channel] + 1, kind, pane, offset)))
                channels.append(channel)
                seq[channel] += len(records)
        parts = blob_tables(blobs, channels)
        partials = concat_partials(parts) if parts else None
        after = max(watermark, 0) + advance if epoch < len(epochs) - 1 else 2**63 - 1
        # the operator: the partials as whole records, in (key group, channel, sequence) order, under W(n-1)
        if op.current_watermark() < watermark:
            op.process_watermark(Watermark(watermark))
        output.elements.clear()
        late_before = op.context.metrics.get("num_late_records_dropped")
        if partials is not None:
            values = table_to_pylist(result_columns(partials, "v"))
            op.process_batch([StreamRecord(v, t) for v, t in zip(values, partials.column("_ts").to_pylist())])
        op.process_watermark(Watermark(after))
        expected = [(e.value, e.timestamp) for e in output.elements if isinstance(e, StreamRecord)]
        if state is None:
            state = empty_state(partials.schema.field("_record").type) if partials is not None else None
        if state is None:
            assert expected == []
            watermark = after
            continue
        fired, state, dropped = fold(state, partials, kind=kind, size=size, slide=slide, offset=offset, epoch=epoch,
                                     watermark_before=watermark, watermark_after=after)
        got = list(zip(table_to_pylist(result_columns(fired, "v")), result_timestamps(fired, size).to_pylist()))
        assert got == expected
        # a partial's count is its records, as the operator counts elements (one per partial here)
        operator_dropped = op.context.metrics.get("num_late_records_dropped") - late_before
        assert (dropped > 0) == (operator_dropped > 0)
        template = _operator(kind, size, slide, offset)[0]
        if after > template.current_watermark():
            template.process_watermark(Watermark(after))
        mine = to_general(state, template.snapshot_now(epoch), field="v", size=size)
        theirs = op.snapshot_now(epoch)
        assert mine.metadata == theirs.metadata
        assert mine.tables.keys() == theirs.tables.keys()
        for name in theirs.tables:
            assert mine.tables[name].equals(theirs.tables[name], check_metadata=True), name
        watermark = after
        if epoch == restore_at:  # the state through the general layout and back (a restore), the fold goes on
            restored = from_general([theirs], field="v", size=size)
            assert restored is not None
            if restored is not NO_STATE:
                assert restored.column("_start").to_pylist() == state.column("_start").to_pylist()
                state = restored.cast(state.schema)
            else:
                assert state.num_rows == 0


def test_from_general_refuses_state_of_another_shape() -> None:
    op, _ = _operator("sum", 10, 10, 0)
    op.process_batch([StreamRecord({"k": "a", "x": 1.0, "v": 2}, 3)])
    snap = op.snapshot_now(1)
    assert from_general([snap], field="v", size=10) is not None
    assert from_general([snap], field="v", size=20) is None  # a window of another size: not this layout's
    extra = type(snap)(snap.metadata, {**snap.tables, "keyed/other": snap.tables["keyed/window-contents"]})
    assert from_general([extra], field="v", size=10) is None


plain_text = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=8)
any_text = st.text(max_size=6)


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.tuples(any_text, st.integers(-2**40, 2**40),
                               st.floats(allow_nan=False, allow_infinity=False, width=64), st.booleans(),
                               st.integers(-62_135_596_800_000_000, 253_402_300_799_000_000)), min_size=1, max_size=20),
       unit=st.sampled_from(["s", "ms", "us"]), tz=st.sampled_from(["UTC", None]))
def test_codec_texts_are_the_codecs_bytes(rows, unit, tz) -> None:
    ts = [t // {"s": 1_000_000, "ms": 1000, "us": 1}[unit] for *_, t in rows]
    table = pa.table({"s": [r[0] for r in rows], "i": [r[1] for r in rows], "f": [r[2] for r in rows],
                      "b": [r[3] for r in rows], "ts": pa.array(ts, pa.timestamp(unit, tz=tz))})
    texts = codec_texts(table)
    expected = [codec.encode(v) for v in table_to_pylist(table)]
    if texts is None:  # a string that is not plain ASCII: the caller encodes the dicts
        assert any(any(ord(c) < 32 or ord(c) > 126 or c in '"\\' for c in r[0]) for r in rows)
    else:
        assert texts.to_pylist() == expected


@pytest.mark.parametrize("column", [pa.array([{"a": 1}], pa.struct([("a", pa.int64())])),
                                    pa.array([1.5], pa.float32()).cast(pa.float64()).cast(pa.decimal128(5, 2))])
def test_codec_texts_leave_other_types_to_the_codec(column) -> None:
    assert codec_texts(pa.table({"c": column})) is None
