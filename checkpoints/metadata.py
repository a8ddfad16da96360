"""The ``_metadata`` document of a checkpoint or savepoint (ARCHITECTURE section 5; seed 001 CompletedCheckpoint).

Seed 001: a PendingCheckpoint collects, per operator, the state handles every
task acknowledged; once all acknowledged it becomes a CompletedCheckpoint, whose
handles are persisted so the job can be recovered.  :class:`CheckpointMetadata`
is that persisted form: JSON, ``format_version`` "1.1", no pickle, so restoring
never runs code from storage.  It is written last into the snapshot folder; its
presence is what makes a checkpoint exist.

Shape (``to_json``)::

    {"format_version": "1.1", "job_id", "job_name", "checkpoint_id",
     "properties": {"type": "checkpoint"|"savepoint", "forced", "externalized", "discard_on": [...]},
     "trigger_timestamp_ms", "complete_timestamp_ms",
     "source_positions": {"<source uid>/<split_id>": offset (any JSON)},  # Sn per split of each source
     "watermarks": {...},                                    # watermark and valve state, JSON-able
     "operators": [{"uid", "name", "parallelism", "max_parallelism", "config": {...},
                    "subtasks": [{"subtask", "key_group_range": [start, end] | null,
                                  "files": [{"path", "bytes", "rows", "sha256", "table",
                                             "format": "parquet"|"arrow", "incremental_key",
                                             "kind": "full"|"delta", "merge_key": [...]|null}]}]}],
     "ledger": {"splits": {split_id: {"offset", "watermark_ms", "idle_ms"}},
                "late_records_dropped", "late_records_side_output", "oldest_open_window"},
     "validation": null | {"status": "passed"|"failed"|..., ...}}

A split id is unique within its source only (two collections both have ``collection-0``), so a split
is named by its source operator's uid and its id (engine/runtime/snapshot_metadata.py
``source_split_key``), in ``source_positions`` and in Spark's ``watermarks.splits`` alike; snapshots
written before that name splits by the bare id, which restoring still accepts.

**Sealed** (format 1.1): ``document_sha256`` is the sha256 of the canonical JSON of every other field
(:func:`seal`).  The state files' checksums are in ``_metadata``; this one guards ``_metadata`` itself, so a
hand edit of a source position or a checkpoint id, which no other check can tell from a real value, is
refused on read.  A document of format 1.1 or later without it is refused too (the field was removed);
1.0 documents, written before, have none and are read as they are.  It is a checksum, not a signature:
a tool that rewrites the document on purpose seals it again with :func:`seal`.

``key_group_range`` is null for operators without keyed state.  A file path is
relative to the snapshot folder, or starts with ``shared/`` (see
:mod:`checkpoints.layout`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass, field
from typing import Any, Iterator

from checkpoints._documents import Fields, check_version, dumps, loads
from engine.errors import CorruptSnapshotError, JobDefinitionError

FORMAT_VERSION = "1.1"
#: the first format whose documents are sealed (``document_sha256``)
SEALED_SINCE = (1, 1)
#: the field of ``_metadata`` holding the sha256 of the rest of the document
DOCUMENT_SHA256 = "document_sha256"
FILE_FORMATS = ("parquet", "arrow")
FILE_KINDS = ("full", "delta")
SNAPSHOT_TYPES = ("checkpoint", "savepoint")
#: Flink's CheckpointProperties discard flags: when the snapshot's files are deleted
DISCARD_EVENTS = ("subsumed", "finished", "cancelled", "failed", "suspended")


@dataclass(frozen=True, slots=True)
class StateFileHandle:
    """One state file a task wrote: what a task acknowledges with (seed 001's state handle)."""

    path: str
    bytes: int
    rows: int
    sha256: str
    table: str
    format: str = "parquet"
    #: logical identity for incremental reuse (e.g. "window-op/kg17/window-contents"); None for private files
    incremental_key: str | None = None
    #: "full": the rows of the state; "delta": changes to apply, in list order, to the preceding files
    #: of the same table and incremental_key (upserts by ``merge_key``; rows with ``_deleted`` true remove)
    kind: str = "full"
    merge_key: tuple[str, ...] | None = None

    def is_delta(self) -> bool:
        return self.kind == "delta"

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "bytes": self.bytes,
            "rows": self.rows,
            "sha256": self.sha256,
            "table": self.table,
            "format": self.format,
            "incremental_key": self.incremental_key,
            "kind": self.kind,
            "merge_key": list(self.merge_key) if self.merge_key is not None else None,
        }

    @staticmethod
    def from_dict(f: Fields) -> StateFileHandle:
        fmt = f.get("format", str)
        if fmt not in FILE_FORMATS:
            raise CorruptSnapshotError(f"{f.what} field 'format' is {fmt!r}, expected one of {FILE_FORMATS}")
        path = f.get("path", str)
        if not path or path.startswith("/") or ".." in path.split("/"):
            raise CorruptSnapshotError(f"{f.what} path {path!r} must be relative and stay inside the snapshot")
        kind = f.get("kind", str, optional=True, default="full")
        merge_key = f.get("merge_key", list, optional=True)
        if kind not in FILE_KINDS:
            raise CorruptSnapshotError(f"{f.what} field 'kind' is {kind!r}, expected one of {FILE_KINDS}")
        if kind == "delta" and (not merge_key or not all(isinstance(k, str) for k in merge_key)):
            raise CorruptSnapshotError(f"{f.what} is a delta file but has no 'merge_key' column names")
        return StateFileHandle(
            path=path,
            bytes=f.get("bytes", int),
            rows=f.get("rows", int),
            sha256=f.get("sha256", str),
            table=f.get("table", str),
            format=fmt,
            incremental_key=f.get("incremental_key", str, optional=True),
            kind=kind,
            merge_key=tuple(merge_key) if merge_key is not None else None,
        )


@dataclass(frozen=True, slots=True)
class OperatorSubtaskState:
    """The files one subtask acknowledged, and the key groups they cover (inclusive ``(start, end)``)."""

    subtask: int
    key_group_range: tuple[int, int] | None
    files: tuple[StateFileHandle, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "subtask": self.subtask,
            "key_group_range": list(self.key_group_range) if self.key_group_range is not None else None,
            "files": [h.to_dict() for h in self.files],
        }

    @staticmethod
    def from_dict(f: Fields) -> OperatorSubtaskState:
        rng = f.get("key_group_range", list, optional=True)
        if rng is not None:
            if len(rng) != 2 or not all(type(v) is int for v in rng):
                raise CorruptSnapshotError(f"{f.what} key_group_range must be [start, end] ints, found {rng!r}")
            rng = (rng[0], rng[1])
        files = f.get("files", list)
        return OperatorSubtaskState(
            subtask=f.get("subtask", int),
            key_group_range=rng,
            files=tuple(StateFileHandle.from_dict(f.sub("files", i)) for i in range(len(files))),
        )


@dataclass(frozen=True, slots=True)
class OperatorState:
    """All subtasks' state of one operator, with the configuration a restore must match."""

    uid: str
    name: str
    parallelism: int
    max_parallelism: int
    #: kind-specific, JSON-able: assigner and aggregate kind, allowed lateness, trigger...
    config: dict[str, Any] = field(default_factory=dict)
    subtasks: tuple[OperatorSubtaskState, ...] = ()

    def is_keyed(self) -> bool:
        return any(s.key_group_range is not None for s in self.subtasks)

    def files(self) -> Iterator[tuple[int, StateFileHandle]]:
        for s in self.subtasks:
            for h in s.files:
                yield s.subtask, h

    def to_dict(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "name": self.name,
            "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism,
            "config": self.config,
            "subtasks": [s.to_dict() for s in self.subtasks],
        }

    @staticmethod
    def from_dict(f: Fields) -> OperatorState:
        subtasks = f.get("subtasks", list)
        return OperatorState(
            uid=f.get("uid", str),
            name=f.get("name", str),
            parallelism=f.get("parallelism", int),
            max_parallelism=f.get("max_parallelism", int),
            config=f.get("config", dict, optional=True, default={}),
            subtasks=tuple(OperatorSubtaskState.from_dict(f.sub("subtasks", i)) for i in range(len(subtasks))),
        )


@dataclass(frozen=True, slots=True)
class SnapshotProperties:
    """Seed 001's CheckpointProperties as persisted: forced, externalized, savepoint, and when files are discarded."""

    type: str = "checkpoint"
    forced: bool = False
    externalized: bool = True
    discard_on: tuple[str, ...] = ("subsumed", "finished", "cancelled", "failed", "suspended")

    def __post_init__(self) -> None:
        if self.type not in SNAPSHOT_TYPES:
            raise JobDefinitionError("type", self.type, f"must be one of {SNAPSHOT_TYPES}")
        bad = [e for e in self.discard_on if e not in DISCARD_EVENTS]
        if bad:
            raise JobDefinitionError("discard_on", self.discard_on, f"may only hold {DISCARD_EVENTS}")
        if self.type == "savepoint" and self.discard_on:
            # seed 001: savepoints are never subsumed and never discarded by the system
            raise JobDefinitionError("discard_on", self.discard_on, "must be empty for a savepoint")

    @staticmethod
    def checkpoint(retain_on_cancellation: bool = True) -> SnapshotProperties:
        """A periodic checkpoint; ``retain_on_cancellation`` is ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION
        (kept when the job is cancelled or finishes), otherwise DELETE_ON_CANCELLATION."""
        discard = ("subsumed", "failed") if retain_on_cancellation else DISCARD_EVENTS
        return SnapshotProperties("checkpoint", False, True, tuple(discard))

    @staticmethod
    def savepoint() -> SnapshotProperties:
        return SnapshotProperties("savepoint", True, True, ())

    def is_savepoint(self) -> bool:
        return self.type == "savepoint"

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "forced": self.forced, "externalized": self.externalized,
                "discard_on": list(self.discard_on)}

    @staticmethod
    def from_dict(f: Fields) -> SnapshotProperties:
        try:
            return SnapshotProperties(
                type=f.get("type", str),
                forced=f.get("forced", bool),
                externalized=f.get("externalized", bool),
                discard_on=tuple(f.get("discard_on", list)),
            )
        except JobDefinitionError as exc:
            raise CorruptSnapshotError(f"{f.what}: {exc}") from exc


@dataclass(frozen=True, slots=True)
class SplitProgress:
    """Per source split at the checkpoint: where it was, its watermark, how long it had been idle."""

    offset: Any
    watermark_ms: int | None = None
    idle_ms: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"offset": self.offset, "watermark_ms": self.watermark_ms, "idle_ms": self.idle_ms}

    @staticmethod
    def from_dict(f: Fields) -> SplitProgress:
        return SplitProgress(
            offset=f.doc.get("offset"),
            watermark_ms=f.get("watermark_ms", int, optional=True),
            idle_ms=f.get("idle_ms", int, optional=True, default=0),
        )


@dataclass(frozen=True, slots=True)
class CompletenessLedger:
    """How complete the results up to this checkpoint are: progress per split, lateness counts
    since the previous checkpoint, and the oldest window still open (``{"start", "end"}`` ms or None)."""

    splits: dict[str, SplitProgress] = field(default_factory=dict)
    late_records_dropped: int = 0
    late_records_side_output: int = 0
    oldest_open_window: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "splits": {k: v.to_dict() for k, v in sorted(self.splits.items())},
            "late_records_dropped": self.late_records_dropped,
            "late_records_side_output": self.late_records_side_output,
            "oldest_open_window": self.oldest_open_window,
        }

    @staticmethod
    def from_dict(f: Fields) -> CompletenessLedger:
        splits = f.get("splits", dict, optional=True, default={})
        return CompletenessLedger(
            splits={k: SplitProgress.from_dict(Fields(v, f"{f.what}.splits[{k!r}]")) for k, v in splits.items()},
            late_records_dropped=f.get("late_records_dropped", int, optional=True, default=0),
            late_records_side_output=f.get("late_records_side_output", int, optional=True, default=0),
            oldest_open_window=f.get("oldest_open_window", dict, optional=True),
        )


@dataclass(frozen=True, slots=True)
class CheckpointMetadata:
    """A completed checkpoint or savepoint as persisted in ``_metadata``; see the module docstring."""

    job_id: str
    checkpoint_id: int
    job_name: str = ""
    properties: SnapshotProperties = field(default_factory=SnapshotProperties.checkpoint)
    trigger_timestamp_ms: int = 0
    complete_timestamp_ms: int = 0
    source_positions: dict[str, Any] = field(default_factory=dict)
    watermarks: dict[str, Any] = field(default_factory=dict)
    operators: tuple[OperatorState, ...] = ()
    ledger: CompletenessLedger = field(default_factory=CompletenessLedger)
    #: free-form outcome of the Great Expectations validation run; ``{"status": "passed", ...}``
    validation: dict[str, Any] | None = None
    format_version: str = FORMAT_VERSION

    def is_savepoint(self) -> bool:
        return self.properties.is_savepoint()

    def operator(self, uid: str) -> OperatorState:
        for op in self.operators:
            if op.uid == uid:
                return op
        known = ", ".join(op.uid for op in self.operators) or "none"
        raise KeyError(f"checkpoint {self.checkpoint_id} of job {self.job_id!r} has no operator {uid!r} (has: {known})")

    def files(self) -> Iterator[tuple[str, int, StateFileHandle]]:
        """Every ``(operator uid, subtask, handle)``."""
        for op in self.operators:
            for subtask, handle in op.files():
                yield op.uid, subtask, handle

    def referenced_paths(self) -> set[str]:
        return {h.path for _, _, h in self.files()}

    def total_bytes(self) -> int:
        return sum(h.bytes for _, _, h in self.files())

    def validation_passed(self) -> bool:
        return bool(self.validation) and self.validation.get("status") == "passed"

    def with_validation(self, validation: dict[str, Any]) -> CheckpointMetadata:
        return dataclasses.replace(self, validation=dict(validation))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": self.format_version,
            "job_id": self.job_id,
            "job_name": self.job_name,
            "checkpoint_id": self.checkpoint_id,
            "properties": self.properties.to_dict(),
            "trigger_timestamp_ms": self.trigger_timestamp_ms,
            "complete_timestamp_ms": self.complete_timestamp_ms,
            "source_positions": self.source_positions,
            "watermarks": self.watermarks,
            "operators": [op.to_dict() for op in self.operators],
            "ledger": self.ledger.to_dict(),
            "validation": self.validation,
        }

    def to_json(self) -> bytes:
        return seal(self.to_dict())

    def digest(self) -> str:
        """sha256 of the canonical document: equal digests, equal metadata (and so equal state-file checksums)."""
        return hashlib.sha256(self.to_json()).hexdigest()

    @staticmethod
    def from_json(data: bytes | str, where: str = "_metadata") -> CheckpointMetadata:
        doc = loads(data, where)
        version = check_version(doc, where, FORMAT_VERSION)
        _check_seal(doc, version, where)
        f = Fields(doc, where)
        operators = f.get("operators", list)
        return CheckpointMetadata(
            format_version=version,
            job_id=f.get("job_id", str),
            job_name=f.get("job_name", str, optional=True, default=""),
            checkpoint_id=f.get("checkpoint_id", int),
            properties=SnapshotProperties.from_dict(f.sub("properties")),
            trigger_timestamp_ms=f.get("trigger_timestamp_ms", int, optional=True, default=0),
            complete_timestamp_ms=f.get("complete_timestamp_ms", int, optional=True, default=0),
            source_positions=f.get("source_positions", dict, optional=True, default={}),
            watermarks=f.get("watermarks", dict, optional=True, default={}),
            operators=tuple(OperatorState.from_dict(f.sub("operators", i)) for i in range(len(operators))),
            ledger=CompletenessLedger.from_dict(Fields(doc.get("ledger") or {}, f"{where}.ledger")),
            validation=f.get("validation", dict, optional=True),
        )


def seal(document: dict[str, Any]) -> bytes:
    """The bytes of a ``_metadata`` document with its own checksum (``document_sha256``, see the module docstring):
    how the runtimes write it, and how a tool that rewrites one on purpose writes it back."""
    body = {k: v for k, v in document.items() if k != DOCUMENT_SHA256}
    return dumps({**body, DOCUMENT_SHA256: hashlib.sha256(dumps(body)).hexdigest()})


def _check_seal(doc: dict[str, Any], version: str, where: str) -> None:
    """Refuse a document whose content is not what it was sealed with, or a sealed format without its seal."""
    claimed = doc.pop(DOCUMENT_SHA256, None)
    if claimed is None:
        major, _, minor = version.partition(".")
        if (int(major), int(minor) if minor.isdigit() else 0) >= SEALED_SINCE:
            raise CorruptSnapshotError(
                f"{where} (format {version}) has no {DOCUMENT_SHA256}: the field was removed after it was written, "
                "so nothing in it can be trusted; restore from another checkpoint or savepoint")
        return
    actual = hashlib.sha256(dumps(doc)).hexdigest()
    if claimed != actual:
        raise CorruptSnapshotError(
            f"{where} was changed after it was written: its content does not match its {DOCUMENT_SHA256} "
            f"({str(claimed)[:12]}..., content {actual[:12]}...); a source position, a checkpoint id or any other "
            "field may have been edited, so it is refused. Restore from another checkpoint or savepoint (a tool that "
            "rewrites _metadata on purpose seals it again with checkpoints.metadata.seal)")
