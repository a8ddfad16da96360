"""A fixed-bucket histogram of durations kept by a runtime, so every observation reaches Prometheus.

The job master reads a job's status every few seconds; a Spark job may run many epochs in between, so the
master cannot observe each epoch's duration itself.  The runtime observes each one into cumulative bucket
counts (bounded: one int per bucket) and reports them in ``JobStatusReport.epoch_durations``; the master
exposes them as ``sluice_epoch_duration_seconds`` (engine/master/metrics.py), as prometheus_client's own
Histogram would.  Counts are the current attempt's: a restart starts them again, which Prometheus reads as
a counter reset.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from engine.errors import JobDefinitionError

#: epochs from tens of milliseconds (a small local[2] epoch) to minutes (large state on a cluster)
EPOCH_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


@dataclass
class DurationHistogram:
    """Cumulative-on-read bucket counts of durations in seconds; ``+Inf`` is implied."""

    buckets_s: tuple[float, ...] = EPOCH_BUCKETS_S
    counts: list[int] = field(init=False)
    sum_s: float = field(init=False, default=0.0)
    count: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if list(self.buckets_s) != sorted(set(self.buckets_s)) or not self.buckets_s:
            raise JobDefinitionError("buckets_s", self.buckets_s, "must be increasing and not empty")
        self.counts = [0] * (len(self.buckets_s) + 1)  # the last one: above every bound

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.buckets_s, seconds)] += 1
        self.sum_s += seconds
        self.count += 1

    def to_json(self) -> dict[str, Any]:
        """``{"buckets": [[upper bound or "+Inf", cumulative count], ...], "sum_s", "count"}``."""
        cumulative, running = [], 0
        for bound, n in zip([*self.buckets_s, "+Inf"], list(self.counts)):
            running += n
            cumulative.append([bound, running])
        return {"buckets": cumulative, "sum_s": self.sum_s, "count": self.count}
