"""Every verb that runs or finds a job takes ``--endpoint-url`` and ``--region``, as the storage verbs do (a new user's
trial: ``sluice status`` refused them and, without AWS_ENDPOINT_URL, retried against amazonaws.com)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from checkpoints.status import StatusDocument, write_status
from checkpoints.backends import open_store

VERBS = ["run", "restore", "status", "list", "view", "savepoint", "stop", "cancel"]


@pytest.mark.parametrize("verb", VERBS)
def test_the_verb_offers_the_s3_options(verb: str) -> None:
    done = subprocess.run([sys.executable, "-m", "engine.cli", verb, "--help"], capture_output=True, text=True,
                          timeout=60)
    assert "--endpoint-url" in done.stdout and "--region" in done.stdout, done.stdout


def test_status_reads_a_moto_bucket_through_the_flag_alone(moto_s3) -> None:
    storage = f"s3://{moto_s3.bucket}/chk"
    store = open_store(storage, endpoint_url=moto_s3.endpoint)
    write_status(store, StatusDocument(job_id="flagged", heartbeat_ms=1, state="FINISHED"))
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    done = subprocess.run([sys.executable, "-m", "engine.cli", "status", "flagged", "--storage", storage,
                           "--endpoint-url", moto_s3.endpoint, "--region", "us-east-1"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "FINISHED" in done.stdout.upper(), done.stdout
