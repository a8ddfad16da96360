"""What the unbounded purchases job must output: shared by the Airflow and reliability tests.

Tests import it as ``purchases_reference`` (``tests/`` is on ``sys.path`` through its conftest).
"""

from __future__ import annotations

#: the unbounded purchases job without late or malformed events: every tumbling result has one right value
REAL_JOB_PARAMS = {"events_per_split": None, "late_fraction": 0.0, "malformed_fraction": 0.0, "events_per_second": 20}


def reference_tumbling(max_window_end: int, events_per_second: int,
                       **generator: object) -> dict[tuple[str, int], int]:
    """Per (user, window start) total qty of every 1-minute window of the unbounded purchases generator
    (no late, no malformed events) ending by ``max_window_end``: what its tumbling output must be.
    ``generator``: further PurchaseJobConfig fields the job set (``num_keys``, ``start_timestamp_ms``...)."""
    from collections import defaultdict

    from engine.examples.purchases import PurchaseJobConfig, purchase_source

    config = PurchaseJobConfig(events_per_split=None, late_fraction=0.0, malformed_fraction=0.0,
                               events_per_second=events_per_second,
                               **{k: v for k, v in generator.items() if k != "live"})
    source = purchase_source(config)
    names = source._key_names()
    start = source.start_timestamp_ms
    stop = int((max_window_end + 10_000 - start) * config.events_per_second / 1000) + 1
    totals: dict[tuple[str, int], int] = defaultdict(int)
    for split in range(config.num_splits):
        cols = source.columns(split, 0, stop)
        keep = cols["present"] & (cols["ts"] < max_window_end)
        windows = cols["ts"][keep] - cols["ts"][keep] % 60_000
        for key, window, qty in zip(cols["key"][keep].tolist(), windows.tolist(), cols["qty"][keep].tolist()):
            totals[(names[key], window)] += qty
    return dict(totals)
