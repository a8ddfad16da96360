"""A small real job master for the plugin's tests while ``sluice run`` is not available.

It takes the ``sluice run`` flags the deploy operator passes, serves the real
control API (``engine.master.api.create_app``) on 127.0.0.1, writes real
checkpoints every ``--checkpoint-interval`` ms through the ``checkpoints``
package (retained-handles index with N retention), publishes the real status
document, and takes real self-contained savepoints (``savepoint_from_checkpoint``).
Its "state" is synthetic (one keyed table per key group), so it stands in for
the job's protocol, not for the window job; the end-to-end test with the real
purchases job is in test_end_to_end_real_job.py.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from concurrent.futures import Future

import pyarrow as pa

from checkpoints import (
    CheckpointMetadata,
    CheckpointStorage,
    CompletenessLedger,
    OperatorState,
    OperatorSubtaskState,
    RetainedCheckpointStore,
    SnapshotProperties,
    SplitProgress,
    open_store,
)
from checkpoints.restore import load_snapshot
from checkpoints.savepoints import savepoint_from_checkpoint
from checkpoints.status import StatusDocument, write_status
from engine.master.api import create_app
from engine.master.operations import OperationRegistry
from engine.master.server import ControlServer
from engine.state.codec import encode
from engine.state.key_groups import key_group_for_encoded_key

MAX_PARALLELISM = 8
KEYS_BY_GROUP: dict[int, list[str]] = {}
for _user in range(20):
    _key = encode(f"user-{_user}")
    KEYS_BY_GROUP.setdefault(key_group_for_encoded_key(_key, MAX_PARALLELISM), []).append(_key)


def state_rows(key_group: int, checkpoint_id: int, now_ms: int) -> pa.Table:
    """Window contents in the stored layout: one open 1-minute window per key, its count as the value."""
    keys = KEYS_BY_GROUP[key_group]
    window_start = now_ms - now_ms % 60_000 + 3_600_000  # a window still open (ends after the watermark)
    return pa.table({
        "key_group": pa.array([key_group] * len(keys), pa.int32()), "key": pa.array(keys, pa.string()),
        "namespace": pa.array(["window"] * len(keys), pa.string()),
        "window_start": pa.array([window_start] * len(keys), pa.int64()),
        "window_end": pa.array([window_start + 60_000] * len(keys), pa.int64()),
        "value": pa.array([encode(checkpoint_id)] * len(keys), pa.string()),
        "value_num": pa.array([float(checkpoint_id)] * len(keys), pa.float64()),
    })


class FakeJob:
    def __init__(self, args: argparse.Namespace) -> None:
        self.job_id = args.job_id
        self.args = args
        self.store = open_store(args.storage)
        self.storage = CheckpointStorage(self.store, self.job_id)
        self.completed = RetainedCheckpointStore(self.storage, retained=args.retained)
        self.completed.recover()
        self.next_id = self.completed.max_checkpoint_id() + 1
        self.state = "running"
        self.lock = threading.Lock()
        self.restored_from = None
        self.records = 0
        if args.from_savepoint:
            snapshot = load_snapshot(args.from_savepoint)  # refuses a corrupt snapshot, as a real master must
            self.restored_from = args.from_savepoint
            self.records = int(snapshot.metadata.source_positions.get("split-0", 0))
            self.next_id = max(self.next_id, snapshot.metadata.checkpoint_id + 1)
        self.last_completed: tuple[int, int] | None = None
        self.url = None

    def take_checkpoint(self) -> CheckpointMetadata:
        with self.lock:
            cid = self.next_id
            self.next_id += 1
            started = int(time.time() * 1000)
            location = self.storage.initialize_location(cid, known_shared=self.completed.shared_files_in_use())
            p = self.args.parallelism
            per = MAX_PARALLELISM // p
            subtasks = []
            for subtask in range(p):
                start, end = subtask * per, (MAX_PARALLELISM - 1 if subtask == p - 1 else (subtask + 1) * per - 1)
                files = tuple(location.write_state_file("counts", subtask, "contents", state_rows(kg, cid, started),
                                                        key_group=kg)
                              for kg in range(start, end + 1) if kg in KEYS_BY_GROUP)
                subtasks.append(OperatorSubtaskState(subtask, (start, end), files))
            self.records += 100
            metadata = CheckpointMetadata(
                job_id=self.job_id, job_name=self.job_id, checkpoint_id=cid,
                properties=SnapshotProperties.checkpoint(), trigger_timestamp_ms=started,
                complete_timestamp_ms=int(time.time() * 1000), source_positions={"split-0": self.records},
                watermarks={"valve": {"split-0": started}},
                operators=(OperatorState("counts", "counts", p, MAX_PARALLELISM, {}, tuple(subtasks)),),
                ledger=CompletenessLedger({"split-0": SplitProgress(self.records, self.records, 0)}),
            )
            location.finalize(metadata)
            self.completed.add_checkpoint(metadata)
            self.last_completed = (cid, metadata.complete_timestamp_ms)
            return metadata

    # -- JobControl --------------------------------------------------------------------------------
    def status(self) -> dict:
        last = self.last_completed
        return {"state": self.state.upper(), "last_completed_checkpoint": last[0] if last else None,
                "last_completed_ms": last[1] if last else None, "parallelism": self.args.parallelism}

    def checkpoint_history(self) -> list:
        return [{"checkpoint_id": h.checkpoint_id, "status": "COMPLETED", "completed_ms": h.completed_ms}
                for h in self.completed.all_checkpoints()]

    def trigger_savepoint(self, target_dir, stop: bool = False) -> Future:
        future: Future = Future()

        def run() -> None:
            try:
                metadata = self.take_checkpoint()
                storage = CheckpointStorage(self.store, self.job_id, savepoint_store=open_store(target_dir))
                future.set_result(savepoint_from_checkpoint(storage, metadata))
                if stop:
                    self.finish("finished")
            except Exception as exc:  # delivered to the operation
                future.set_exception(exc)

        threading.Thread(target=run, daemon=True).start()
        return future

    def stop_with_savepoint(self, target_dir, drain) -> Future:
        return self.trigger_savepoint(target_dir, stop=True)

    def cancel(self) -> None:
        self.finish("cancelled")

    def finish(self, state: str) -> None:
        self.state = state
        self.publish()

        def leave() -> None:
            time.sleep(3)  # keep answering operation polls for a moment, then exit
            os._exit(0)

        threading.Thread(target=leave, daemon=True).start()

    def publish(self) -> None:
        last = self.last_completed
        write_status(self.store, StatusDocument(
            job_id=self.job_id, heartbeat_ms=int(time.time() * 1000), state=self.state.upper(),
            last_completed_checkpoint=last[0] if last else None, last_completed_ms=last[1] if last else None,
            extra={"control_url": self.url, "parallelism": self.args.parallelism,
                   "restored_from": self.restored_from, "pid": os.getpid()}))


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("verb")
    parser.add_argument("job")
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--storage", required=True)
    parser.add_argument("--retained", type=int, default=3)
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--checkpoint-interval", dest="checkpoint_interval_ms", type=int, default=1000)
    parser.add_argument("--from-savepoint")
    args, _ = parser.parse_known_args(argv)
    job = FakeJob(args)
    server = ControlServer(create_app(job, OperationRegistry(), os.environ.get("SLUICE_CONTROL_TOKEN")),
                           "127.0.0.1", 0).start()
    job.url = server.url
    job.publish()
    last_checkpoint = time.monotonic()
    while job.state == "running":
        time.sleep(0.2)
        if time.monotonic() - last_checkpoint >= args.checkpoint_interval_ms / 1000:
            job.take_checkpoint()
            last_checkpoint = time.monotonic()
        if job.state == "running":
            job.publish()
    time.sleep(10)


if __name__ == "__main__":
    main(sys.argv[1:])
