"""``sluice demo``: the main job end to end on the embedded defaults, through the operator's verbs.

The story an operator lives, on one machine with no services to start:

1. run the purchase-count window job (seed 000) under a job master on **local Spark**, with
   checkpoints in a ``file://`` folder and exactly-once file output;
2. take a savepoint through the control API while it runs, then stop it with a savepoint;
3. validate that savepoint with Great Expectations (results and Data Docs beside it);
4. restore the job from the savepoint at a different parallelism and let it finish;
5. check the committed output against an uninterrupted run of the same job on the local
   runtime in ``epoch_records`` mode (the Spark runtime's watermark cadence): equal output
   means exactly-once across the stop/restore and the same semantics on both runtimes;
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
JOB_SPEC = "engine.examples.purchases:build"


@dataclass(frozen=True)
class DemoConfig:
    workdir: Path
    runtime: str = "spark"
    parallelism: int = 2
    restore_parallelism: int = 3
    num_splits: int = 4
    events_per_split: int = 6_000
    #: small epochs: the savepoint and the stop each take effect at an epoch boundary while the
    #: bounded job is still running
    epoch_records: int = 250
    checkpoint_interval_ms: int = 10


def _params(c: DemoConfig) -> dict[str, Any]:
    return {"num_splits": c.num_splits, "events_per_split": c.events_per_split, "events_per_second": 5}


def _master_config(c: DemoConfig, output: Path, parallelism: int, from_savepoint: str | None = None) -> Any:
    from engine.master.master import MasterConfig

    return MasterConfig(
        job_spec=JOB_SPEC, job_name="purchases", params=_params(c), runtime=c.runtime, parallelism=parallelism,
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


def _reference(c: DemoConfig, output: Path) -> dict[str, Counter]:
    """The same job, uninterrupted, on the local runtime with the Spark runtime's epoch cadence."""
    from engine.api.environment import StreamExecutionEnvironment
    from engine.master.master import build_job

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(c.parallelism)
    env.set_runtime_option("epoch_records", c.epoch_records)
    build_job(env, JOB_SPEC, _params(c), str(output))
    env.execute("purchases-reference")
    return _committed(output)


def run_demo(c: DemoConfig, say: Callable[[str], None]) -> dict[str, Any]:
    from checkpoints.validation import ensure_restorable, validate_snapshot
    from engine.master.client import ControlClient
    from engine.master.master import JobMaster

    c.workdir.mkdir(parents=True, exist_ok=True)
    output = c.workdir / "output"
    summary: dict[str, Any] = {"runtime": c.runtime, "events": c.num_splits * c.events_per_split,
                               "workdir": str(c.workdir)}

    say(f"1. running {JOB_SPEC} on {c.runtime} (parallelism {c.parallelism}), checkpoints in "
        f"{(c.workdir / 'checkpoints').as_uri()}")
    master = JobMaster(_master_config(c, output, c.parallelism)).start()
    client = ControlClient(master.url, "purchases")
    _wait(lambda: (client.status().get("last_completed_checkpoint") or 0) >= 2, 300, "two completed checkpoints")
    say(f"   control API {master.url}: {client.status()['last_completed_checkpoint']} checkpoints so far")

    say("2. savepoint through the control API, then stop with a savepoint")
    op = client.wait("savepoint", client.trigger_savepoint(trigger_id="demo-savepoint"), timeout_s=300)
    say(f"   savepoint: {op['operation'].get('location') or op['operation'].get('failure-cause')}")
    stop = client.wait("stop", client.stop(), timeout_s=300)
    if stop["status"]["id"] != "COMPLETED":
        raise RuntimeError(f"demo: stop with savepoint failed: {stop['operation'].get('failure-cause')}")
    savepoint = stop["operation"]["location"]
    first = master.wait()
    client.close()
    views = [master.view]
    summary["checkpoints_before_stop"] = first.completed_checkpoints
    say(f"   stopped with savepoint {savepoint}")

    say("3. validating the savepoint with Great Expectations")
    report = validate_snapshot(savepoint, data_docs_dir=str(c.workdir / "data_docs"), record=True)
    summary["savepoint_validation"] = report.status
    say(f"   {report.status.upper()}: {sum(1 for _ in report.failed)} failed expectation(s); "
        f"Data Docs {report.data_docs_url}")

    say(f"4. restoring from the savepoint at parallelism {c.restore_parallelism} and running to the end")
    ensure_restorable(savepoint, job_spec=JOB_SPEC)
    restored = JobMaster(_master_config(c, output, c.restore_parallelism, from_savepoint=savepoint)).start()
    result = restored.wait()
    views.append(restored.view)
    summary["dead_letters"] = result.dead_letter_count
    summary["late_records_dropped"] = result.metrics.get("num_late_records_dropped", 0)

    say("5. comparing the committed output with an uninterrupted run on the local runtime")
    actual = _committed(output)
    expected = _reference(c, c.workdir / "reference-output")
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
             ("events", str(summary["events"])), ("workdir", str(c.workdir)),
             ("checkpoints before the stop", str(summary.get("checkpoints_before_stop"))),
             ("stopped with savepoint", savepoint),
             ("identical to an uninterrupted local run",
              "yes" if summary["identical_to_uninterrupted_local_run"] else "NO")]
    facts += [(f"{kind} results", str(summary[f"{kind}_results"])) for kind in WINDOW_KINDS]
    story = ("the job ran on local Spark until a savepoint and a stop with a savepoint, was restored from that "
             "savepoint at another parallelism and ran to the end; the charts below join both runs")
    page = render_report(views[-1].job.job_id, status, views, validation, facts, story, c.checkpoint_interval_ms)
    return write_report(c.workdir / "report.html", page)
