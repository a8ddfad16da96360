"""Whether the watermarks a snapshot records agree with each other (issue 17: a ``_metadata`` watermark edited to
the year 3000 passed validation, and a restore would then have judged every new record late and dropped it).

A watermark cannot be checked against the data's event time: replayed or future-dated data is legitimate, and a
snapshot holds no clock of the data.  What can be checked is that the snapshot is one consistent whole, since a
job records several facts that only move together:

- **copies agree.**  On both runtimes a window operator's watermark is recorded in its subtask's metadata
  (``current_watermark``, what a restore uses) and again in ``watermarks.operators`` (what validation reads).  The Spark runtime also records
  each split's watermark beside the split's own watermark state, and its snapshots written before the valve
  was left out of ``_metadata`` the job's watermark beside the watermark valve whose output it is.  Each pair
  must be equal.
- **no split ahead of its data.**  A split's watermark comes from its watermark generator, and the built-in
  generators (bounded out-of-orderness, ascending, either with idleness) record the largest timestamp they saw:
  the watermark is that minus the out-of-orderness bound, never more than it.
- **no operator ahead of every source.**  A watermark only comes into a job through its sources' splits (or
  through ``assign_timestamps_and_watermarks`` away from a source, whose generator is not snapshotted).  Without
  such an operator, no window operator's watermark, and on Spark neither the job's watermark nor its valve's
  output, may be ahead of the largest split watermark in the snapshot.

``MAX_WATERMARK`` is exempt everywhere: it marks the end of input or a drained stop, which
:mod:`checkpoints.drained` judges.  Editing every copy and every generator consistently gives a snapshot that is
indistinguishable from a job that really read future-dated data; the checks are about tampering with, or
corruption of, a part of the document.
"""

from __future__ import annotations

from typing import Any, Iterator

from checkpoints.metadata import CheckpointMetadata
from engine.elements import MAX_WATERMARK

#: operator classes that make watermarks of their own away from a source (their generator is not snapshotted)
_WATERMARKING_OPERATORS = frozenset({"TimestampsAndWatermarksOperator"})


def watermark_problems(metadata: CheckpointMetadata) -> list[str]:
    """Each way the snapshot's watermarks contradict each other, as a sentence; empty when they agree."""
    problems: list[str] = []
    split_watermarks: list[int] = []
    for where, split in _recorded_splits(metadata):
        watermark = _int(split.get("watermark"))
        if watermark is None:
            continue
        split_watermarks.append(watermark)
        highest = _max_timestamp(split.get("generator"))
        if highest is not None and watermark != MAX_WATERMARK and watermark > highest:
            problems.append(f"{where} has watermark {watermark}, ahead of the largest timestamp its watermark "
                            f"generator saw ({highest}): the watermark or the generator state was altered")
    problems.extend(_spark_copies(metadata))
    operators = _operator_watermarks(metadata)
    for uid, subtask, recorded, own in operators:
        if own is not None and recorded is not None and own != recorded:
            problems.append(f"operator {uid!r} subtask {subtask}: watermarks.operators says {recorded}, its own "
                            f"metadata says {own}: one of the two copies was altered")
    watermarking = any(op.config.get("operator_class") in _WATERMARKING_OPERATORS
                       or any(m.get("operator_class") in _WATERMARKING_OPERATORS
                              for m in _subtask_metadata(op.config).values())
                       for op in metadata.operators)
    if split_watermarks and not watermarking:
        ceiling = max(split_watermarks)
        marks = metadata.watermarks or {}
        valve = marks.get("valve") if isinstance(marks.get("valve"), dict) else {}
        for name, value in (("the job's watermark", _int(marks.get("watermark"))),
                            ("the watermark valve's output", _int(valve.get("last_output_watermark")))):
            if value is not None and value != MAX_WATERMARK and value > ceiling:
                problems.append(f"{name} {value} is ahead of every source split's watermark (largest {ceiling}): "
                                "a watermark only comes from the sources, so the snapshot was altered")
        for uid, subtask, recorded, own in operators:
            for value in {v for v in (recorded, own) if v is not None}:
                if value != MAX_WATERMARK and value > ceiling:
                    problems.append(f"operator {uid!r} subtask {subtask} has watermark {value}, ahead of every "
                                    f"source split's watermark (largest {ceiling}): a watermark only comes from "
                                    "the sources, so the snapshot was altered")
    return problems


def _recorded_splits(metadata: CheckpointMetadata) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every split watermark state in the snapshot: the local runtime's source stages (an operator's subtask
    metadata ``task_state``) and the Spark runtime's per-split stage snapshots (``watermarks.splits``)."""
    for op in metadata.operators:
        for subtask, meta in _subtask_metadata(op.config).items():
            state = meta.get("task_state")
            if isinstance(state, dict) and isinstance(state.get("splits"), list):
                for split in state["splits"]:
                    if isinstance(split, dict):
                        yield f"operator {op.uid!r} subtask {subtask} split {split.get('split_id')}", split
    splits = (metadata.watermarks or {}).get("splits")
    if isinstance(splits, dict):
        for split_id, entry in splits.items():
            stage = entry.get("watermarks") if isinstance(entry, dict) else None
            if isinstance(stage, dict) and isinstance(stage.get("splits"), list):
                for split in stage["splits"]:
                    if isinstance(split, dict):
                        yield f"split {split_id!r}", split


def _spark_copies(metadata: CheckpointMetadata) -> list[str]:
    marks = metadata.watermarks or {}
    problems: list[str] = []
    valve = marks.get("valve")
    job_watermark = _int(marks.get("watermark"))
    if isinstance(valve, dict) and job_watermark is not None:
        output = _int(valve.get("last_output_watermark"))
        if output is not None and output != job_watermark:
            problems.append(f"the job's watermark {job_watermark} is not its watermark valve's output {output}: "
                            "one of the two was altered")
    splits = marks.get("splits")
    if isinstance(splits, dict):
        for split_id, entry in splits.items():
            if not isinstance(entry, dict):
                continue
            recorded = _int(entry.get("watermark"))
            stage = entry.get("watermarks")
            inner = [s for s in (stage or {}).get("splits", []) if isinstance(s, dict)] \
                if isinstance(stage, dict) else []
            own = {_int(s.get("watermark")) for s in inner} - {None}
            if recorded is not None and own and recorded not in own:
                problems.append(f"split {split_id!r}: watermark {recorded} differs from its watermark state's "
                                f"{sorted(own)}: one of the two copies was altered")
    return problems


def _operator_watermarks(metadata: CheckpointMetadata) -> list[tuple[str, str, int | None, int | None]]:
    """(uid, subtask, watermarks.operators copy, the subtask metadata's own) for every operator with a watermark."""
    recorded_all = (metadata.watermarks or {}).get("operators") or {}
    rows: list[tuple[str, str, int | None, int | None]] = []
    for op in metadata.operators:
        own_by_subtask = {str(s): _int(m.get("current_watermark")) for s, m in _subtask_metadata(op.config).items()}
        recorded = recorded_all.get(op.uid)
        recorded_by_subtask: dict[str, int | None] = {}
        if isinstance(recorded, dict):
            recorded_by_subtask = {str(k): _int(v) for k, v in recorded.items()}
        elif _int(recorded) is not None:
            recorded_by_subtask = {s: _int(recorded) for s in own_by_subtask} or {"*": _int(recorded)}
        for subtask in sorted(set(own_by_subtask) | set(recorded_by_subtask)):
            own, copy = own_by_subtask.get(subtask), recorded_by_subtask.get(subtask, recorded_by_subtask.get("*"))
            if own is not None or copy is not None:
                rows.append((op.uid, subtask, copy, own))
    return rows


def _subtask_metadata(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    metas = config.get("subtask_metadata") if isinstance(config, dict) else None
    return {str(k): v for k, v in metas.items() if isinstance(v, dict)} if isinstance(metas, dict) else {}


def _max_timestamp(generator: Any) -> int | None:
    """The largest timestamp a built-in generator saw (BoundedOutOfOrderness, Ascending, with idleness); None for
    a generator whose state says nothing about it."""
    if not isinstance(generator, dict):
        return None
    if set(generator) == {"max_timestamp"}:
        return _int(generator["max_timestamp"])
    if set(generator) == {"inner", "is_idle"}:
        return _max_timestamp(generator["inner"])
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
