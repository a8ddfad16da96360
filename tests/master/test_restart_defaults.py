"""Faults survived by default: a job master's checkpointed job restarts with Flink's exponential delay (issue 17).

The engine's own default stays ``no_restart()``; ``sluice run`` (the job master) applies Flink's default for
checkpointed jobs since 1.19 when the job chose no strategy, and tolerates a few checkpoint failures."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.api.restart import RestartStrategies
from engine.errors import JobDefinitionError
from engine.master.client import ControlClient
from engine.master.master import JobMaster, MasterConfig
from engine.runtime.local.faults import Fault, FaultKind, FaultPlan


def test_the_exponential_delay_grows_by_its_multiplier_up_to_its_cap_and_resets_after_a_quiet_spell() -> None:
    backoff = RestartStrategies.exponential_delay_restart(1_000, 5_000, 2.0, 60_000, 0.0).backoff()
    delays = [backoff.on_failure(t) for t in (0, 10, 20, 30, 40)]
    assert delays == [1_000, 2_000, 4_000, 5_000, 5_000]
    assert backoff.on_failure(40 + 60_000) == 1_000  # a reset threshold without failures: back to the start


def test_jitter_stays_within_its_factor_and_max_attempts_ends_the_restarts() -> None:
    backoff = RestartStrategies.exponential_delay_restart(1_000, 1_000, 1.2, 60_000, 0.1, max_attempts=20).backoff()
    delays = [backoff.on_failure(t) for t in range(20)]
    assert all(900 <= d <= 1_100 for d in delays) and len(set(delays)) > 1
    assert backoff.on_failure(21) is None
    assert "20 attempts" in backoff.describe()


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"initial_restart_delay": 5_000, "max_restart_delay": 1_000}, "max_restart_delay"),
    ({"backoff_multiplier": 0.5}, "backoff_multiplier"),
    ({"jitter_factor": 1.5}, "jitter_factor"),
    ({"max_attempts": -1}, "max_attempts"),
])
def test_a_bad_exponential_delay_is_refused_naming_the_parameter(kwargs, named) -> None:
    with pytest.raises(JobDefinitionError, match=named):
        RestartStrategies.exponential_delay_restart(**kwargs)


def _config(tmp_path: Path, **options) -> MasterConfig:
    return MasterConfig(job_spec="engine.examples.purchases:build", job_name="purchases",
                        params={"events_per_split": None, "events_per_second": 50, "num_keys": 20},
                        checkpoint_interval_ms=300, storage_uri=(tmp_path / "chk").as_uri(),
                        savepoint_dir=(tmp_path / "sp").as_uri(), output_dir=str(tmp_path / "out"),
                        status_interval_ms=200, linger_after_end_s=0.2,
                        runtime_options={"bundle_size": 64, **options})


def test_a_checkpointed_job_under_a_master_survives_a_failure_it_set_no_strategy_for(tmp_path: Path) -> None:
    plan = FaultPlan([Fault(FaultKind.RECORDS, 400)])  # the attempt dies after 400 records
    master = JobMaster(_config(tmp_path, fault_plan=plan)).start()
    try:
        with ControlClient(master.url, "purchases") as client:
            deadline = time.monotonic() + 120
            while not plan.fired or (client.status().get("last_completed_checkpoint") or 0) < 5:
                assert time.monotonic() < deadline, f"no recovery: {client.status()}"
                assert not master.client.get_job_execution_result().done(), "the job ended instead of restarting"
                time.sleep(0.1)
    finally:
        master.client.cancel()
        master.wait()
    assert plan.fired and master.client.get_job_execution_result().result().restarts == 1


def test_a_job_that_chose_its_own_strategy_keeps_it(tmp_path: Path) -> None:
    config = _config(tmp_path, restart_strategy=RestartStrategies.no_restart())
    env = JobMaster(config)._environment("purchases")
    from engine.api.restart import restart_strategy_of

    assert restart_strategy_of(env) == RestartStrategies.no_restart()
    assert env.get_checkpoint_config().get_tolerable_checkpoint_failure_number() == 3


def test_a_status_write_failing_at_exit_does_not_replace_the_jobs_own_outcome(tmp_path: Path, monkeypatch) -> None:
    from checkpoints.errors import StorageUnavailable

    master = JobMaster(_config(tmp_path, restart_strategy=RestartStrategies.no_restart(),
                               fault_plan=FaultPlan([Fault(FaultKind.RECORDS, 300)]))).start()

    def storage_down(*args, **kwargs):
        raise StorageUnavailable("S3 refused the connection (simulated outage at exit)")

    monkeypatch.setattr("checkpoints.status.write_status", storage_down)
    with pytest.raises(Exception) as failed:
        master.wait()
    assert "InjectedFault" in str(failed.value) and not isinstance(failed.value, StorageUnavailable)
