"""Drained snapshots: taken after event time ended, so a job restored from one finds every new record late.

``sluice stop --drain`` is Flink's ``stop --drain``: MAX_WATERMARK goes out before the savepoint
barrier, every event-time window fires, and the savepoint records MAX_WATERMARK as its watermark.
Flink restores such a savepoint, but the job then starts at the end of event time: every new
record is late for its event-time windows (dropped, or sent to a late side output), so none of
them fires again.  That is almost never what the operator meant, so ``sluice restore``, ``sluice
run --from-savepoint`` and snapshot validation refuse a drained snapshot unless asked not to
(``--allow-drained``, ``allow_drained=True``).

What the runtimes record, as read from real stop-with-savepoint runs:

- both runtimes (the portable core, engine/runtime/snapshot_metadata.py): ``watermarks.watermark``,
  the job's watermark, is MAX_WATERMARK, and so is every ``watermarks.operators[uid][subtask]``
  entry (Spark: a window operator left without state by the drain records no entry); the split
  watermarks under ``watermarks.splits`` keep their last values from the input (a split the local
  runtime had read to its end reads MAX_WATERMARK).
- local snapshots written before the portable core record only ``watermarks.operators``.

A snapshot is drained when it records a job or operator watermark and every one of them is
MAX_WATERMARK.  Every one, because while a job runs, one of its pipelines may have reached the end
of its bounded input (its operators at MAX_WATERMARK) while another reads on.  A split watermark
never decides: a split that finished may read MAX_WATERMARK while the job goes on.  Neither runtime
persists a checkpoint taken after all input ended (the local runtime's final checkpoint holds no
window operators and is deleted when the job finishes; Spark's last checkpoint precedes the epoch
that ends event time), so only ``stop --drain`` makes a drained snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from checkpoints.metadata import CheckpointMetadata
from engine.elements import MAX_WATERMARK


@dataclass(frozen=True, slots=True)
class SnapshotWatermarks:
    """The event-time watermarks (ms) a snapshot records: the job's, each operator subtask's, each split's."""

    #: the job's watermark (Spark's W(n)); None where the snapshot records none (local ones from before the core)
    job_ms: int | None
    #: operator uid -> subtask -> watermark
    operators: dict[str, dict[int, int]]
    #: split id -> watermark, from the ledger or Spark's ``watermarks.splits``
    splits: dict[str, int]

    @staticmethod
    def of(metadata: CheckpointMetadata) -> SnapshotWatermarks:
        marks = metadata.watermarks
        job = marks.get("watermark")
        operators = {
            uid: {int(sub): wm for sub, wm in subtasks.items() if str(sub).isdigit() and _is_ms(wm)}
            for uid, subtasks in sorted((marks.get("operators") or {}).items()) if isinstance(subtasks, dict)
        }
        splits = {sid: s["watermark"] for sid, s in sorted((marks.get("splits") or {}).items())
                  if isinstance(s, dict) and _is_ms(s.get("watermark"))}
        splits.update({sid: s.watermark_ms for sid, s in metadata.ledger.splits.items() if s.watermark_ms is not None})
        return SnapshotWatermarks(job if _is_ms(job) else None, {k: v for k, v in operators.items() if v}, splits)

    def deciding(self) -> list[int]:
        """The watermarks that say whether event time ended: the job's and every operator subtask's."""
        return ([] if self.job_ms is None else [self.job_ms]) + [
            wm for subtasks in self.operators.values() for wm in subtasks.values()]

    def is_drained(self) -> bool:
        deciding = self.deciding()
        return bool(deciding) and all(wm == MAX_WATERMARK for wm in deciding)


def drained_reason(metadata: CheckpointMetadata) -> str | None:
    """Why the snapshot is drained (which of its watermarks are MAX_WATERMARK), or None when it is not."""
    marks = SnapshotWatermarks.of(metadata)
    if not marks.is_drained():
        return None
    places = [] if marks.job_ms is None else ["the job's watermark"]
    if marks.operators:
        plural = "s" if len(marks.operators) > 1 else ""
        places.append(f"every subtask's watermark of operator{plural} {', '.join(map(repr, marks.operators))}")
    ended = [sid for sid, wm in marks.splits.items() if wm == MAX_WATERMARK]
    if ended:
        places.append(f"the watermark of split{'s' if len(ended) > 1 else ''} {', '.join(map(repr, ended))}")
    return (f"{' and '.join(places)} {'is' if len(places) == 1 else 'are'} MAX_WATERMARK ({MAX_WATERMARK}): "
            "event time had ended, as after `sluice stop --drain`")


def _is_ms(value: Any) -> bool:
    return type(value) is int
