"""``env.get_config()``: PyFlink's ExecutionConfig, the settings of it that mean something in Sluice.

- ``set_auto_watermark_interval(ms)``: how often sources ask their watermark generators for a periodic watermark
  (Flink's ``pipeline.auto-watermark-interval``).  **0 turns periodic watermarks off**, as in Flink: bounded
  out-of-orderness and idleness then never advance event time before the end of input.  A positive interval on the
  local runtime emits at most once per interval of the job's processing-time clock (``env.set_clock``), checked
  after each bundle of records a source reads; on Spark it emits once per epoch (``epoch_records``), the epoch being
  Spark's unit of progress.  Unset (None, the default) keeps each runtime's own cadence: after every bundle
  (local), once per epoch (Spark).  Flink's default is 200 ms; Sluice's default cadence is finer.
- ``set_parallelism``/``get_parallelism``, ``set_max_parallelism``/``get_max_parallelism``: the environment's
  (one setting, two ways to reach it, as in Flink).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from engine.errors import JobDefinitionError

if TYPE_CHECKING:
    from engine.api.environment import StreamExecutionEnvironment


class ExecutionConfig:
    def __init__(self, env: StreamExecutionEnvironment) -> None:
        self._env = env
        self._auto_watermark_interval_ms: int | None = None

    def set_auto_watermark_interval(self, interval: int) -> ExecutionConfig:
        """The periodic watermark interval in ms: 0 disables periodic watermarks (see the module docstring)."""
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 0:
            raise JobDefinitionError("interval", interval, "must be an int of milliseconds >= 0 (0 disables "
                                     "periodic watermarks)")
        self._auto_watermark_interval_ms = interval
        return self

    def get_auto_watermark_interval(self) -> int | None:
        """The interval set, or None: each runtime's own cadence (after every bundle locally, per epoch on Spark)."""
        return self._auto_watermark_interval_ms

    def set_parallelism(self, parallelism: int) -> ExecutionConfig:
        self._env.set_parallelism(parallelism)
        return self

    def get_parallelism(self) -> int:
        return self._env.get_parallelism()

    def set_max_parallelism(self, max_parallelism: int) -> ExecutionConfig:
        self._env.set_max_parallelism(max_parallelism)
        return self

    def get_max_parallelism(self) -> int:
        return self._env.get_max_parallelism()

    def __repr__(self) -> str:
        return (f"ExecutionConfig(auto_watermark_interval={self._auto_watermark_interval_ms}, "
                f"parallelism={self.get_parallelism()}, max_parallelism={self.get_max_parallelism()})")
