"""Restart strategies: how often and how soon a failed job is restarted from its latest checkpoint.

PyFlink spells them ``RestartStrategies.fixed_delay_restart(restart_attempts, delay_between_attempts)``
and ``RestartStrategies.no_restart()``; Sluice keeps the spelling, and adds Java Flink's
``exponential_delay_restart`` (PyFlink's deprecated RestartStrategies lacks it).  Seed 002
"Recovery": on a failure the job restarts from the latest completed checkpoint k;
this decides whether it restarts at all.  Both runtimes read the strategy from
``env.set_restart_strategy(...)`` (or the runtime option ``restart_strategy``) and restart
in-process (engine/runtime/local/job_run.py, engine/runtime/spark/job_run.py); a job master that
dies is restarted from outside by Airflow's ``sluice_supervise`` (docs/airflow.md).
The engine's default is ``no_restart()``: a failure surfaces at once unless a strategy is set.
A job run by a job master (``sluice run``) with checkpointing and no strategy of its own gets
Flink's default for checkpointed jobs since 1.19, ``exponential_delay_restart()`` (engine/master).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from engine.api.time import SizeLike, non_negative_millis
from engine.errors import JobDefinitionError


class RestartStrategyConfiguration:
    """A restart strategy; each run of a job asks it, through :meth:`backoff`, whether and when to restart."""

    def backoff(self) -> RestartBackoff:
        raise NotImplementedError


class RestartBackoff:
    """The per-run state of a strategy: one call per failure."""

    def on_failure(self, now_ms: int) -> int | None:
        """The delay before restarting after a failure at ``now_ms``, or None when no restart is allowed."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class FixedDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
    """``max_restarts`` restarts at most, ``delay_ms`` apart (0 restarts: fail on the first failure)."""

    max_restarts: int
    delay_ms: int

    def can_restart(self, restarts_so_far: int) -> bool:
        return restarts_so_far < self.max_restarts

    def backoff(self) -> RestartBackoff:
        return _FixedDelayBackoff(self)


class _FixedDelayBackoff(RestartBackoff):
    def __init__(self, config: FixedDelayRestartStrategyConfiguration) -> None:
        self.config = config
        self.failures = 0

    def on_failure(self, now_ms: int) -> int | None:
        self.failures += 1
        return self.config.delay_ms if self.config.can_restart(self.failures - 1) else None

    def describe(self) -> str:
        return f"restart strategy allows {self.config.max_restarts}"


@dataclass(frozen=True, slots=True)
class ExponentialDelayRestartStrategyConfiguration(RestartStrategyConfiguration):
    """Flink's ``exponential-delay`` (its default for checkpointed jobs since 1.19): the delay starts at
    ``initial_delay_ms``, grows by ``multiplier`` per failure up to ``max_delay_ms``, varies by
    ``jitter_factor``, and is reset once the job ran ``reset_threshold_ms`` without a failure;
    at most ``max_attempts`` restarts in a row without such a reset (None: unlimited)."""

    initial_delay_ms: int
    max_delay_ms: int
    multiplier: float
    reset_threshold_ms: int
    jitter_factor: float
    max_attempts: int | None = None

    def backoff(self) -> RestartBackoff:
        return _ExponentialDelayBackoff(self)


class _ExponentialDelayBackoff(RestartBackoff):
    def __init__(self, config: ExponentialDelayRestartStrategyConfiguration) -> None:
        self.config = config
        self.current_ms: float | None = None
        self.last_failure_ms: int | None = None
        self.attempts = 0

    def on_failure(self, now_ms: int) -> int | None:
        c = self.config
        if self.last_failure_ms is not None and now_ms - self.last_failure_ms >= c.reset_threshold_ms:
            self.current_ms, self.attempts = None, 0  # ran long enough without failing: start over
        self.last_failure_ms = now_ms
        self.attempts += 1
        if c.max_attempts is not None and self.attempts > c.max_attempts:
            return None
        self.current_ms = c.initial_delay_ms if self.current_ms is None else min(
            self.current_ms * c.multiplier, c.max_delay_ms)
        jitter = self.current_ms * c.jitter_factor * random.uniform(-1.0, 1.0)
        return max(0, int(self.current_ms + jitter))

    def describe(self) -> str:
        limit = "unlimited" if self.config.max_attempts is None else str(self.config.max_attempts)
        return f"exponential-delay restart strategy allows {limit} attempts before its reset"


class RestartStrategies:
    """Factories, as in PyFlink's ``pyflink.common.restart_strategy.RestartStrategies``."""

    @staticmethod
    def no_restart() -> RestartStrategyConfiguration:
        return FixedDelayRestartStrategyConfiguration(0, 0)

    @staticmethod
    def fixed_delay_restart(restart_attempts: int, delay_between_attempts: SizeLike = 0) -> RestartStrategyConfiguration:
        if isinstance(restart_attempts, bool) or not isinstance(restart_attempts, int) or restart_attempts < 0:
            raise JobDefinitionError("restart_attempts", restart_attempts, "must be an int >= 0")
        return FixedDelayRestartStrategyConfiguration(
            restart_attempts, non_negative_millis(delay_between_attempts, "delay_between_attempts"))

    @staticmethod
    def exponential_delay_restart(initial_restart_delay: SizeLike = 1_000, max_restart_delay: SizeLike = 60_000,
                                  backoff_multiplier: float = 1.2, reset_backoff_threshold: SizeLike = 3_600_000,
                                  jitter_factor: float = 0.1,
                                  max_attempts: int | None = None) -> RestartStrategyConfiguration:
        """Java Flink's ``exponentialDelayRestart``; the defaults are Flink's since 1.19 (1 s, 1 min, 1.2, 1 h, 0.1)."""
        initial = non_negative_millis(initial_restart_delay, "initial_restart_delay")
        maximum = non_negative_millis(max_restart_delay, "max_restart_delay")
        if maximum < initial:
            raise JobDefinitionError("max_restart_delay", max_restart_delay, f"must be >= initial_restart_delay ({initial} ms)")
        if isinstance(backoff_multiplier, bool) or not isinstance(backoff_multiplier, (int, float)) \
                or backoff_multiplier < 1.0:
            raise JobDefinitionError("backoff_multiplier", backoff_multiplier, "must be a number >= 1.0")
        if isinstance(jitter_factor, bool) or not isinstance(jitter_factor, (int, float)) \
                or not 0.0 <= jitter_factor <= 1.0:
            raise JobDefinitionError("jitter_factor", jitter_factor, "must be a number between 0.0 and 1.0")
        if max_attempts is not None and (isinstance(max_attempts, bool) or not isinstance(max_attempts, int)
                                         or max_attempts < 0):
            raise JobDefinitionError("max_attempts", max_attempts, "must be an int >= 0 or None (unlimited)")
        return ExponentialDelayRestartStrategyConfiguration(
            initial, maximum, float(backoff_multiplier),
            non_negative_millis(reset_backoff_threshold, "reset_backoff_threshold"), float(jitter_factor),
            max_attempts)


def restart_strategy_of(env: object) -> RestartStrategyConfiguration:
    """The strategy set on ``env`` (``set_restart_strategy`` or the runtime option), else no_restart()."""
    getter = getattr(env, "get_restart_strategy", None)
    strategy = getter() if getter is not None else None
    if strategy is None:
        strategy = env.get_runtime_options().get("restart_strategy")  # type: ignore[attr-defined]
    if strategy is None:
        return RestartStrategies.no_restart()
    if not isinstance(strategy, RestartStrategyConfiguration):
        raise JobDefinitionError("restart_strategy", strategy,
                                 "must come from RestartStrategies.fixed_delay_restart(...), "
                                 "exponential_delay_restart(...) or no_restart()")
    return strategy
