"""A small healthy job state: tumbling sums, count windows and sessions over 2 subtasks, 8 key groups."""

from __future__ import annotations

import os

import pytest

os.environ["GX_ANALYTICS_ENABLED"] = "false"

from checkpoints import CheckpointStorage  # noqa: E402
from snapshot_writer import SubtaskRouter, window_nodes, write_snapshot  # noqa: E402
from validation_jobs import build  # noqa: E402

KEYS = ("a", "b", "c", "d", "e", "f")
WATERMARK = 2500


def fed_routers(parallelism: int = 2) -> dict[str, SubtaskRouter]:
    """Every window operator of validation_jobs.build, fed the same events, watermark at 2500 ms.

    ``tumbling`` (1 s, lateness 100 ms): [1000, 2000) fired and purged at 2099; [2000, 3000) open.
    ``count`` (3): a, b, c fired and purged, d, e, f hold counts of 2.  ``session`` (gap 1 s): [2600, 3900) open."""
    nodes, max_parallelism = window_nodes(build)
    routers = {uid: SubtaskRouter(node, max_parallelism, parallelism) for uid, node in nodes.items()}
    for router in routers.values():
        for i, key in enumerate(KEYS):
            router.process_element((key, i + 1, 1500), 1500)
            router.process_element((key, 1, 2600), 2600)
        router.process_watermark(WATERMARK)
        for key in KEYS[:3]:
            router.process_element((key, 2, 2900), 2900)
    return routers


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
