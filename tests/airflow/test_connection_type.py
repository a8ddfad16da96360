"""The `sluice` connection type is registered through provider info, a form field for each setting the hook reads."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.airflow


def test_airflow_lists_the_sluice_connection_type_with_its_form_fields():
    from airflow.providers_manager import ProvidersManager

    manager = ProvidersManager()
    assert manager.hooks["sluice"].hook_class_name == "sluice.hook.SluiceHook"
    fields = {name.removeprefix("extra__sluice__") for name in manager.connection_form_widgets
              if name.startswith("extra__sluice__")}
    assert fields == {"storage_uri", "savepoint_dir", "data_docs_dir", "aws_conn_id", "control_url", "control_hosts",
                      "job_id"}
    assert manager.field_behaviours["sluice"]["relabeling"] == {"password": "Control API token"}


def test_the_hook_reads_fields_saved_by_the_form_with_or_without_their_prefix(monkeypatch):
    from sluice.hook import SluiceHook

    monkeypatch.setenv("AIRFLOW_CONN_SLUICE_FORM", json.dumps({
        "conn_type": "sluice", "password": "t",
        "extra": {"extra__sluice__storage_uri": "file:///tmp/chk", "savepoint_dir": "file:///tmp/sp",
                  "extra__sluice__control_url": ""}}))
    hook = SluiceHook("sluice_form")
    assert (hook.storage_uri, hook.savepoint_dir, hook.token) == ("file:///tmp/chk", "file:///tmp/sp", "t")
    assert hook.configured_control_url() is None  # an empty form field is no URL
