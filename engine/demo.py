"""``sluice demo``: the main job end to end on the embedded defaults, through the operator's verbs.

The story an operator lives, on one machine with no services to start:

1. run the purchase-count window job (seed 000) under a job master on **local Spark**, with
   checkpoints in a ``file://`` folder and exactly-once file output.  The job reads a
   **monitored folder** (``read_files(..., monitor_interval=...)``): a feeder lands the purchase
   stream there as JSON-lines files while the job runs (engine/examples/purchase_files.py);
2. take a savepoint through the control API while files keep landing, then stop it with a
   savepoint; one more file lands while the job is down;
3. validate that savepoint with Great Expectations (results and Data Docs beside it);
4. restore the job from the savepoint at a different parallelism: it reads the file that landed
   while it was down, then every file the feeder lands after it.  A monitored source never ends
   by itself (as Flink's): once the feeder has landed its last file and the job has read it, the
   demo stops the job with ``drain`` (``sluice stop --savepoint --drain``), which ends event
   time, fires every window, and lets the job finish;
5. check the committed output against an uninterrupted run of the same job at the job's parallelism,
   fed the same way, on the local runtime in ``epoch_records`` mode (the Spark runtime's watermark
   cadence; a source subtask without a file holds event time back the same way on both): equal
   output means exactly-once across the stop/restore (each file read once) and the same semantics
   on both runtimes.  The feeder lands a file once the job has read the previous one, so each file
   is read in an epoch of its own and judged against the watermark the files before it left: the
   output does not depend on how fast either run listed or read;
6. write a self-contained HTML report (engine/demo_report.py): the job view's charts of both runs,
   the savepoint's validation summary and a link to its Data Docs.

Every step uses the public pieces (JobMaster, ControlClient, validate_snapshot,
ensure_restorable, read_committed); nothing here reaches into a runtime.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

WINDOW_KINDS = ("tumbling", "sliding", "session", "count", "late")
#: the window operators' uids (engine/examples/purchases.py): each takes in every well-formed record
WINDOW_OPERATORS = ("tumbling", "sliding", "session", "count")
JOB_SPEC = "engine.examples.purchases:build"


@dataclass(frozen=True)
class DemoConfig:
    workdir: Path
    runtime: str = "spark"
    parallelism: int = 2
    restore_parallelism: int = 3
    #: the generator's purchase stream the feeder cuts into files (engine/examples/purchase_files.py)
    num_splits: int = 4
    events_per_split: int = 6_000
    rows_per_file: int = 1_000
    #: how often the running job lists its input folder
    monitor_interval_ms: int = 200
    #: at least rows_per_file: each file is read in one epoch (the savepoint and the stops take effect at
    #: epoch boundaries)
    epoch_records: int = 1_000
    checkpoint_interval_ms: int = 10


def _params(c: DemoConfig) -> dict[str, Any]:
    return {"num_splits": c.num_splits, "events_per_split": c.events_per_split, "events_per_second": 5}


def _job_params(c: DemoConfig, input_dir: Path) -> dict[str, Any]:
    return {"input_dir": str(input_dir), "monitor_interval_ms": c.monitor_interval_ms}


def _files(c: DemoConfig) -> list[tuple[str, list[dict[str, Any]]]]:
    from engine.examples.purchase_files import purchase_files
    from engine.examples.purchases import PurchaseJobConfig

    return list(purchase_files(PurchaseJobConfig(**_params(c)), c.rows_per_file))


def _master_config(c: DemoConfig, output: Path, parallelism: int, from_savepoint: str | None = None) -> Any:
    from engine.master.master import MasterConfig

    return MasterConfig(
        job_spec=JOB_SPEC, job_name="purchases", params=_job_params(c, c.workdir / "input"), runtime=c.runtime,
        parallelism=parallelism,
        checkpoint_interval_ms=c.checkpoint_interval_ms, storage_uri=(c.workdir / "checkpoints").as_uri(),
        savepoint_dir=(c.workdir / "savepoints").as_uri(), output_dir=str(output), from_savepoint=from_savepoint,
        status_interval_ms=500, linger_after_end_s=0.5,
        runtime_options={"epoch_records": c.epoch_records, "bundle_size": 64})


def _wait(predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(f"demo: {what} did not happen within {timeout_s:.0f} s")


def _committed(output: Path) -> dict[str, Counter]:
    from engine.io.file_sink import read_committed

    result: dict[str, Counter] = {}
    for kind in WINDOW_KINDS:
        folder = output / kind
        rows = read_committed(str(folder)) if folder.exists() else []
        result[kind] = Counter(json.dumps(r, sort_keys=True) for r in rows)
    return result


def _reference(c: DemoConfig, files: list[tuple[str, list[dict[str, Any]]]], output: Path) -> dict[str, Counter]:
    """The same job, uninterrupted, on the local runtime with the Spark runtime's epoch cadence, fed the same
    files the same way, then drained, at the job's parallelism: a source subtask with no file to read holds
    event time back the same way on both runtimes (README, "read_files")."""
    from engine.api.environment import StreamExecutionEnvironment
    from engine.examples.purchase_files import FileFeeder
    from engine.master.master import build_job

    folder = c.workdir / "reference-input"
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(c.parallelism)
    env.set_runtime_option("epoch_records", c.epoch_records)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage_dir((c.workdir / "reference-checkpoints").as_uri())
    build_job(env, JOB_SPEC, _job_params(c, folder), str(output))
    client = env.execute_async("purchases-reference", savepoint_dir=(c.workdir / "reference-savepoints").as_uri())

    def processed() -> int:
        """Records every window operator has taken in, plus the dead letters: the next file lands only then.
        Paced by the records its sources read, as the Spark run is, a file could land while the one before was
        still in the channels to the windows; read by another source subtask, its records then overtook those at
        a window, and the count windows (order-sensitive) came out other than in file order (seen under load)."""
        details = client.status_details()
        operators = details["operators"]
        if not operators:
            return 0  # its tasks are not running yet: nothing taken in
        missing = [uid for uid in WINDOW_OPERATORS if uid not in operators]
        if missing:
            raise RuntimeError(f"demo: the reference job reports no operator {missing}; it has {sorted(operators)}")
        taken = min(int(operators[uid]["records_in"]) for uid in WINDOW_OPERATORS)
        return taken + int(details["metrics"].get("num_dead_letter_records", 0))

    try:
        feeder = FileFeeder(str(folder), iter(files))
        feeder.feed(processed)
        feeder.wait_read(processed)
        client.stop_with_savepoint(advance_to_end_of_event_time=True).result(300)
        client.get_job_execution_result().result(300)
    finally:
        if not client.get_job_execution_result().done():
            client.cancel()
    return _committed(output)


def run_demo(c: DemoConfig, say: Callable[[str], None]) -> dict[str, Any]:
    from checkpoints.validation import ensure_restorable, validate_snapshot
    from engine.examples.purchase_files import FileFeeder
    from engine.master.client import ControlClient
    from engine.master.master import JobMaster

    c.workdir.mkdir(parents=True, exist_ok=True)
    output = c.workdir / "output"
    files = _files(c)
    summary: dict[str, Any] = {"runtime": c.runtime, "events": c.num_splits * c.events_per_split,
                               "workdir": str(c.workdir)}
    feeder = FileFeeder(str(c.workdir / "input"), iter(files))
    third = max(1, len(files) // 3)

    say(f"1. running {JOB_SPEC} on {c.runtime} (parallelism {c.parallelism}), checkpoints in "
        f"{(c.workdir / 'checkpoints').as_uri()}; it reads {c.workdir / 'input'} as files land there "
        f"(listed every {c.monitor_interval_ms} ms), and a feeder lands the purchase stream as {len(files)} files")
    master = JobMaster(_master_config(c, output, c.parallelism)).start()
    client = ControlClient(master.url, "purchases")
    records_in = lambda: int(client.status().get("records_in") or 0)  # noqa: E731
    feeder.feed(records_in, files=third)
    _wait(lambda: (client.status().get("last_completed_checkpoint") or 0) >= 2, 300, "two completed checkpoints")
    say(f"   control API {master.url}: {feeder.landed_files} files read, "
        f"{client.status()['last_completed_checkpoint']} checkpoints so far")

    say("2. savepoint through the control API while files keep landing, then stop with a savepoint")
    op = client.wait("savepoint", client.trigger_savepoint(trigger_id="demo-savepoint"), timeout_s=300)
    say(f"   savepoint: {op['operation'].get('location') or op['operation'].get('failure-cause')}")
    feeder.feed(records_in, files=third)
    feeder.wait_read(records_in)
    read_before_stop = feeder.landed_records
    stop = client.wait("stop", client.stop(), timeout_s=300)
    if stop["status"]["id"] != "COMPLETED":
        raise RuntimeError(f"demo: stop with savepoint failed: {stop['operation'].get('failure-cause')}")
    savepoint = stop["operation"]["location"]
    first = master.wait()
    client.close()
    views = [master.view]
    summary["checkpoints_before_stop"] = first.completed_checkpoints
    say(f"   stopped with savepoint {savepoint} after {feeder.landed_files} files")
    feeder.land_next()
    say(f"   file {feeder.landed_files} of {len(files)} landed while the job was down")

    say("3. validating the savepoint with Great Expectations")
    report = validate_snapshot(savepoint, data_docs_dir=str(c.workdir / "data_docs"), record=True)
    summary["savepoint_validation"] = report.status
    say(f"   {report.status.upper()}: {sum(1 for _ in report.failed)} failed expectation(s); "
        f"Data Docs {report.data_docs_url}")

    say(f"4. restoring from the savepoint at parallelism {c.restore_parallelism}; the feeder lands the other "
        f"files, then the job is stopped with drain (a monitored folder never ends by itself)")
    ensure_restorable(savepoint, job_spec=JOB_SPEC)
    restored = JobMaster(_master_config(c, output, c.restore_parallelism, from_savepoint=savepoint)).start()
    client = ControlClient(restored.url, "purchases")
    restored_in = lambda: read_before_stop + int(client.status().get("records_in") or 0)  # noqa: E731
    feeder.feed(restored_in)
    feeder.wait_read(restored_in)
    drain = client.wait("stop", client.stop(drain=True), timeout_s=300)
    if drain["status"]["id"] != "COMPLETED":
        raise RuntimeError(f"demo: stop with drain failed: {drain['operation'].get('failure-cause')}")
    client.close()
    result = restored.wait()
    views.append(restored.view)
    summary["files"] = feeder.landed_files
    summary["dead_letters"] = result.dead_letter_count
    summary["late_records_dropped"] = result.metrics.get("num_late_records_dropped", 0)
    say(f"   all {feeder.landed_files} files read; drained and stopped with savepoint {drain['operation']['location']}")

    say("5. comparing the committed output with an uninterrupted run on the local runtime")
    actual = _committed(output)
    expected = _reference(c, files, c.workdir / "reference-output")
    for kind in WINDOW_KINDS:
        summary[f"{kind}_results"] = sum(actual[kind].values())
    identical = actual == expected
    summary["identical_to_uninterrupted_local_run"] = identical
    for kind in WINDOW_KINDS:
        rows = sorted(actual[kind].elements())[:3]
        say(f"   {kind:9s} {sum(actual[kind].values()):6d} results, e.g. {', '.join(rows) or '-'}")
    say(f"   identical to the uninterrupted local run: {'yes' if identical else 'NO'}")
    if not identical:
        diff = {k: (sum((actual[k] - expected[k]).values()), sum((expected[k] - actual[k]).values()))
                for k in WINDOW_KINDS if actual[k] != expected[k]}
        summary["differences"] = diff

    path = _write_report(c, summary, savepoint, report, views, restored)
    summary["report"] = str(path)
    say(f"6. report: {path}")
    return summary


def _write_report(c: DemoConfig, summary: dict[str, Any], savepoint: str, validation: Any, views: list[Any],
                  restored: Any) -> Path:
    from engine.demo_report import render_report, write_report

    try:
        status = restored.view.job.status()
    except Exception:  # noqa: BLE001 - the report still shows the charts without the last status
        status = {}
    status = {**status, "job_name": "purchases (demo)"}
    facts = [("runtime", f"{c.runtime}, parallelism {c.parallelism}, restored at {c.restore_parallelism}"),
             ("events", f"{summary['events']} in {summary['files']} files landing in a monitored folder"),
             ("workdir", str(c.workdir)),
             ("checkpoints before the stop", str(summary.get("checkpoints_before_stop"))),
             ("stopped with savepoint", savepoint),
             ("identical to an uninterrupted local run",
              "yes" if summary["identical_to_uninterrupted_local_run"] else "NO")]
    facts += [(f"{kind} results", str(summary[f"{kind}_results"])) for kind in WINDOW_KINDS]
    story = ("the job read files as they landed in a monitored folder, on local Spark, until a savepoint and a "
             "stop with a savepoint; it was restored from that savepoint at another parallelism, read the file "
             "that landed while it was down and every later one, and was stopped with drain; the charts below "
             "join both runs")
    page = render_report(views[-1].job.job_id, status, views, validation, facts, story, c.checkpoint_interval_ms)
    return write_report(c.workdir / "report.html", page)
