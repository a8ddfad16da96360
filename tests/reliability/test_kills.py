"""Seeded SIGKILLs of a real ``sluice run`` master, each followed by a restart from the newest retained checkpoint
the way supervision does it (issue 17's "Done means").

Each round starts a master (the first fresh, later ones ``--from-savepoint chk-<newest>`` with ``--lease-wait``),
waits for a checkpoint newer than any seen, then a seeded random extra delay, and SIGKILLs the whole process group
(the Spark JVM included).  On Spark, the last round's master then loses only its driver JVM (SIGKILL, as the OOM
killer would) and must go on, on a new JVM.  After the last round a master is stopped cleanly.  Then:

- the committed tumbling output equals the generator's reference: no window lost, none written twice;
- exactly N (3) checkpoints are retained: the index names N, and no other ``chk-<id>`` folder holds a ``_metadata``;
- after housekeeping (``sluice checkpoints clean --job-stopped --delete``) no orphan is left, and no sink has a
  staged part left under ``_staging/``.

CI runs a few kills (3 local / 1 Spark, then the JVM loss); ``SLUICE_LONG_TESTS=1`` runs 10 on each runtime, and
``SLUICE_RELIABILITY_KILLS`` any number, e.g.
``SLUICE_RELIABILITY_KILLS=50 .venv/bin/python -m pytest -n 0 --timeout 6000 tests/reliability/test_kills.py``.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sys
import time

import psutil
import pytest

from long_tests import long_tests
from purchases_reference import REAL_JOB_PARAMS
from reliability_support import (
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

#: 0: CI's 3 local / 1 Spark
KILLS = int(os.environ.get("SLUICE_RELIABILITY_KILLS", "10" if long_tests() else "0"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(max(600, 120 * KILLS + 300))]  # a Spark round: 40 to 220 s


def test_seeded_kills_lose_nothing_duplicate_nothing_and_leave_exactly_n_checkpoints(where: Where) -> None:
    kills = KILLS or (3 if where.runtime == "local" else 1)
    rng = random.Random(17)
    ttl = ["--lease-ttl", "3" if where.runtime == "local" else "10"]
    startup_s = 120 if where.runtime == "local" else 300
    tmp_path = where.tmp_path
    seen = 0
    timings = []
    process = None
    try:
        for round_no in range(kills + 1):
            extra = [] if round_no == 0 else ["--lease-wait", "40", "--from-savepoint", where.checkpoint_uri(seen)]
            started = time.monotonic()
            process = start(where, f"round-{round_no}", *ttl, *extra)
            before = seen
            wait(lambda: retained(where) and max(retained(where)) > before, startup_s,
                  f"a checkpoint after {before} in round {round_no}", process, tmp_path=tmp_path)
            timings.append(round(time.monotonic() - started, 1))
            if round_no == kills:
                if where.runtime == "spark":
                    jvm_pid = _the_spark_jvm_dies_under_a_running_master(where, process)
                break
            time.sleep(rng.uniform(0.0, 2.0))  # somewhere in the middle of an epoch, an upload, a commit
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)
            seen = max(retained(where))
        stop = cli("stop", "purchases", "--storage", where.storage, timeout=300)
        assert stop.returncode == 0, stop.stderr
        assert process.wait(timeout=300) == 0

        rows = committed_output_matches_the_reference(tmp_path / "out")
        # what an operator reads (issue 18): the restore source, checkpoints with their figures, Spark's epochs
        last_log = log_of(tmp_path, f"round-{kills}")
        assert f"restored from {where.checkpoint_uri(seen)}" in last_log, last_log[-2000:]
        assert re.search(r"checkpoint \d+ completed in \d+ ms", last_log), last_log[-2000:]
        if where.runtime == "spark":
            assert re.search(r"job purchases: epoch \d+ took \d+ ms", last_log), last_log[-2000:]
            assert f"the Spark driver JVM (pid {jvm_pid}) has exited" in last_log, last_log[-3000:]
        kept = every_retained_checkpoint_is_intact(where)
        assert len(kept) == 3
        store = store_of(where)
        with_metadata = sorted({int(info.key.split("/")[1].removeprefix("chk-"))
                                for info in store.list("purchases/chk-") if info.key.endswith("/_metadata")})
        assert with_metadata == sorted(kept), with_metadata

        clean = cli("checkpoints", "clean", "purchases", "--storage", where.storage, "--job-stopped", "--delete",
                     "--grace-period", "0", "--json")
        assert clean.returncode == 0, clean.stderr
        again = cli("checkpoints", "clean", "purchases", "--storage", where.storage, "--job-stopped",
                     "--grace-period", "0", "--json")
        assert json.loads(again.stdout)["orphans"] == []
        staged = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "out").glob("*/_staging/**/*")
                        if p.is_file())
        assert staged == [], staged
        orphans_deleted = len(json.loads(clean.stdout)["orphans"])
        record(f"kills-{where.runtime}", {"kills": kills, "rows_compared": rows, "lost": 0, "duplicated": 0,
                                           "retained": kept, "orphans_deleted": orphans_deleted,
                                           "seconds_to_first_checkpoint_per_round": timings,
                                           "params": REAL_JOB_PARAMS, "python": sys.version.split()[0]})
    finally:
        if process is not None:
            kill(process)


def _the_spark_jvm_dies_under_a_running_master(where: Where, process) -> int:
    """SIGKILL only the master's Spark driver JVM (as the OOM killer would); the master must survive it, start a
    new JVM and take a newer checkpoint restored from its newest one.  Before, every restart reused PySpark's dead
    gateway and failed at once, forever (engine/runtime/spark/session.py ``forget_dead_jvm``).  Returns the pid."""
    jvms = []
    for child in psutil.Process(process.pid).children(recursive=True):
        try:
            if child.name() == "java":
                jvms.append(child.pid)
        except psutil.Error:  # gone, or a zombie (spark-submit's shell after it exec'd the JVM)
            continue
    assert len(jvms) == 1, jvms
    seen = max(retained(where))
    os.kill(jvms[0], signal.SIGKILL)
    wait(lambda: max(retained(where)) > seen, 300, f"a checkpoint after {seen} on a new JVM", process,
         tmp_path=where.tmp_path)
    return jvms[0]
