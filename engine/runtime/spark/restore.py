"""Restore on Spark (runtime option ``restore_from``): a job's splits, valve, keyed state and sinks from a snapshot.

The snapshot is read by the one restore path both runtimes use (engine/runtime/restore.py
``load_restore_point``, without materializing state): split offsets, watermark-generator snapshots, the
watermark and the valve come from its RestorePoint and ``_metadata``; each new subtask's Spark
task reads the files of the old subtasks overlapping its key-group range (``Snapshot.state_tables(uid, range)``,
rows filtered by key group; engine/runtime/spark/state_files.py), so restoring with another parallelism
redistributes key groups.  A local runtime's snapshot restores here too (engine/runtime/snapshot_metadata.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.errors import CorruptSnapshotError, JobDefinitionError
from engine.runtime.spark.state_files import read_state_rows, window_uid

if TYPE_CHECKING:
    from engine.runtime.spark.checkpointing import SparkCheckpointing


def restore_if_requested(checkpointing: SparkCheckpointing) -> None:
    """Restore ``checkpointing.job.restore_from``: verified whole on the driver first (sizes and checksums of every
    state file), so a damaged snapshot is refused with a CorruptSnapshotError before anything is restored.  The
    tasks then read only their own key groups' files, each verified again as it is read."""
    job = checkpointing.job
    uri = job.restore_from
    if uri is None:
        return
    from engine.runtime.checkpoint_storage import CHANNEL_STATE_SUFFIX
    from engine.runtime.restore import load_restore_point
    from engine.runtime.snapshot_metadata import match_sink_states, saved_split_key, sink_states, valve_state_for_splits

    options = checkpointing.storage_options if uri.startswith(("s3://", "s3a://")) else {}
    # the one restore path (engine/runtime/restore.py); the tasks read the state files themselves
    point = load_restore_point(uri, snapshot=job.restore_snapshot, materialize=False, **options)
    meta = point.metadata
    in_flight = [op.uid for op in meta.operators if op.uid.endswith(CHANNEL_STATE_SUFFIX) and any(op.files())]
    if in_flight:  # records between the barriers of an unaligned checkpoint: dropping them would lose them
        raise JobDefinitionError(
            "runtime", "spark", f"cannot restore snapshot {point.snapshot_uri}: it holds in-flight records of an "
            f"unaligned checkpoint ({', '.join(in_flight)}), which only the local runtime replays",
            "Restore it with env.set_runtime('local'), or restore from a savepoint (always aligned)")
    # the portable core (engine/runtime/snapshot_metadata.py): a local runtime's snapshot restores here too
    job.watermark = point.watermark
    in_channel_order: list[dict[str, Any] | None] = [None] * len(job.splits.channel)
    for key_now, s in job.splits.entries.items():
        key = saved_split_key(point.source_positions, s.source_uid, s.split.split_id)
        if key is None:
            continue  # a split the snapshot never saw starts from its beginning
        saved = point.split_states.get(key)
        if saved is None:
            raise CorruptSnapshotError(
                f"snapshot {point.snapshot_uri} has a position for split {key!r} but no watermark state for it "
                "(watermarks.splits); it cannot be restored")
        s.offset, s.watermarks = point.source_positions[key], saved["watermarks"]
        s.finished, s.idle, s.watermark = saved["finished"], saved["idle"], saved["watermark"]
        in_channel_order[job.splits.channel[key_now]] = saved
    # Spark's valve over all splits, rebuilt from them (an older Spark snapshot's own ``watermarks.valve`` is the same)
    job.splits.restore_valve(valve_state_for_splits(in_channel_order, job.watermark),
                             job.watermark)
    uids = {op.uid for op in meta.operators}
    saved_windows = [op.uid for op in meta.operators if op.config.get("kind") == "window"]
    for position, v in enumerate(job.windows):
        uid = window_uid(v)
        if uid not in uids:
            # Without .uid(...) an operator's id comes from its node number, which changes when the job
            # is built again; then window operators are matched by their position in the plan, which is
            # what Flink's generated ids amount to for an unchanged topology.
            if len(saved_windows) != len(job.windows):
                raise CorruptSnapshotError(
                    f"snapshot {point.snapshot_uri} has window operators {saved_windows}, the job has "
                    f"{[window_uid(w) for w in job.windows]}; give each window .uid(...) "
                    "so state can be matched")
            uid = saved_windows[position]
        fn = read_state_rows(uri, options, uid, v.head.id, v.parallelism, job.max_parallelism, job.watermark,
                             meta.checkpoint_id)
        job.state[v.head.id] = job.frames.task_rows(v.parallelism, fn)
    # each sink's pending transactions, by operator uid (either runtime's snapshot), else by plan order
    nodes = {n.id: n for v in job.plan.vertices for n in v.nodes}
    writers = [(nodes[int(task_id.split("-", 1)[1])].operator_uid(), writer)
               for task_id, writer in checkpointing.sink_tasks.items() if hasattr(writer, "initialize_state")]
    for writer, state in match_sink_states(sink_states(meta), writers, point.snapshot_uri):
        writer.initialize_state(state)
    if checkpointing.coordinator is not None:
        checkpointing.coordinator.restore_checkpoint_id_counter(point.checkpoint_id)
    checkpointing.restored_from = point.snapshot_uri
