"""Helpers shared by the checkpoint storage tests: fault injection and building checkpoints as a runtime would."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa

from checkpoints import (
    CheckpointMetadata,
    CheckpointProperties,
    CheckpointStorage,
    CompletedCheckpointStore,
    CompletenessLedger,
    OperatorSnapshot,
    S3Store,
    SplitProgress,
    SubtaskState,
)


class FaultInjector:
    """Makes an S3 operation fail ``times`` times (None: always) before reaching the server.

    ``kind``: "throttle" (503 SlowDown), "error500" (500 InternalError) or
    "timeout" (botocore ReadTimeoutError).  ``key_contains`` limits it to keys
    containing that text; ``part_number`` to one UploadPart."""

    def __init__(self, store: S3Store) -> None:
        self.store = store
        self.injected = 0
        self._lock = threading.Lock()

    def fail(self, operation: str, kind: str, times: int | None = 1, key_contains: str | None = None,
             part_number: int | None = None) -> None:
        from botocore.awsrequest import AWSResponse
        from botocore.exceptions import ReadTimeoutError

        remaining = [times]

        def handler(request, **kwargs):
            url = request.url
            if key_contains is not None and key_contains not in url:
                return None
            if part_number is not None and f"partNumber={part_number}" not in url:
                return None
            with self._lock:
                if remaining[0] is not None:
                    if remaining[0] <= 0:
                        return None
                    remaining[0] -= 1
                self.injected += 1
            if kind == "timeout":
                raise ReadTimeoutError(endpoint_url=url)
            status, code = {"throttle": (503, "SlowDown"), "error500": (500, "InternalError")}[kind]
            body = f"<Error><Code>{code}</Code><Message>injected {code}</Message></Error>".encode()
            return AWSResponse(url, status, {"Content-Type": "application/xml"}, _Raw(body))

        self.store.client.meta.events.register_first(f"before-send.s3.{operation}", handler)


class _Raw:
    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **kwargs):
        yield self.body


# -- building checkpoints the way a runtime would -----------------------------------------------

MAX_PARALLELISM = 8


def state_table(key_group: int, version: int, rows: int = 5) -> pa.Table:
    """A small keyed-state table of one key group; ``version`` changes its content."""
    return pa.table({
        "key_group": pa.array([key_group] * rows, pa.int32()),
        "key": pa.array([f"k{key_group}-{i}" for i in range(rows)], pa.string()),
        "value": pa.array([f"{version}:{i}" for i in range(rows)], pa.string()),
    })


def write_checkpoint(
    storage: CheckpointStorage,
    checkpoint_id: int,
    *,
    versions: dict[int, int] | None = None,
    parallelism: int = 2,
    incremental: bool = True,
    known_shared=None,
    savepoint: bool = False,
    now_ms: int = 1_000_000,
) -> tuple[CheckpointMetadata, Any]:
    """Write one operator's state, one file per key group (content from ``versions[kg]``), plus a
    private per-subtask file, finalize ``_metadata``; returns the metadata and the location."""
    versions = versions or {}
    location = (
        storage.initialize_savepoint_location(checkpoint_id)
        if savepoint
        else storage.initialize_location(checkpoint_id, known_shared=known_shared)
    )
    per = MAX_PARALLELISM // parallelism
    subtasks = []
    for subtask in range(parallelism):
        start, end = subtask * per, (subtask + 1) * per - 1
        files = [
            location.write_state_file(
                "window-op", subtask, "contents", state_table(kg, versions.get(kg, 0)), key_group=kg,
                incremental_key=f"window-op/kg{kg}/contents" if incremental else None,
            )
            for kg in range(start, end + 1)
        ]
        files.append(location.write_state_file(
            "window-op", subtask, "timers", pa.table({"key_group": pa.array([start], pa.int32()),
                                                      "ts": [checkpoint_id]})
        ))
        subtasks.append(SubtaskState(subtask, (start, end), tuple(files)))
    metadata = CheckpointMetadata(
        job_id=storage.job_id,
        job_name="test job",
        checkpoint_id=checkpoint_id,
        properties=CheckpointProperties.savepoint() if savepoint else CheckpointProperties.checkpoint(),
        trigger_timestamp_ms=now_ms + checkpoint_id * 1000,
        complete_timestamp_ms=now_ms + checkpoint_id * 1000 + 10,
        source_positions={"split-0": checkpoint_id * 10},
        watermarks={"valve": {"split-0": checkpoint_id * 100}},
        operators=(OperatorSnapshot("window-op", "window", parallelism, MAX_PARALLELISM,
                                    {"assigner": "tumbling", "size_ms": 1000}, tuple(subtasks)),),
        ledger=CompletenessLedger({"split-0": SplitProgress(checkpoint_id * 10, checkpoint_id * 100, 0)}),
    )
    location.finalize(metadata)
    return metadata, location


def complete_checkpoint(storage, completed: CompletedCheckpointStore, checkpoint_id: int, **kwargs):
    metadata, _ = write_checkpoint(storage, checkpoint_id, known_shared=completed.shared_files_in_use(), **kwargs)
    return metadata, completed.add_checkpoint(metadata)


def keys(store) -> set[str]:
    return {info.key for info in store.list("")}
