"""A small healthy job state: tumbling sums, count windows and sessions over 2 subtasks, 8 key groups."""

from __future__ import annotations

import os

import pytest

os.environ["GX_ANALYTICS_ENABLED"] = "false"

from checkpoints import CheckpointStorage  # noqa: E402
from snapshot_writer import write_snapshot  # noqa: E402
from validation_state import KEYS, WATERMARK, fed_routers  # noqa: E402,F401 - shared with the tests

@pytest.fixture
def storage(tmp_path):
    return CheckpointStorage(f"file://{tmp_path / 'checkpoints'}", "job-1",
                             savepoint_store=f"file://{tmp_path / 'savepoints'}")


@pytest.fixture
def docs_dir(tmp_path):
    return tmp_path / "data_docs"


@pytest.fixture
def healthy_uri(storage):
    return write_snapshot(storage, 1, fed_routers(), source_positions={"split-0": 10, "split-1": 20})
