"""One job, one master: two real ``sluice run`` processes for one job id and storage (issue 17).

The client is an operator (or a supervisor) starting a second master while the
first still runs, or while the first is frozen past its lease (a GC pause, a
SIGSTOP, a VM migration) and then wakes up.  Done means: the second master is
refused and names the holder; in the frozen variant the new master takes over,
the old one stops at once when it wakes (exit 75, nothing written), every
retained checkpoint is intact and the committed output has no duplicate and no
gap against the generator's reference.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from reliability_support import (
    EXIT_FENCED,
    Where,
    cli,
    committed_output_matches_the_reference,
    every_retained_checkpoint_is_intact,
    kill,
    log_of,
    record,
    retained,
    start,
    store_of,
    wait,
)

pytestmark = pytest.mark.slow


def test_a_second_master_for_a_running_job_is_refused_and_names_the_holder(tmp_path: Path) -> None:
    first = start(tmp_path, "first")
    try:
        wait(lambda: len(retained(tmp_path)) >= 2, 120, "two retained checkpoints", first, tmp_path=tmp_path)
        started = time.monotonic()
        second = start(tmp_path, "second")
        assert second.wait(timeout=120) == 1
        refused_after_s = time.monotonic() - started
        refused = log_of(tmp_path, "second")
        assert "already has a running job master" in refused and f"pid {first.pid}" in refused, refused
        assert first.poll() is None, "the first master must keep running"
        before = max(retained(tmp_path))
        wait(lambda: max(retained(tmp_path)) > before, 60, "the first master to keep checkpointing", first)
        every_retained_checkpoint_is_intact(tmp_path)
        stop = cli("stop", "purchases", "--storage", (tmp_path / "chk").as_uri())
        assert stop.returncode == 0, stop.stderr
        assert first.wait(timeout=120) == 0, log_of(tmp_path, "first")[-3000:]
        # a clean stop releases the lease: the next master starts without waiting for it to expire
        from checkpoints.lease import read_lease

        view = read_lease(store_of(tmp_path), "purchases")
        assert view is not None and view.lease.released and view.lease.pid == first.pid
        record("second-master-refused", {"refused_after_s": round(refused_after_s, 2),
                                          "retained_intact": len(retained(tmp_path))})
    finally:
        kill(first)



def test_a_master_frozen_past_its_lease_is_fenced_when_it_wakes_and_nothing_is_lost_or_doubled(where: Where) -> None:
    tmp_path = where.tmp_path
    # Spark drivers under load (two JVMs and the S3 server on two cores) renew late: a longer lease
    ttl = ["--lease-ttl", "3" if where.runtime == "local" else "10"]
    first = start(where, "first", *ttl)
    second = None
    try:
        wait(lambda: len(retained(where)) >= 3, 300, "three retained checkpoints", first, tmp_path=tmp_path)
        os.killpg(first.pid, signal.SIGSTOP)  # frozen: no heartbeat, no lease renewal
        frozen_at = max(retained(where))
        latest = where.checkpoint_uri(frozen_at)
        # what supervision does once the heartbeat is stale: a new master from the latest checkpoint,
        # waiting for the frozen master's lease to run out
        second = start(where, "second", *ttl, "--lease-wait", "30", "--from-savepoint", latest)
        wait(lambda: max(retained(where)) >= frozen_at + 3, 300, "the new master's checkpoints", second,
              tmp_path=tmp_path)
        from checkpoints.index import read_index
        from checkpoints.lease import read_lease

        lease = read_lease(store_of(where), "purchases")
        assert lease is not None and lease.lease.pid == second.pid and lease.lease.fencing_token == 2
        assert read_index(store_of(where), "purchases").index.fencing_token == 2

        os.killpg(first.pid, signal.SIGCONT)  # the old master wakes up mid-job
        woke = time.monotonic()
        assert first.wait(timeout=120) == EXIT_FENCED, log_of(tmp_path, "first")[-3000:]
        fenced_after_s = time.monotonic() - woke
        assert "FENCED" in log_of(tmp_path, "first")
        assert second.poll() is None, "the new master must keep running"
        before = max(retained(where))
        wait(lambda: max(retained(where)) > before, 120, "the new master to keep checkpointing", second)
        intact = every_retained_checkpoint_is_intact(where)
        assert read_lease(store_of(where), "purchases").lease.pid == second.pid

        stop = cli("stop", "purchases", "--storage", where.storage, timeout=300)
        assert stop.returncode == 0, stop.stderr
        assert second.wait(timeout=300) == 0, log_of(tmp_path, "second")[-3000:]
        rows = committed_output_matches_the_reference(tmp_path / "out")
        record(f"frozen-master-fenced-{where.runtime}", {"fenced_exit_after_wake_s": round(fenced_after_s, 2),
                                         "retained_checkpoints_intact": intact, "rows_compared": rows,
                                         "duplicated": 0, "lost": 0})
    finally:
        kill(first, *([second] if second is not None else []))
