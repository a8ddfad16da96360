"""The main job: per-user purchase counts over a generated purchase stream (seed 000's example).

Seed 000 counts, per user, how many items were bought in each window.  This job
runs the four window kinds of the seed over one generated stream:

- tumbling 1-minute event-time windows (``time_window(1 min)``), with 5 s of
  allowed lateness and later records sent to a ``late`` side output (incremental
  ``reduce`` plus a ProcessWindowFunction that adds the window bounds);
- sliding 1-minute windows every 30 s (``time_window(1 min, 30 s)``), likewise;
- session windows with a 30 s gap (``EventTimeSessionWindows.with_gap``), reporting
  each session's bounds through a ProcessWindowFunction;
- tumbling count windows of 3 purchases (``count_window(3)``).

The generator mixes in out-of-order, late and malformed events, so the run also
shows late-data handling and the dead-letter count.

With ``input_dir`` the purchases come from JSON-lines files landing in that folder
(local or ``s3://``) instead, read as they land (``read_files(..., monitor_interval=...)``):
the job then runs until it is stopped (``sluice stop --savepoint``, with ``--drain`` to
end event time and fire every window).  engine/examples/purchase_files.py writes such
files from the generator; the demo and the Airflow example deployment are fed that way.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable

from engine.api.datastream import DataStream
from engine.api.environment import StreamExecutionEnvironment
from engine.api.functions import OutputTag, ProcessWindowFunction
from engine.api.time import Duration, Time
from engine.io.generator_source import GeneratorSource
from engine.watermarks.strategy import WatermarkStrategy
from engine.errors import JobDefinitionError
from engine.windowing.assigners import EventTimeSessionWindows

LATE = OutputTag("late")


@dataclass(frozen=True)
class PurchaseJobConfig:
    num_splits: int = 4
    events_per_split: int | None = 5_000
    num_keys: int = 100
    events_per_second: int = 1
    out_of_orderness_ms: int = 2_000
    late_fraction: float = 0.01
    late_by_max_ms: int = 60_000
    malformed_fraction: float = 0.001
    seed: int = 7
    #: a feed whose events happen now: offset i is read once the wall clock reaches its event time
    #: (GeneratorSource's live mode; needs ``start_timestamp_ms``, the same on every restore)
    live: bool = False
    start_timestamp_ms: int | None = None
    #: read purchases from JSON-lines files landing in this folder (local or s3://) instead of the generator
    input_dir: str | None = None
    #: how often a running job lists ``input_dir`` again
    monitor_interval_ms: int = 1_000


class SessionTotal(ProcessWindowFunction):
    """Emits (user, session_start, session_end, items) for each session window, from all its elements."""

    def process(self, key: Any, context: Any, elements: Iterable[tuple[str, int]]) -> Iterable[tuple[str, int, int, int]]:
        window = context.window()
        yield (key, window.start, window.end, sum(qty for _, qty in elements))


class WithWindow(ProcessWindowFunction):
    """Adds the window bounds to a pre-aggregated (user, items) result: (user, start, end, items)."""

    def process(self, key: Any, context: Any, elements: Iterable[tuple[str, int]]) -> Iterable[tuple[str, int, int, int]]:
        window = context.window()
        for _, items in elements:
            yield (key, window.start, window.end, items)


def _add_qty(a: tuple[str, int], b: tuple[str, int]) -> tuple[str, int]:
    return (a[0], a[1] + b[1])


def purchase_source(config: PurchaseJobConfig) -> GeneratorSource:
    return GeneratorSource(
        num_splits=config.num_splits,
        events_per_split=config.events_per_split,
        num_keys=config.num_keys,
        events_per_second=config.events_per_second,
        out_of_orderness_ms=config.out_of_orderness_ms,
        late_fraction=config.late_fraction,
        late_by_max_ms=config.late_by_max_ms,
        malformed_fraction=config.malformed_fraction,
        seed=config.seed,
        live=config.live,
        start_timestamp_ms=config.start_timestamp_ms,
    )


def _event_time(event: dict[str, Any], _record_ts: Any) -> int:
    return event["ts"]  # a malformed event lacks "ts" or carries a string: it becomes a dead letter


def build(env: StreamExecutionEnvironment, config: PurchaseJobConfig | None = None,
          **overrides: Any) -> dict[str, DataStream]:
    """Add the job to ``env``; returns the result streams by name.

    ``overrides`` are PurchaseJobConfig fields (``sluice run ... --param events_per_split=null``
    makes the stream unbounded, for a long-running job).
    """
    known = {f.name for f in dataclasses.fields(PurchaseJobConfig)}
    for name in overrides:
        if name not in known:
            raise JobDefinitionError(name, overrides[name], f"is not a parameter of this job; it takes "
                                     f"{', '.join(sorted(known))}")
    if config is None:
        config = PurchaseJobConfig(**overrides)
    elif overrides:
        config = dataclasses.replace(config, **overrides)
    strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(config.out_of_orderness_ms)) \
        .with_timestamp_assigner(_event_time)
    if config.input_dir is not None:
        events = env.read_files(config.input_dir, "jsonl", monitor_interval=Duration.of_millis(
            config.monitor_interval_ms)).assign_timestamps_and_watermarks(strategy)
    else:
        events = env.from_source(purchase_source(config), strategy, "purchases")
    purchases = events.map(lambda e: (e["user_id"], e["qty"])).name("to (user, qty)")
    by_user = purchases.key_by(lambda p: p[0])

    tumbling = by_user.time_window(Time.minutes(1)).allowed_lateness(Time.seconds(5)) \
        .side_output_late_data(LATE).reduce(_add_qty, WithWindow()).name("tumbling 1 min").uid("tumbling")
    sliding = by_user.time_window(Time.minutes(1), Time.seconds(30)).reduce(_add_qty, WithWindow()) \
        .name("sliding 1 min / 30 s").uid("sliding")
    sessions = by_user.window(EventTimeSessionWindows.with_gap(Time.seconds(30))).process(SessionTotal()) \
        .name("session 30 s gap").uid("session")
    counts = by_user.count_window(3).sum(1).name("count 3").uid("count")  # seed 000's countWindow(...).sum(1)
    return {
        "tumbling": tumbling,
        "sliding": sliding,
        "session": sessions,
        "count": counts,
        "late": tumbling.get_side_output(LATE),
    }
