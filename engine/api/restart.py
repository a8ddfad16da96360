"""Restart strategies: how often and how soon a failed job is restarted from its latest checkpoint.

PyFlink spells them ``RestartStrategies.fixed_delay_restart(restart_attempts, delay_between_attempts)``
and ``RestartStrategies.no_restart()``; Sluice keeps the spelling.  Seed 002
"Recovery": on a failure the job restarts from the latest completed checkpoint k;
this decides whether it restarts at all.  Both runtimes read the strategy from
``env.set_restart_strategy(...)`` (or the runtime option ``restart_strategy``) and restart
in-process (engine/runtime/local/job_run.py, engine/runtime/spark/job_run.py); a job master that
dies is restarted from outside by Airflow's ``sluice_supervise`` (docs/airflow.md).
The default is ``no_restart()``: a failure surfaces at once unless a strategy is set.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.api.time import SizeLike, non_negative_millis
from engine.errors import JobDefinitionError


@dataclass(frozen=True, slots=True)
class RestartStrategyConfiguration:
    """``max_restarts`` restarts at most, ``delay_ms`` apart (0 restarts: fail on the first failure)."""

    max_restarts: int
    delay_ms: int

    def can_restart(self, restarts_so_far: int) -> bool:
        return restarts_so_far < self.max_restarts


class RestartStrategies:
    """Factories, as in PyFlink's ``pyflink.common.restart_strategy.RestartStrategies``."""

    @staticmethod
    def no_restart() -> RestartStrategyConfiguration:
        return RestartStrategyConfiguration(0, 0)

    @staticmethod
    def fixed_delay_restart(restart_attempts: int, delay_between_attempts: SizeLike = 0) -> RestartStrategyConfiguration:
        if isinstance(restart_attempts, bool) or not isinstance(restart_attempts, int) or restart_attempts < 0:
            raise JobDefinitionError("restart_attempts", restart_attempts, "must be an int >= 0")
        return RestartStrategyConfiguration(restart_attempts,
                                            non_negative_millis(delay_between_attempts, "delay_between_attempts"))


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
                                 "must come from RestartStrategies.fixed_delay_restart(...) or no_restart()")
    return strategy
