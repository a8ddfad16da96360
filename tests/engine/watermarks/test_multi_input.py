"""Min across logical inputs: processWatermark1/2 and reportWatermark (seed 004), with idleness."""

from __future__ import annotations

import json

import pytest

from engine.elements import Watermark, WatermarkStatus
from engine.errors import IllegalStateError, JobDefinitionError
from engine.watermarks.multi_input import CombinedWatermarkStatus, InputWatermarkCombiner, PartialWatermark


def test_two_inputs_forward_the_min_only_when_it_rises():
    c = InputWatermarkCombiner(2)
    assert c.process_watermark1(Watermark(10)) is None  # input 2 still at MIN
    assert c.process_watermark2(Watermark(4)) == Watermark(4)
    assert c.process_watermark2(Watermark(8)) == Watermark(8)
    assert c.process_watermark2(Watermark(30)) == Watermark(10)
    assert c.process_watermark1(Watermark(25)) == Watermark(25)
    assert c.process_watermark1(Watermark(20)) is None  # an input never goes back
    assert c.input_watermark(1) == 25
    assert c.combined_watermark == 25


def test_n_inputs_report_watermark_with_one_based_ids():
    c = InputWatermarkCombiner(3)
    assert c.report_watermark(Watermark(5), 1) is None
    assert c.report_watermark(Watermark(6), 2) is None
    assert c.report_watermark(Watermark(7), 3) == Watermark(5)
    with pytest.raises(IllegalStateError):
        c.report_watermark(Watermark(1), 0)
    with pytest.raises(JobDefinitionError):
        InputWatermarkCombiner(0)


def test_an_idle_input_does_not_hold_back_the_others_and_all_idle_is_idle():
    c = InputWatermarkCombiner(2)
    c.process_watermark1(Watermark(50))
    assert c.report_watermark_status(WatermarkStatus.IDLE, 2) == (Watermark(50), None)
    assert c.report_watermark_status(WatermarkStatus.IDLE, 1) == (None, WatermarkStatus.IDLE)
    assert c.combined_status is WatermarkStatus.IDLE
    # a watermark makes its input active again; the output does not regress below 50
    assert c.report_watermark(Watermark(40), 2) == (None)
    assert c.combined_status is WatermarkStatus.ACTIVE
    assert c.report_watermark(Watermark(60), 2) == Watermark(60)


def test_combiner_snapshot_round_trips_through_json():
    c = InputWatermarkCombiner(2)
    c.process_watermark1(Watermark(3))
    c.process_watermark2(Watermark(9))
    c.report_watermark_status(WatermarkStatus.IDLE, 1)
    state = json.loads(json.dumps(c.snapshot()))
    r = InputWatermarkCombiner(2)
    r.restore(state)
    assert r.snapshot() == c.snapshot()
    assert r.process_watermark2(Watermark(12)) == Watermark(12)


def test_combined_status_with_no_inputs_changes_nothing():
    s = CombinedWatermarkStatus()
    assert s.update_combined_watermark() is False
    assert not s.is_idle()
    s.add("a", PartialWatermark(7))
    assert s.update_combined_watermark() is True
    assert s.combined_watermark == 7
