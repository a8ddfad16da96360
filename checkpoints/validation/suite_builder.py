"""Expectation suites built from a snapshot's own ``_metadata``, not hand-written per job (issue 6).

One suite per frame (an "asset"): each keyed state of each operator, its timers,
its session windows, its state files, and the job's source offsets.  Which
rules apply comes from :class:`~checkpoints.validation.operator_config.WindowOperatorFacts`;
a rule whose input the runtime did not record is not guessed but listed in
:attr:`SuitePlan.unknown` ("window alignment of operator 'x': unknown, needs
config.assigner.size_ms").

Every expectation is a Great Expectations built-in on a column of the frames
of :mod:`checkpoints.validation.frames`, with ``meta={"rule": ...}`` saying in
words what a failure means; so a failure is reported by GX under the
expectation's own name (``expect_column_pair_values_to_be_equal`` on
``key_group``/``expected_key_group``: a key is in the wrong key group).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

import great_expectations as gx  # noqa: E402

from checkpoints.metadata import CheckpointMetadata  # noqa: E402
from checkpoints.validation.frames import SESSIONS, STATE, TIMERS  # noqa: E402
from checkpoints.validation.operator_config import (  # noqa: E402
    COUNT_TRIGGER_STATE,
    MERGING_WINDOW_SET_STATE,
    UNKNOWN,
    WindowOperatorFacts,
    operator_facts,
    is_broadcast_state_table,
    state_name_of_table,
)

FILES = "files"
SOURCE_OFFSETS = "source_offsets"
SOURCE_OFFSETS_ASSET = "job.source_offsets"

_MISSING = "either_value_is_missing"


@dataclass
class AssetSuite:
    """The expectations for one frame; ``name`` is also the GX suite, asset and validation definition name."""

    name: str
    kind: str
    operator_uid: str | None = None
    state_name: str | None = None
    expectations: list[Any] = field(default_factory=list)

    def expect(self, expectation: Any, rule: str) -> None:
        expectation.meta = {**(expectation.meta or {}), "rule": rule, "asset": self.name}
        self.expectations.append(expectation)


@dataclass
class SuitePlan:
    """All suites of one validation run, plus the rules that could not be checked and why."""

    assets: dict[str, AssetSuite] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    facts: dict[str, WindowOperatorFacts] = field(default_factory=dict)

    def asset(self, name: str, kind: str, operator_uid: str | None = None, state_name: str | None = None) -> AssetSuite:
        if name not in self.assets:
            self.assets[name] = AssetSuite(name, kind, operator_uid, state_name)
        return self.assets[name]


def state_asset(uid: str, state_name: str) -> str:
    return f"{uid}.state.{state_name}"


def timers_asset(uid: str) -> str:
    return f"{uid}.timers"


def sessions_asset(uid: str) -> str:
    return f"{uid}.sessions"


FILES_ASSET = "job.files"


def files_asset(uid: str | None = None) -> str:
    """One frame lists every operator's state files (fewer assets: each costs a Data Docs page)."""
    return FILES_ASSET


def build_suites(metadata: CheckpointMetadata, *, previous_offsets: dict[str, Any] | None = None) -> SuitePlan:
    """The suites for every keyed operator of ``metadata`` and for its source offsets."""
    plan = SuitePlan()
    for op in metadata.operators:
        if not op.is_keyed():
            continue
        facts = operator_facts(metadata, op)
        plan.facts[op.uid] = facts
        for missing in facts.unknowns():
            plan.unknown.append(f"operator {op.uid!r}: {missing} not in _metadata")
        tables = {h.table for _, h in op.files() if not is_broadcast_state_table(h.table)}
        state_names = sorted({state_name_of_table(t) for t in tables if state_name_of_table(t) is not None}
                             | set(facts.state_rows or {}))
        for state_name in state_names:
            _state_suite(plan, facts, state_name, _recorded_rows(op, facts, state_name))
        _timer_suite(plan, facts, sum(h.rows for _, h in op.files() if h.table in tables
                                      and state_name_of_table(h.table) is None))
        if facts.merging is True or MERGING_WINDOW_SET_STATE in state_names:
            _session_suite(plan, facts)
        if FILES_ASSET not in plan.assets:
            files = plan.asset(FILES_ASSET, FILES)
            files.expect(gx.expectations.ExpectColumnPairValuesToBeEqual(
                column_A="column_types", column_B="expected_column_types"),
                "every state file has the stored layout (engine/state/snapshot.py, engine/timers.py)")
    _offset_suite(plan, metadata, previous_offsets)
    return plan


def _recorded_rows(op: Any, facts: WindowOperatorFacts, state_name: str) -> int:
    if facts.state_rows is not None and state_name in facts.state_rows:
        return int(facts.state_rows[state_name])
    return sum(h.rows for _, h in op.files() if state_name_of_table(h.table) == state_name)


def _placement(suite: AssetSuite) -> None:
    suite.expect(gx.expectations.ExpectColumnValuesToNotBeNull(column="key"), "every state entry has a key")
    suite.expect(gx.expectations.ExpectColumnPairValuesToBeEqual(column_A="key_group", column_B="expected_key_group"),
                 "key_group is the stable hash of the key: key_group_for_encoded_key(key, max_parallelism)")
    suite.expect(gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A="key_group", column_B="file_kg_start", or_equal=True),
        "the key group lies in the key-group range of the subtask file that holds it")
    suite.expect(gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A="file_kg_end", column_B="key_group", or_equal=True),
        "the key group lies in the key-group range of the subtask file that holds it")


def _state_suite(plan: SuitePlan, facts: WindowOperatorFacts, state_name: str, rows: int) -> None:
    uid = facts.uid
    suite = plan.asset(state_asset(uid, state_name), STATE, uid, state_name)
    _placement(suite)
    suite.expect(gx.expectations.ExpectColumnValuesToNotBeNull(column="namespace"), "every entry has a namespace")
    suite.expect(gx.expectations.ExpectColumnValuesToNotBeNull(column="value"), "every entry has a value")
    suite.expect(gx.expectations.ExpectTableRowCountToEqual(value=rows),
                 "as many entries as the metadata records for this state")
    suite.expect(gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A="window_end", column_B="window_start", ignore_row_if=_MISSING),
        "a time window ends after it starts (end > start)")
    real_windows = facts.merging is False and state_name != MERGING_WINDOW_SET_STATE
    if real_windows and facts.is_aligned():
        suite.expect(gx.expectations.ExpectColumnValuesToBeInSet(column="window_length", value_set=[facts.size_ms]),
                     f"tumbling/sliding windows are exactly size_ms={facts.size_ms} long")
        suite.expect(gx.expectations.ExpectColumnValuesToBeInSet(column="window_phase", value_set=[0]),
                     f"window starts are aligned: (start - offset {facts.offset_ms}) mod slide {facts.slide_ms} == 0")
    elif facts.merging is not True and not facts.assigner_kind.startswith(("global", "custom")):
        plan.unknown.append(f"window size/alignment of {suite.name}: unknown, needs config.assigner "
                            "(kind, size_ms, slide_ms, offset_ms, merging)")
    if real_windows and facts.is_event_time is True and facts.allowed_lateness_ms != UNKNOWN:
        suite.expect(gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="cleanup_time", column_B="watermark", ignore_row_if=_MISSING),
            "no window is left un-purged past watermark + allowed lateness "
            "(end - 1 + allowed_lateness_ms must be > the subtask's watermark)")
    elif real_windows and (facts.is_event_time == UNKNOWN or facts.allowed_lateness_ms == UNKNOWN):
        plan.unknown.append(f"un-purged windows in {suite.name}: unknown, needs config.assigner.is_event_time "
                            "and config.allowed_lateness_ms")
    if state_name == COUNT_TRIGGER_STATE or facts.aggregate_kind == "count" or "count" in facts.accumulator_fields:
        if state_name in (COUNT_TRIGGER_STATE, "window-contents"):
            suite.expect(gx.expectations.ExpectColumnValuesToBeBetween(column="acc_count", min_value=0),
                         "counts are never negative")
    if state_name == "window-contents" and {"min", "max"} <= set(facts.accumulator_fields):
        suite.expect(gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="acc_max", column_B="acc_min", or_equal=True, ignore_row_if=_MISSING),
            "an accumulator's min is <= its max")


def _timer_suite(plan: SuitePlan, facts: WindowOperatorFacts, rows: int) -> None:
    suite = plan.asset(timers_asset(facts.uid), TIMERS, facts.uid)
    _placement(suite)
    suite.expect(gx.expectations.ExpectTableRowCountToEqual(value=rows), "as many timers as the metadata records")
    suite.expect(gx.expectations.ExpectColumnValuesToBeInSet(column="kind", value_set=["event_time", "processing_time"]),
                 "a timer is an event-time or a processing-time timer")
    if facts.watermarks is not None:
        suite.expect(gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="event_timestamp", column_B="watermark", ignore_row_if=_MISSING),
            "no event-time timer is at or behind the watermark: those have fired (seed 004)")


def _session_suite(plan: SuitePlan, facts: WindowOperatorFacts) -> None:
    suite = plan.asset(sessions_asset(facts.uid), SESSIONS, facts.uid, MERGING_WINDOW_SET_STATE)
    suite.expect(gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A="window_end", column_B="window_start"), "a session window ends after it starts")
    suite.expect(gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A="window_start", column_B="previous_window_end", ignore_row_if=_MISSING),
        "a key's session windows do not overlap or touch (they would have been merged)")
    if facts.is_event_time is True and facts.allowed_lateness_ms != UNKNOWN:
        suite.expect(gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
            column_A="cleanup_time", column_B="watermark", ignore_row_if=_MISSING),
            "no session is left un-purged past watermark + allowed lateness")


def _offset_suite(plan: SuitePlan, metadata: CheckpointMetadata, previous: dict[str, Any] | None) -> None:
    if previous is None:
        if metadata.source_positions:
            plan.unknown.append("source offsets: no previous retained checkpoint to compare with")
        return
    suite = plan.asset(SOURCE_OFFSETS_ASSET, SOURCE_OFFSETS)
    suite.expect(gx.expectations.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A="offset", column_B="previous_offset", or_equal=True, ignore_row_if=_MISSING),
        "no source offset is behind the previous retained checkpoint's")
    not_numeric = sorted(s for s, v in {**previous, **metadata.source_positions}.items() if not _is_number(v))
    if not_numeric:
        plan.unknown.append(f"source offsets of splits {not_numeric}: not numbers, not compared")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
