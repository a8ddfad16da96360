"""Checkpoint storage benchmark: snapshot write/read throughput, checkpoint completion time, incremental bytes.

For each backend (local filesystem; moto's S3 server over HTTP on 127.0.0.1) and
each state size (10 MB and 100 MB; 1 GB with ``--full``):

1. a full checkpoint: keyed state in 128 key-group files (incompressible values,
   so MB are real MB), written through ``CheckpointStorageLocation`` with
   incremental keys, ``_metadata`` finalized, added to the
   ``RetainedCheckpointStore``: write MB/s and completion time;
2. restore: ``load_snapshot_from`` with checksum verification, then every state
   table read: read MB/s;
3. an incremental checkpoint after 1% of keys (chosen at random, so every key
   group is touched) changed: only delta files go up; bytes uploaded versus the
   full snapshot (target: under 5%), and the restored row count is checked.

Prints one human line per measurement and, last, one JSON object.
Run: ``.venv/bin/python bench/bench_storage.py [--sizes 10,100] [--full] [--backends fs,s3]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from checkpoints import (  # noqa: E402
    CheckpointMetadata,
    CheckpointStorage,
    LocalFileSystemStore,
    OperatorState,
    OperatorSubtaskState,
    RetainedCheckpointStore,
    S3Store,
    load_snapshot_from,
)

KEY_GROUPS = 128
VALUE_BYTES = 48
ROW_BYTES_ESTIMATE = 58  # value + compressed key/key-group per row, measured with Parquet+zstd
UID = "window-op"
STATE = "contents"
MERGE_KEY = ("key_group", "key")
MB = 1 << 20


def build_state(size_mb: int, rng: np.random.Generator) -> tuple[list[pa.Table], int]:
    rows = size_mb * MB // ROW_BYTES_ESTIMATE
    per_group = rows // KEY_GROUPS
    tables = []
    for kg in range(KEY_GROUPS):
        keys = pa.array([f"key-{kg}-{i}" for i in range(per_group)], pa.string())
        values = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(VALUE_BYTES), per_group, [None, pa.py_buffer(rng.bytes(VALUE_BYTES * per_group))]
        )
        tables.append(pa.table({"key_group": pa.array(np.full(per_group, kg, np.int32)), "key": keys, "value": values}))
    return tables, per_group * KEY_GROUPS


def metadata_for(job_id: str, checkpoint_id: int, files_by_group: list[tuple]) -> CheckpointMetadata:
    subtask = OperatorSubtaskState(0, (0, KEY_GROUPS - 1), tuple(h for chain in files_by_group for h in chain))
    return CheckpointMetadata(
        job_id=job_id,
        checkpoint_id=checkpoint_id,
        job_name="bench",
        complete_timestamp_ms=int(time.time() * 1000),
        operators=(OperatorState(UID, "window", 1, KEY_GROUPS, {}, (subtask,)),),
    )


def run_case(store, backend: str, size_mb: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    tables, total_rows = build_state(size_mb, rng)
    job_id = f"bench-{size_mb}mb-{uuid.uuid4().hex[:6]}"
    storage = CheckpointStorage(store, job_id)
    completed = RetainedCheckpointStore(storage, retained=2)
    completed.recover()

    # 1. full checkpoint
    start = time.perf_counter()
    location = storage.initialize_location(1, known_shared=completed.shared_files_in_use())
    chains = [
        (location.write_state_file(UID, 0, STATE, t, key_group=kg, incremental_key=f"{UID}/kg{kg}/{STATE}"),)
        for kg, t in enumerate(tables)
    ]
    written = time.perf_counter()
    metadata = metadata_for(job_id, 1, chains)
    location.finalize(metadata)
    completed.add_checkpoint(metadata)
    done = time.perf_counter()
    full_bytes = metadata.total_bytes()

    # 2. restore with verification
    start_read = time.perf_counter()
    snapshot = load_snapshot_from(store, f"{job_id}/chk-1", expected_job_id=job_id)
    restored_rows = snapshot.state_tables(UID)[STATE].num_rows
    read_s = time.perf_counter() - start_read
    assert restored_rows == total_rows, (restored_rows, total_rows)

    # 3. incremental checkpoint after 1% of keys changed (random keys: every key group is dirty)
    per_group = tables[0].num_rows
    changed = rng.choice(total_rows, size=max(1, total_rows // 100), replace=False)
    by_group: dict[int, list[int]] = {}
    for index in changed:
        by_group.setdefault(int(index) // per_group, []).append(int(index) % per_group)
    start_inc = time.perf_counter()
    location2 = storage.initialize_location(2, known_shared=completed.shared_files_in_use())
    chains2 = []
    for kg, chain in enumerate(chains):
        rows = sorted(by_group.get(kg, []))
        if not rows:
            chains2.append(chain)  # an untouched key group: the runtime acknowledges the same handles
            continue
        delta = tables[kg].take(pa.array(rows))
        delta = delta.set_column(2, "value", pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(VALUE_BYTES), len(rows), [None, pa.py_buffer(rng.bytes(VALUE_BYTES * len(rows)))]))
        chains2.append(location2.write_state_changes(
            UID, 0, STATE, delta, previous=chain, merge_key=MERGE_KEY, incremental_key=f"{UID}/kg{kg}/{STATE}"))
    metadata2 = metadata_for(job_id, 2, chains2)
    location2.finalize(metadata2)
    completed.add_checkpoint(metadata2)
    inc_s = time.perf_counter() - start_inc
    inc_bytes = location2.uploaded_bytes + len(metadata2.to_json())
    check = load_snapshot_from(store, f"{job_id}/chk-2", verify_checksums=False).state_tables(UID)[STATE]
    assert check.num_rows == total_rows, (check.num_rows, total_rows)

    return {
        "backend": backend,
        "state_mb": size_mb,
        "snapshot_bytes": full_bytes,
        "files": KEY_GROUPS,
        "write_mb_s": round(full_bytes / MB / (written - start), 1),
        "checkpoint_completion_s": round(done - start, 3),
        "read_verify_mb_s": round(full_bytes / MB / read_s, 1),
        "incremental_keys_changed_pct": 1.0,
        "incremental_bytes": inc_bytes,
        "incremental_pct_of_full": round(100 * inc_bytes / full_bytes, 2),
        "incremental_completion_s": round(inc_s, 3),
        "dirty_key_groups": len(by_group),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100", help="state sizes in MB, comma separated")
    parser.add_argument("--full", action="store_true", help="also 1 GB (1024 MB)")
    parser.add_argument("--backends", default="fs,s3", help="fs, s3 (moto server over HTTP), or both")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    if args.full:
        sizes.append(1024)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]

    results = []
    server = None
    try:
        with tempfile.TemporaryDirectory(prefix="sluice-bench-") as tmp:
            for backend in backends:
                if backend == "fs":
                    store = LocalFileSystemStore(Path(tmp) / "fs")
                elif backend == "s3":
                    for name, value in {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
                        os.environ.setdefault(name, value)
                    from moto.server import ThreadedMotoServer

                    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request

                    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
                    server.start()
                    host, port = server.get_host_and_port()
                    store = S3Store("sluice-bench", "checkpoints", endpoint_url=f"http://{host}:{port}")
                    store.client.create_bucket(Bucket="sluice-bench")
                else:
                    parser.error(f"unknown backend {backend!r}; use fs or s3")
                for size in sizes:
                    r = run_case(store, "filesystem" if backend == "fs" else "moto-server", size, args.seed)
                    results.append(r)
                    print(
                        f"{r['backend']:>11} {size:>5} MB: write {r['write_mb_s']:>7} MB/s, "
                        f"checkpoint completed in {r['checkpoint_completion_s']} s, "
                        f"read+verify {r['read_verify_mb_s']:>7} MB/s; 1% keys changed -> "
                        f"{r['incremental_bytes']} B uploaded = {r['incremental_pct_of_full']}% of full "
                        f"({r['dirty_key_groups']}/{KEY_GROUPS} key groups dirty, {r['incremental_completion_s']} s)",
                        flush=True,
                    )
    finally:
        if server is not None:
            server.stop()
    worst = max(r["incremental_pct_of_full"] for r in results)
    print(json.dumps({"benchmark": "checkpoint_storage", "results": results,
                      "incremental_target_pct": 5.0, "incremental_target_met": worst < 5.0}))


if __name__ == "__main__":
    main()
