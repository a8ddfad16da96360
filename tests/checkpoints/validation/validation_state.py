"""The healthy job state the validation tests start from (importable: tests must not import conftest,
whose module name is shared by every test folder)."""

from __future__ import annotations

from snapshot_writer import SubtaskRouter, window_nodes
from validation_jobs import build

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
