"""Exactly-once file sinks written from the executors: tasks stage parts, the driver only commits.

Issue 5: sinks must not funnel an epoch's output through the driver.  A ``write_files`` sink in
EXACTLY_ONCE mode (engine/io/file_sink.py) is a two-phase-commit sink whose open transaction is a
list of staged part files; its pre-commit names them and its commit moves them into view.  So the
part files can be written by whichever process has the values — here the Spark task that produced
them — as long as they land in the driver's open transaction:

1. At the start of epoch n the driver hands the tasks each such sink and the id of its open
   transaction (:class:`StagingTarget`, plain data).
2. A task writes everything it produced for the sink in that epoch as one part,
   ``_staging/<txn>/e<epoch>-<channel digest>.<ext>`` (the channel — a split or a window subtask —
   is unique in the epoch, so a retried or recomputed task writes the same object again), and
   returns a row with the part's key and record count.
3. The driver adds the keys, sorted, to the open transaction (``adopt_parts``).  At barrier n the
   sink's pre-commit puts them in the checkpoint's handle; they become visible when the checkpoint
   completes, exactly as parts the driver wrote itself (seed 002, two-phase commit).

Parts of an attempt that died before its checkpoint completed stay under ``_staging/`` of a
transaction no restored handle names: invisible, and removable by the sink's
``discard_orphaned_staging``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

STAGED_PART_PREFIX = "e"


@dataclass(frozen=True, slots=True)
class StagingTarget:
    """Where a task stages one sink's values this epoch."""

    path: str
    format: str
    extension: str
    storage_options: dict
    txn_id: str
    epoch: int
    #: the stream's declared type, for a ``text`` sink (FileSink.input_type: lines are Java's toString)
    input_type: Any = None

    def part_key(self, channel: str) -> str:
        digest = hashlib.sha256(channel.encode("utf-8")).hexdigest()[:20]
        return f"_staging/{self.txn_id}/{STAGED_PART_PREFIX}{self.epoch:010d}-{digest}.{self.extension}"

    def write(self, channel: str, chunks: list[Any]) -> dict[str, Any]:
        """Runs in the task: one staged part with the values of ``chunks`` (lists of values and
        TupleColumns, in order, engine/io/formats.py ``encode_chunks``); its key, sha256 and size."""
        from engine.io.formats import encode_chunks
        from engine.io.storage import open_folder

        key = self.part_key(channel)
        data = encode_chunks(self.format, chunks, self.input_type.java_string if self.input_type is not None else None)
        open_folder(self.path, self.storage_options).put_bytes(key, data)
        return {"key": key, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def stages_on_executors(sink: Any) -> bool:
    """Whether a sink's values can be staged by the tasks: an exactly-once FileSink."""
    from engine.io.file_sink import FileSink

    return isinstance(sink, FileSink) and sink.is_exactly_once


def staging_target(writer: Any, epoch: int) -> StagingTarget:
    """The target for the writer's open transaction (the driver's TwoPhaseCommitDriver over a FileSink)."""
    sink = writer.sink
    return StagingTarget(sink.path, sink.format, sink.extension, executor_storage_options(sink.path,
                                                                                          sink.storage_options),
                         writer.open_transaction().txn_id, epoch, sink.input_type)


def executor_storage_options(path: str, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` for opening ``path`` in a task (engine/io/storage.py ``options_for_another_process``)."""
    from engine.io.storage import options_for_another_process

    return options_for_another_process(path, options)


def adopt_parts(writer: Any, parts: list[dict[str, Any]]) -> None:
    """Add staged parts written by tasks (``StagingTarget.write``'s answers) to the writer's open
    transaction, in key order, with their checksums."""
    txn = writer.open_transaction()
    for part in sorted(parts, key=lambda p: p["key"]):
        txn.staged.append(part["key"])
        txn.digests[part["key"]] = (part["sha256"], int(part["bytes"]))
