"""One ``_metadata`` golden file that both runtimes must write identically for the same job (issue 15).

The job (metadata_golden_job.py): two held splits of keyed events into a tumbling 10 s sum with
uid ``sums``, parallelism 2, max parallelism 8.  Each runtime reads every record, then a savepoint
is taken (id 1: periodic checkpoints are an hour apart); its ``_metadata`` is read back.

Both runtimes build ``_metadata`` with the one ``MetadataBuilder`` (engine/runtime/checkpoint_storage.py).
What the comparison normalises, and why:

- ``trigger_timestamp_ms`` and ``complete_timestamp_ms`` (wall clock of the run): set to 0, and
  ``document_sha256``, the document's checksum over them, left out;
- against the checked-in golden file only, each state file's ``bytes`` and ``sha256``: a Parquet
  footer names the writer's version (``created_by parquet-cpp-arrow version ...``), so an upgrade of
  pyarrow changes them with no change in Sluice.  Between the two runtimes they are compared as they
  are: both wrote byte-identical files.

The second job writes the sums to an exactly-once ``FileSink`` as well: both runtimes list the sink as
one operator named as its plan node, with each subtask's two-phase-commit ``sink_state`` in its
metadata.  A pending transaction's id is random and its staged part names and checksums are the
writer's (Spark's tasks stage their own parts), so each pending handle's ``txn`` and ``files`` are
normalised; what the runtimes committed is compared as it is.

Paths are relative to the snapshot folder, and the job id is the job's name: neither needs normalising.
Set ``SLUICE_UPDATE_GOLDEN=1`` to rewrite the golden file after a deliberate format change (and review
its diff).
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from checkpoints import load_snapshot
from engine.io.file_sink import FileSink, read_committed
from metadata_golden_job import NUM_RECORDS, build
from source_gate import savepoint_after

GOLDEN = Path(__file__).with_name("metadata_golden.json")
#: the same job writing its sums to an exactly-once FileSink (uid ``out``, parallelism 1) as well
GOLDEN_SINK = Path(__file__).with_name("metadata_golden_sink.json")


def _built(runtime: str, tmp: Path, output: str | None, window_parallelism: int = 2) -> tuple[Any, Any, list[Any]]:
    env, stream = build(runtime, f"file://{tmp}/{runtime}-chk", window_parallelism)
    if output is None:
        return env, stream, []
    sink = stream.sink_to(FileSink(output, "jsonl", mode="exactly_once")).set_parallelism(1).uid("out")
    return env, stream, [sink._node]


def _local_savepoint(tmp: Path, output: str | None = None, window_parallelism: int = 2) -> dict[str, Any]:
    from engine.runtime.local.runtime import LocalRuntime

    env, stream, sinks = _built("local", tmp, output, window_parallelism)
    client, uri = savepoint_after(lambda: LocalRuntime(env).submit("golden", sinks, [stream._node]), NUM_RECORDS,
                                  f"file://{tmp}/sp-local")
    client.wait(60)
    return load_snapshot(uri).metadata.to_dict()


def _spark_savepoint(tmp: Path, output: str | None = None, window_parallelism: int = 2) -> dict[str, Any]:
    from engine.runtime.spark.runtime import SparkRuntime

    env, stream, sinks = _built("spark", tmp, output, window_parallelism)
    job = SparkRuntime(env).start("golden", sinks, [stream._node])
    for _ in range(3):  # the first epoch reads everything; the others find nothing new
        assert job.run_epoch()
    uri = job.stop_with_savepoint(f"file://{tmp}/sp-spark").result(timeout=120)
    return load_snapshot(uri).metadata.to_dict()


def _without_timestamps(document: dict[str, Any]) -> dict[str, Any]:
    """The wall-clock times set to 0, and the document's own checksum (which covers them) left out."""
    out = copy.deepcopy(document)
    out["trigger_timestamp_ms"] = out["complete_timestamp_ms"] = 0
    out.pop("document_sha256", None)
    return out


def _without_file_bytes(document: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(document)
    for op in out["operators"]:
        for subtask in op["subtasks"]:
            for f in subtask["files"]:
                f["bytes"], f["sha256"] = "<parquet bytes>", "<sha256 of the file>"
    return out


@pytest.fixture(scope="module")
def documents(spark, tmp_path_factory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("golden")
    return {"local": _local_savepoint(tmp), "spark": _spark_savepoint(tmp)}


def test_both_runtimes_write_the_same_metadata(documents) -> None:
    local, spark = _without_timestamps(documents["local"]), _without_timestamps(documents["spark"])
    assert [op["uid"] for op in local["operators"]] == ["sums"]  # no per-task valve or watermark stage
    assert sorted(local["watermarks"]) == ["operators", "splits", "watermark"]
    assert local == spark  # state files too: same rows, bytes and sha256


def test_the_metadata_matches_the_checked_in_golden_file(documents) -> None:
    portable = _without_file_bytes(_without_timestamps(documents["local"]))
    if os.environ.get("SLUICE_UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps(portable, indent=1, sort_keys=True) + "\n")
    assert portable == json.loads(GOLDEN.read_text())
    assert _without_file_bytes(_without_timestamps(documents["spark"])) == json.loads(GOLDEN.read_text())


def test_a_window_subtask_without_a_key_is_written_alike(spark, tmp_path) -> None:
    """The window at parallelism 4 over four keys and max parallelism 8: two of its subtasks get no key.  The local
    subtask snapshots its empty operator; Spark, which has no state rows for it, writes the same."""
    local = _without_timestamps(_local_savepoint(tmp_path / "local", window_parallelism=4))
    spark_doc = _without_timestamps(_spark_savepoint(tmp_path / "spark", window_parallelism=4))
    window = next(op for op in local["operators"] if op["uid"] == "sums")
    rows = {s: m["state_rows"] for s, m in window["config"]["subtask_metadata"].items()}
    assert sorted(s for s, r in rows.items() if not any(r.values())) == ["0", "2"], rows  # the keyless ones
    assert local == spark_doc


# -- a two-phase-commit sink ---------------------------------------------------------------------------------------

def _without_transactions(document: dict[str, Any]) -> dict[str, Any]:
    """Each pending sink transaction's random id and the writer's own part files replaced by placeholders."""
    out = copy.deepcopy(document)
    for op in out["operators"]:
        for meta in (op["config"].get("subtask_metadata") or {}).values():
            for _, handle in (meta.get("sink_state") or {}).get("pending", []):
                assert handle["files"], f"a pending transaction of {op['uid']} names no part"
                handle["txn"], handle["files"] = "<txn>", "<the writer's parts>"
    return out


@pytest.fixture(scope="module")
def sink_documents(spark, tmp_path_factory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("golden-sink")
    local = _local_savepoint(tmp / "local", str(tmp / "out-local"))
    spark_doc = _spark_savepoint(tmp / "spark", str(tmp / "out-spark"))
    return {"local": local, "spark": spark_doc,
            "committed": {r: read_committed(str(tmp / f"out-{r}")) for r in ("local", "spark")}}


def test_a_two_phase_commit_sink_is_written_alike_by_both_runtimes(sink_documents) -> None:
    local = _without_transactions(_without_timestamps(sink_documents["local"]))
    spark = _without_transactions(_without_timestamps(sink_documents["spark"]))
    assert [(op["uid"], op["name"]) for op in local["operators"]] == [("sums", "Window(sum)"),
                                                                     ("out", "Sink(FileSink)")]
    assert local == spark
    committed = sink_documents["committed"]
    assert committed["local"] and sorted(committed["local"]) == sorted(committed["spark"])


def test_the_sink_metadata_matches_the_checked_in_golden_file(sink_documents) -> None:
    portable = _without_transactions(_without_file_bytes(_without_timestamps(sink_documents["local"])))
    if os.environ.get("SLUICE_UPDATE_GOLDEN") == "1":
        GOLDEN_SINK.write_text(json.dumps(portable, indent=1, sort_keys=True) + "\n")
    assert portable == json.loads(GOLDEN_SINK.read_text())
    spark = _without_transactions(_without_file_bytes(_without_timestamps(sink_documents["spark"])))
    assert spark == json.loads(GOLDEN_SINK.read_text())
