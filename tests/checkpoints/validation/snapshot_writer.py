"""Snapshots with targeted corruptions: WindowOperators driven by the keyed harness, written table by table.

The runtimes write real checkpoints themselves (engine/runtime/checkpoint_storage_adapter.py
with engine/runtime/snapshot_metadata.py: operator config, state_rows/state_kinds,
``watermarks.operators``, tables ``keyed.<name>`` and ``timers``), and
test_validation_of_runtime_checkpoints.py validates one.  This helper stays for
what a running job cannot be made to do: store a *wrong* table with correct
sizes and checksums, as a buggy writer would.  It writes the same layout: each
subtask's MaterializedOperatorSnapshot with ``CheckpointStorageLocation.write_state_file``
(``keyed/<name>`` stored as ``keyed.<name>``), the config of
``window_operator_config(node)`` with ``state_rows``, each subtask's
``current_watermark`` in ``watermarks.operators[uid][subtask]``; ``edit`` rewrites
a table before it is written.
"""

from __future__ import annotations

from typing import Any, Callable

import pyarrow as pa

from checkpoints import CheckpointMetadata, OperatorState, OperatorSubtaskState, SnapshotProperties
from checkpoints.validation.operator_config import window_operator_config
from engine.api.environment import StreamExecutionEnvironment
from engine.graph.operator_factory import build_window_operator
from engine.graph.transformations import WindowTransformation, topological_order
from engine.state.key_groups import assign_to_key_group, key_group_range_for_operator, operator_index_for_key_group
from engine.testing.operator_harness import KeyedOneInputStreamOperatorTestHarness

Edit = Callable[[str, int, str, pa.Table], pa.Table]


def window_nodes(build: Callable[[Any], dict[str, Any]]) -> tuple[dict[str, WindowTransformation], int]:
    env = StreamExecutionEnvironment.get_execution_environment()
    streams = build(env)
    nodes = topological_order([s._node for s in streams.values()])
    return {n.operator_uid(): n for n in nodes if isinstance(n, WindowTransformation)}, env.get_max_parallelism()


class SubtaskRouter:
    """One harness per subtask of one window operator; elements go to the subtask owning their key group."""

    def __init__(self, node: WindowTransformation, max_parallelism: int, parallelism: int) -> None:
        self.node = node
        self.max_parallelism = max_parallelism
        self.parallelism = parallelism
        self.harnesses = [
            KeyedOneInputStreamOperatorTestHarness(build_window_operator(node), max_parallelism=max_parallelism,
                                                   parallelism=parallelism, subtask_index=i,
                                                   operator_id=node.operator_uid())
            for i in range(parallelism)
        ]
        for h in self.harnesses:
            h.open()

    def process_element(self, value: Any, timestamp: int) -> None:
        group = assign_to_key_group(self.node.key_selector(value), self.max_parallelism)
        self.harnesses[operator_index_for_key_group(self.max_parallelism, self.parallelism, group)] \
            .process_element(value, timestamp)

    def process_watermark(self, watermark: int) -> None:
        for h in self.harnesses:
            h.process_watermark(watermark)

    def snapshots(self) -> list[Any]:
        return [h.snapshot() for h in self.harnesses]


def write_snapshot(
    storage: Any,
    checkpoint_id: int,
    routers: dict[str, SubtaskRouter],
    *,
    savepoint: bool = False,
    source_positions: dict[str, Any] | None = None,
    edit: Edit | None = None,
    now_ms: int = 1_000_000,
) -> str:
    """Write every router's subtask snapshots as checkpoint (or savepoint) ``checkpoint_id``; returns its URI."""
    location = (storage.initialize_savepoint_location(checkpoint_id) if savepoint
                else storage.initialize_location(checkpoint_id))
    operators = []
    watermarks: dict[str, dict[str, int]] = {}
    for uid, router in routers.items():
        subtasks = []
        state_rows: dict[str, int] = {}
        for index, snap in enumerate(router.snapshots()):
            files = []
            for name, table in sorted(snap.tables.items()):
                stored = name.replace("/", ".")
                if name.startswith("keyed/"):
                    state = name[len("keyed/"):]
                    state_rows[state] = state_rows.get(state, 0) + table.num_rows
                if edit is not None:
                    table = edit(uid, index, stored, table)
                files.append(location.write_state_file(uid, index, stored, table))
            start, end = snap.metadata["key_group_range"]
            subtasks.append(OperatorSubtaskState(index, (start, end), tuple(files)))
            watermarks.setdefault(uid, {})[str(index)] = int(snap.metadata["current_watermark"])
        config = {**window_operator_config(router.node), "state_rows": state_rows}
        operators.append(OperatorState(uid, router.node.name, router.parallelism, router.max_parallelism, config,
                                          tuple(subtasks)))
    metadata = CheckpointMetadata(
        job_id=storage.job_id, job_name="validation test job", checkpoint_id=checkpoint_id,
        properties=SnapshotProperties.savepoint() if savepoint else SnapshotProperties.checkpoint(),
        trigger_timestamp_ms=now_ms + checkpoint_id, complete_timestamp_ms=now_ms + checkpoint_id + 1,
        source_positions=dict(source_positions or {}), watermarks={"operators": watermarks},
        operators=tuple(operators),
    )
    return location.finalize(metadata)


def key_range_of(max_parallelism: int, parallelism: int, subtask: int) -> tuple[int, int]:
    r = key_group_range_for_operator(max_parallelism, parallelism, subtask)
    return r.start_key_group, r.end_key_group
