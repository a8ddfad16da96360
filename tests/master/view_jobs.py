"""Jobs for the job-view tests, run by a real ``sluice run`` (``PYTHONPATH`` names this folder).

``build``: two live generator splits (records released by the wall clock from ``start_timestamp_ms``);
split 1 produces nothing for offsets ``[idle_from, idle_to)``, so with ``with_idleness`` it goes idle for
a while and comes back: the view must show the idle period.  ``split_prefix`` names the splits, so a test
can give them a name with markup in it.
"""

from __future__ import annotations

from typing import Any

from engine.api.time import Duration, Time
from engine.io.generator_source import GeneratorSource
from engine.io.source import SourceSplit
from engine.watermarks.strategy import WatermarkStrategy


class NamedGeneratorSource(GeneratorSource):
    """A generator whose splits are named ``<prefix><index>``."""

    def __init__(self, prefix: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.prefix = prefix

    def discover_splits(self) -> list[SourceSplit]:
        return [SourceSplit(f"{self.prefix}{s}", s) for s in range(self.num_splits)]


def build(env: Any, start_timestamp_ms: int, idle_from: int = 30, idle_to: int = 90, events_per_second: int = 20,
          split_prefix: str = "split-", source_name: str = "events",
          checkpoint_timeout_ms: int | None = None) -> dict[str, Any]:
    """``checkpoint_timeout_ms``: a timeout short enough makes checkpoints expire (failures the view must
    show with their reason); the job then tolerates any number of them."""
    if checkpoint_timeout_ms is not None:
        config = env.get_checkpoint_config()
        config.set_checkpoint_timeout(checkpoint_timeout_ms)
        config.set_tolerable_checkpoint_failure_number(1_000_000)
    source = NamedGeneratorSource(split_prefix, num_splits=2, events_per_split=None, num_keys=5,
                                  events_per_second=events_per_second, live=True,
                                  start_timestamp_ms=start_timestamp_ms, late_fraction=0.05, late_by_max_ms=20_000,
                                  idle_splits={1: [(idle_from, idle_to)]})
    strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(lambda e, _ts: e["ts"]) \
        .with_idleness(Duration.of_millis(400))
    counts = env.from_source(source, strategy, source_name).map(lambda e: (e["user_id"], 1)) \
        .key_by(lambda p: p[0]).time_window(Time.seconds(1)).sum(1).name("per-second counts").uid("counts")
    return {"counts": counts}
