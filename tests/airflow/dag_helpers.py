"""Running the repository's DAGs with dag.test() and reading what their tasks did."""

from __future__ import annotations

from typing import Any

from airflow_support import REPO


def load_dag(dag_id: str) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags" / f"{dag_id}.py"))
    assert bag.import_errors == {}, bag.import_errors
    return bag.dags[dag_id]


def run_dag(dag_id: str, **conf: Any) -> tuple[str, dict[str, str], dict[str, Any]]:
    """``dag.test()`` one run; returns (run state, task states, task return values)."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    dag = load_dag(dag_id)
    run = dag.test(run_conf=conf or None)
    with create_session() as session:
        tis = session.query(TaskInstance).filter(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run.run_id).all()
        states = {ti.task_id: str(ti.state.value if hasattr(ti.state, "value") else ti.state) for ti in tis}
        values = {}
        for x in session.query(XComModel).filter(XComModel.dag_id == dag_id, XComModel.run_id == run.run_id,
                                                 XComModel.key == "return_value").all():
            values[x.task_id] = XComModel.deserialize_value(x)
    state = run.state.value if hasattr(run.state, "value") else str(run.state)
    return state, states, values
