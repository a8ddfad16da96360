"""The DAG files import without errors and do no work at parse time (no network, no processes, no storage)."""

from __future__ import annotations

import builtins
import socket
import subprocess

import pytest

from airflow_support import REPO

DAG_IDS = {"sluice_deploy", "sluice_supervise", "sluice_scheduled_savepoint", "sluice_restore", "sluice_housekeeping"}


@pytest.fixture
def no_side_effects(monkeypatch):
    """Parsing may import code, but any connection, process or config-file read fails loudly.

    Airflow's own imports (croniter asks ``file`` about the interpreter) happen first."""
    import croniter  # noqa: F401
    from airflow.dag_processing.dagbag import DagBag  # noqa: F401
    from airflow.sdk import DAG  # noqa: F401

    def refuse(*args, **kwargs):
        raise AssertionError(f"a DAG file did work at parse time: {args[:2]}")

    real_open = builtins.open

    def guarded_open(file, *args, **kwargs):
        name = str(file)
        if name.endswith((".yaml", ".yml", ".json")) and "sluice" in name:
            raise AssertionError(f"a DAG file read {name} at parse time")
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(builtins, "open", guarded_open)
    import checkpoints.backends

    monkeypatch.setattr(checkpoints.backends, "open_store", refuse)


def test_every_dag_file_imports_without_errors_and_without_work(no_side_effects):
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))

    assert bag.import_errors == {}
    assert set(bag.dag_ids) == DAG_IDS


def test_dags_are_thin_they_import_no_engine_or_checkpoint_internals():
    for path in (REPO / "dags").glob("*.py"):
        source = path.read_text()
        assert "import engine" not in source and "from engine" not in source, path
        assert "from checkpoints" not in source and "import checkpoints" not in source, path


def test_supervise_restarts_only_after_a_failed_health_check_and_alerts_after_a_restart():
    from airflow.dag_processing.dagbag import DagBag

    dag = DagBag(dag_folder=str(REPO / "dags" / "sluice_supervise.py")).dags["sluice_supervise"]

    restart = dag.get_task("job.restart_from_latest")
    assert restart.trigger_rule == "one_failed"
    assert restart.from_snapshot == "latest" and restart.replace_live is True
    assert dag.get_task("job.alert").trigger_rule == "none_skipped"
    assert {t.task_id for t in restart.upstream_list} == {"deployments", "job.check_health"}
    assert {t.task_id for t in dag.get_task("job.check_health").upstream_list} == {"deployments", "job.desired_state"}


def test_every_dag_documents_itself_and_its_params():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    for dag_id in DAG_IDS:
        dag = bag.dags[dag_id]
        assert dag.doc_md and dag.doc_md.strip().startswith("###"), dag_id
        for name, param in dag.params.items():
            assert param.description, f"{dag_id}: param {name!r} has no description"
