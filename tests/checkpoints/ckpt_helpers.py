"""Helpers shared by the checkpoint storage tests: fault injection and building checkpoints as a runtime would."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa

from checkpoints import (
    CheckpointMetadata,
    CheckpointStorage,
    CompletenessLedger,
    OperatorState,
    OperatorSubtaskState,
    RetainedCheckpointStore,
    S3Store,
    SnapshotProperties,
    SplitProgress,
)


class FaultInjector:
    """Makes an S3 operation fail ``times`` times (None: always), below botocore's retry logic.

    ``kind``: "throttle" (503 SlowDown), "error500" (500 InternalError) or
    "timeout" (botocore ReadTimeoutError).  ``key_contains`` limits it to keys
    containing that text; ``part_number`` to one UploadPart.

    By default the faulted request never reaches the store.  With
    ``lost_response=True`` it does take effect and only its response is replaced
    by the fault (a response lost on the way back), the case where a retried
    conditional write "loses" against its own first attempt.
    """

    def __init__(self, store: S3Store) -> None:
        self.store = store
        self.injected = 0
        self._lock = threading.Lock()
        if store.endpoint_url is None:
            _guard_in_process_moto(store.client)

    def fail(self, operation: str, kind: str, times: int | None = 1, key_contains: str | None = None,
             part_number: int | None = None, lost_response: bool = False) -> None:
        from botocore.awsrequest import AWSResponse
        from botocore.exceptions import ReadTimeoutError

        remaining = [times]
        in_process = self.store.endpoint_url is None

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
            if lost_response:  # the request takes effect, then its response is lost
                if in_process:
                    from moto.core.models import botocore_stubber

                    botocore_stubber(event_name=f"before-send.s3.{operation}", request=request)
                else:
                    _send_for_real(request)
            request.sluice_fault = True  # in-process moto must not execute it (again)
            if kind == "timeout":
                raise ReadTimeoutError(endpoint_url=url)
            status, code = {"throttle": (503, "SlowDown"), "error500": (500, "InternalError")}[kind]
            body = f"<Error><Code>{code}</Code><Message>injected {code}</Message></Error>".encode()
            return AWSResponse(url, status, {"Content-Type": "application/xml"}, _Raw(body))

        self.store.client.meta.events.register_first(f"before-send.s3.{operation}", handler)


def _guard_in_process_moto(client) -> None:
    """botocore calls every before-send handler, so moto's in-process stubber would still execute a
    faulted request; wrap it so requests marked as faulted are skipped."""
    from moto.core.models import botocore_stubber

    events = client.meta.events
    events.unregister("before-send", botocore_stubber)

    def guarded(event_name, request, **kwargs):
        if getattr(request, "sluice_fault", False):
            return None
        return botocore_stubber(event_name=event_name, request=request, **kwargs)

    events.register("before-send", guarded)


def _send_for_real(request) -> None:
    import urllib3

    body = request.body
    if hasattr(body, "read"):
        position = body.tell()
        data = body.read()
        body.seek(position)
    else:
        data = body
    urllib3.PoolManager().request(request.method, request.url, body=data, headers=dict(request.headers))


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
        subtasks.append(OperatorSubtaskState(subtask, (start, end), tuple(files)))
    metadata = CheckpointMetadata(
        job_id=storage.job_id,
        job_name="test job",
        checkpoint_id=checkpoint_id,
        properties=SnapshotProperties.savepoint() if savepoint else SnapshotProperties.checkpoint(),
        trigger_timestamp_ms=now_ms + checkpoint_id * 1000,
        complete_timestamp_ms=now_ms + checkpoint_id * 1000 + 10,
        source_positions={"split-0": checkpoint_id * 10},
        watermarks={"valve": {"split-0": checkpoint_id * 100}},
        operators=(OperatorState("window-op", "window", parallelism, MAX_PARALLELISM,
                                    {"assigner": "tumbling", "size_ms": 1000}, tuple(subtasks)),),
        ledger=CompletenessLedger({"split-0": SplitProgress(checkpoint_id * 10, checkpoint_id * 100, 0)}),
    )
    location.finalize(metadata)
    return metadata, location


def complete_checkpoint(storage, completed: RetainedCheckpointStore, checkpoint_id: int, **kwargs):
    metadata, _ = write_checkpoint(storage, checkpoint_id, known_shared=completed.shared_files_in_use(), **kwargs)
    return metadata, completed.add_checkpoint(metadata)


def keys(store) -> set[str]:
    return {info.key for info in store.list("")}


#: the unbounded purchases job the snapshot tests stop with a savepoint (``events_per_split`` None while running)
PURCHASES_PARAMS = {"events_per_second": 50, "num_keys": 20}


def stop_purchases_job(base: Any, runtime: str, drain: bool = False, savepoint_first: bool = False,
                       min_checkpoints: int = 1) -> tuple[str, str | None]:
    """Run the purchase job under a real job master until ``min_checkpoints`` checkpoints (or with
    ``savepoint_first`` a savepoint) completed, then stop it with a savepoint through the control API, as
    ``sluice stop`` does; returns ``(stop savepoint URI, savepoint taken while running or None)``."""
    import time

    from engine.master.client import ControlClient
    from engine.master.master import JobMaster, MasterConfig

    master = JobMaster(MasterConfig(
        job_spec="engine.examples.purchases:build", job_name="purchases", runtime=runtime, parallelism=2,
        params={**PURCHASES_PARAMS, "events_per_split": None}, checkpoint_interval_ms=200,
        storage_uri=(base / "chk").as_uri(), savepoint_dir=(base / "sp").as_uri(), output_dir=str(base / "out"),
        status_interval_ms=100, linger_after_end_s=0.2,
        runtime_options={"bundle_size": 64} if runtime == "local" else {})).start()
    client = ControlClient(master.url, "purchases")
    try:
        deadline = time.monotonic() + 240
        while not savepoint_first and (client.status().get("last_completed_checkpoint") or 0) < min_checkpoints:
            assert time.monotonic() < deadline, f"fewer than {min_checkpoints} checkpoints within 240 s"
            time.sleep(0.05)
        running = client.wait("savepoint", client.trigger_savepoint())["operation"]["location"] \
            if savepoint_first else None
        stop = client.wait("stop", client.stop(drain=drain), timeout_s=240)
        assert stop["status"]["id"] == "COMPLETED", stop
    finally:
        if not master.client.get_job_execution_result().done():
            master.client.cancel()
        master.wait()
        client.close()
    return stop["operation"]["location"], running


def increment_once(store: Any, key: str) -> bool:
    """One read / ``put_if_match`` increment of the integer in ``key``: True if it landed, False if another write
    came first.  The storage tests' child processes import it too (this folder on their ``sys.path``)."""
    from checkpoints.errors import PreconditionFailed, StorageUnavailable

    try:
        data, etag = store.get_with_etag(key)
        store.put_if_match(key, str(int(data) + 1).encode(), etag)
    except (PreconditionFailed, StorageUnavailable):  # a write landed between reading and writing, or while reading
        return False
    return True

