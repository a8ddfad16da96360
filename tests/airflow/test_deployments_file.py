"""The deployments file is checked by a strict model: typos and wrong types fail naming the key, never silently."""

from __future__ import annotations

import pytest

BASE = {"conn_id": "sluice_purchases", "job_id": "purchases", "job": "engine.examples.purchases:build"}


def test_a_complete_entry_loads_with_its_defaults(tmp_path) -> None:
    from sluice.deployments import load_deployments

    file = tmp_path / "d.yaml"
    file.write_text("purchases:\n  conn_id: c\n  job_id: purchases\n  job: engine.examples.purchases:build\n"
                    "  parallelism: 2\n  upgrade_mode: last-state\n"
                    "  health: {max_heartbeat_age_s: 5, max_lag_s: null}\n"
                    "  savepoint_policy: {max_count: 2}\n  params: {events_per_split: null}\n"
                    "  command: [python, fake.py]\n")
    d = load_deployments(file)["purchases"]
    assert (d.parallelism, d.upgrade_mode, d.state, d.retained) == (2, "last-state", "running", 3)
    assert d.health_thresholds() == {"max_heartbeat_age_s": 5, "max_checkpoint_age_s": 300.0,
                                     "max_failed_checkpoints": 3, "max_lag_s": None}
    assert d.savepoint_policy.max_count == 2 and d.command == ("python", "fake.py")


@pytest.mark.parametrize(("extra", "match"), [
    ({"max_cnt": 5}, r"max_cnt: unknown key"),
    ({"parallelism": "two"}, r"parallelism: Input should be a valid integer \(got 'two'\)"),
    ({"parallelism": 0}, r"parallelism: Input should be greater than or equal to 1"),
    ({"retained": 2.5}, r"retained: Input should be a valid integer"),
    ({"health": {"max_heartbeat": 3}}, r"health.max_heartbeat: unknown key"),
    ({"savepoint_policy": {"max_count": "5"}}, r"savepoint_policy.max_count: Input should be a valid integer"),
    ({"state": "paused"}, r"state: Input should be 'running' or 'suspended'"),
    ({"upgrade_mode": "snapshot"}, r"upgrade_mode: Input should be 'savepoint', 'last-state' or 'stateless'"),
    ({"runtime": "flink"}, r"runtime: Input should be 'local' or 'spark'"),
    ({"job": "engine.examples.purchases"}, r"job: String should match pattern"),
])
def test_a_wrong_entry_fails_naming_the_deployment_and_the_key(extra, match) -> None:
    from sluice.deployments import Deployment, DeploymentError

    with pytest.raises(DeploymentError, match=match) as refused:
        Deployment.from_dict("purchases", {**BASE, **extra})
    assert "deployment 'purchases'" in str(refused.value)


def test_a_missing_required_key_is_named(tmp_path) -> None:
    from sluice.deployments import Deployment, DeploymentError

    with pytest.raises(DeploymentError, match="conn_id: Field required"):
        Deployment.from_dict("purchases", {"job_id": "p", "job": "m:f"})


def test_scheduled_dags_look_after_every_deployment_or_the_one_named(tmp_path, monkeypatch) -> None:
    from sluice.deployments import DeploymentError, deployment_names

    file = tmp_path / "d.yaml"
    file.write_text("b:\n  conn_id: c\n  job_id: b\n  job: m:f\na:\n  conn_id: c\n  job_id: a\n  job: m:f\n")
    monkeypatch.setenv("SLUICE_DEPLOYMENTS_FILE", str(file))
    assert deployment_names(None) == ["a", "b"]
    assert deployment_names("b") == ["b"]
    with pytest.raises(DeploymentError, match=r"no deployment 'c'.*known: \['a', 'b'\]"):
        deployment_names("c")
