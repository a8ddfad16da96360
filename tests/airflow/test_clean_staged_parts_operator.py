"""The housekeeping operator also cleans the staged sink parts under the deployment's output (issue 17,
"Clean-up"), opening an s3:// output with the connection's AWS settings: here a moto S3 server that
only the Airflow AWS connection names (the environment has no endpoint)."""

from __future__ import annotations

import json
import os
import types

import pytest

pytestmark = pytest.mark.airflow


def _context() -> dict:
    return {"ti": types.SimpleNamespace(dag_id="d", run_id="r", task_id="clean_orphans", map_index=-1)}


def test_the_clean_orphans_operator_removes_the_deployments_orphaned_staged_parts(sluice_env):
    from checkpoints.backends import open_store
    from engine.io.file_sink import FileSink
    from sluice.operators import SluiceCleanOrphansOperator

    output = f"s3://{sluice_env['bucket']}/output"
    deployments = os.environ["SLUICE_DEPLOYMENTS_FILE"]
    spec = json.loads(open(deployments).read())
    spec["purchases"]["output"] = output
    with open(deployments, "w") as f:
        f.write(json.dumps(spec))

    s3 = {"endpoint_url": sluice_env["endpoint"], "region": "us-east-1",
          "client_options": {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}}
    sink = FileSink(output + "/tumbling", "jsonl", max_records_per_file=1, storage_options=s3)
    sink.open(0, 1)
    committed = sink.begin_transaction()
    sink.write(committed, [["a", 1, 2]])
    sink.commit(sink.pre_commit(committed, 1))
    killed = sink.begin_transaction()  # a transaction a killed process had open
    sink.write(killed, [["b", 3, 4], ["c", 5, 6]])
    store = open_store(output, **s3)
    before = {info.key for info in store.list("")}
    assert {f"tumbling/{key}" for key in killed.staged} < before and len(killed.staged) == 2

    dry = SluiceCleanOrphansOperator(task_id="clean_orphans", deployment="purchases", grace_period_s=0,
                                     dry_run=True).execute(_context())
    staged = {o["key"] for o in dry["orphans"] if o["kind"] == "staged_part"}
    assert staged == {f"{output}/tumbling/{key}" for key in killed.staged}
    assert {info.key for info in store.list("")} == before

    done = SluiceCleanOrphansOperator(task_id="clean_orphans", deployment="purchases", grace_period_s=0,
                                      dry_run=False).execute(_context())
    assert done["deleted"] and {o["key"] for o in done["orphans"] if o["kind"] == "staged_part"} == staged
    assert {info.key for info in store.list("")} == before - {f"tumbling/{key}" for key in killed.staged}
    assert [info.key for info in store.list("tumbling/part-")] == ["tumbling/part-0000000001-00000-00000.jsonl"]
