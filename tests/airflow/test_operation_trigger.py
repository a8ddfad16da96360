"""SluiceOperationTrigger polls the operation it was given even after the triggerer stamps its own trigger_id.

Airflow's triggerer sets ``trigger_id`` (the trigger row's id) on every trigger it
runs, after building it from its serialized kwargs; a trigger that kept the
operation's id in that attribute polled ``/savepoints/<row id>`` and failed with
404.  This test does what the triggerer does, against a real job master; the
live-Airflow test (test_live_airflow_dags.py) runs it in a real triggerer.
"""

from __future__ import annotations

import asyncio
import importlib
import json

import pytest

pytestmark = pytest.mark.airflow


async def _first_event(trigger):
    async for event in trigger.run():
        return event.payload
    raise AssertionError("the trigger ended without an event")


def _as_the_triggerer_builds_it(trigger, row_id: int):
    classpath, kwargs = trigger.serialize()
    module, _, name = classpath.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**json.loads(json.dumps(kwargs)))
    rebuilt.trigger_id = row_id  # what airflow.jobs.triggerer_job_runner does to every trigger it runs
    return rebuilt


def test_a_savepoint_is_awaited_by_its_operation_id_whatever_trigger_id_the_triggerer_sets(tmp_path, monkeypatch):
    from engine.master.client import ControlClient
    from engine.master.master import JobMaster, MasterConfig
    from sluice.triggers import SluiceOperationTrigger

    monkeypatch.setenv("AIRFLOW_CONN_SLUICE_LOCAL", json.dumps({"conn_type": "generic", "password": "t0ken"}))
    config = MasterConfig(job_spec="engine.examples.purchases:build", job_name="purchases",
                          params={"events_per_split": None, "events_per_second": 50, "num_keys": 20},
                          checkpoint_interval_ms=200, storage_uri=(tmp_path / "chk").as_uri(),
                          savepoint_dir=(tmp_path / "sp").as_uri(), output_dir=str(tmp_path / "out"),
                          status_interval_ms=100, linger_after_end_s=0.5, token="t0ken",
                          runtime_options={"bundle_size": 64})
    master = JobMaster(config).start()
    try:
        with ControlClient(master.url, "purchases", "t0ken") as client:
            operation_id = client.trigger_savepoint(trigger_id="af-operation-1")
        trigger = SluiceOperationTrigger(sluice_conn_id="sluice_local", job_id="purchases", kind="savepoint",
                                         operation_id=operation_id, control_url=master.url, poll_interval_s=0.2,
                                         timeout_s=120)
        event = asyncio.run(_first_event(_as_the_triggerer_builds_it(trigger, row_id=1)))
        assert event["status"] == "success", event
        assert event["operation_id"] == "af-operation-1"
        assert event["location"].startswith((tmp_path / "sp").as_uri() + "/purchases/savepoint-")

        unknown = SluiceOperationTrigger(sluice_conn_id="sluice_local", job_id="purchases", kind="savepoint",
                                         operation_id="never-started", control_url=master.url, timeout_s=30)
        refused = asyncio.run(_first_event(_as_the_triggerer_builds_it(unknown, row_id=2)))
        assert refused["status"] == "error" and "404" in refused["message"], refused
    finally:
        master.client.cancel()
        master.wait()
