"""S3 misbehaving at the HTTP level under a running ``sluice run`` master (issue 17's "Done means").

A real master checkpoints to a moto S3 server through :class:`FaultProxy`, which in turn refuses
connections, resets them, hangs, answers 500 and answers 503 SlowDown.  The refusal lasts longer
than the master's lease, so its lease expires and must be renewed afterwards.  After each fault the
job must complete a new checkpoint on its own, and every checkpoint the index names must be
complete.  In the end the job is stopped with a savepoint and its committed output is compared with
the generator's reference.

CI: refusal 12 s (lease 5 s), the other faults 4 s each.  By hand: 30 s with ``SLUICE_LONG_TESTS=1``, any length
with ``SLUICE_RELIABILITY_OUTAGE_S``.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from fault_proxy import FaultProxy
from long_tests import long_tests
from reliability_support import (
    Where,
    cli,
    committed_output_matches_the_reference,
    every_retained_checkpoint_is_intact,
    kill,
    record,
    retained,
    start,
    wait,
)

pytestmark = pytest.mark.slow

OUTAGE_S = float(os.environ.get("SLUICE_RELIABILITY_OUTAGE_S", "30" if long_tests() else "12"))
FAULTS = [("refuse", OUTAGE_S), ("error500", 4.0), ("slowdown", 4.0), ("reset", 4.0), ("hang", 4.0)]


def test_a_job_survives_refused_reset_hanging_500_and_throttled_s3_and_its_output_is_exact(tmp_path: Path,
                                                                                            monkeypatch,
                                                                                            moto_endpoint) -> None:
    import boto3

    endpoint = urlsplit(moto_endpoint)  # the suite's moto server (tests/conftest.py)
    proxy = FaultProxy(endpoint.hostname, endpoint.port)
    direct = moto_endpoint
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": direct}.items():
        monkeypatch.setenv(name, value)  # the test reads storage directly, never through the faults
    bucket = f"sluice-faults-{uuid.uuid4().hex[:12]}"  # moto's servers in one process share their state
    boto3.client("s3").create_bucket(Bucket=bucket)
    where = Where(tmp_path, s3=bucket)
    master = None
    figures: list[dict] = []
    try:
        monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)  # the master goes through the proxy
        master = start(where, "master", "--lease-ttl", "5")
        monkeypatch.setenv("AWS_ENDPOINT_URL", direct)
        wait(lambda: len(retained(where)) >= 3, 120, "three retained checkpoints", master, tmp_path=tmp_path)
        for mode, seconds in FAULTS:
            before = max(retained(where))
            proxy.mode = mode
            time.sleep(seconds)
            proxy.mode = "pass"
            healed = time.monotonic()
            wait(lambda: max(retained(where)) > before + 1, 180, f"checkpoints again after {mode}", master,
                  tmp_path=tmp_path)
            intact = every_retained_checkpoint_is_intact(where)
            figures.append({"fault": mode, "seconds": seconds, "recovered_after_s": round(time.monotonic() - healed, 1),
                            "retained_intact": intact})
        status = json.loads(cli("status", "purchases", "--storage", where.storage, "--json").stdout)
        stop = cli("stop", "purchases", "--storage", where.storage, timeout=300)
        assert stop.returncode == 0, stop.stderr
        assert master.wait(timeout=300) == 0, (tmp_path / "master.log").read_text()[-3000:]
        rows = committed_output_matches_the_reference(tmp_path / "out")
        record("s3-faults", {"faults": figures, "rows_compared": rows, "lost": 0, "duplicated": 0,
                              "restarts": status.get("restarts"), "failures_seen": len(status.get("failures", [])),
                              "proxy_connections": proxy.connections})
    finally:
        if master is not None:
            kill(master)
        proxy.stop()
