"""The ``sluice`` command line (ARCHITECTURE section 7).

Verbs: ``demo``, ``run``, ``restore``, ``status``, ``list``, ``view``, ``savepoint``, ``stop``, ``cancel``,
``checkpoints history``, and the storage verbs ``checkpoints list|clean``, ``inspect`` and ``validate`` from the
checkpoints package.  Verbs that print data print lines for a person; ``--json`` prints the plain data for scripts
(the older ``--format json|human`` still works, hidden, with a deprecation note).  One flag name per concept across
verbs (tests/engine/test_cli_flags.py holds the table): the savepoint directory is ``--savepoint-dir``, the job's
id ``--job-id`` (``JOB_ID`` where it is an argument), ``--output`` the job's output folder; the older ``--target``,
``--savepoints``, ``--name`` and ``view --output`` still work, hidden, with a deprecation note.
``run --from-savepoint`` and ``restore`` validate the snapshot with Great Expectations first and
refuse a snapshot that fails, unless ``--skip-validation`` is given; they refuse a drained snapshot
(``stop --drain``: its watermark is MAX_WATERMARK) unless ``--allow-drained`` is given.  A running job is
found through the status document its master publishes in checkpoint storage
(``--storage``), or directly with ``--url``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from checkpoints.cli import checked_location as _location
from checkpoints.cli import deprecated_alias

# Spark workers must run the interpreter that runs Sluice (ARCHITECTURE section 8)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@click.group()
@click.version_option(package_name="sluice", prog_name="sluice", message="%(prog)s %(version)s")
def main() -> None:
    """Sluice: Flink's window and checkpoint semantics on PySpark, operated with Airflow."""


@main.command()
@click.option("--workdir", type=click.Path(file_okay=False), default=None,
              help="where checkpoints, savepoints, output and Data Docs go (default: a new folder under .sluice/)")
@click.option("--events-per-split", type=int, default=6_000, show_default=True)
@click.option("--parallelism", type=int, default=2, show_default=True)
@click.option("--restore-parallelism", type=int, default=3, show_default=True)
def demo(workdir: str | None, events_per_split: int, parallelism: int, restore_parallelism: int) -> None:
    """Run the main job end to end on local Spark, reading a monitored folder a feeder lands files in: checkpoints,
    savepoint, stop, validate, restore, drain, verify against an uninterrupted local run; then
    write an HTML report (charts of the run, the savepoint's validation, a link to its Data Docs) and print its
    path (also the ``report`` field of the final JSON line)."""
    import tempfile
    from pathlib import Path

    from engine.demo import DemoConfig, run_demo

    if workdir is None:
        Path(".sluice").mkdir(exist_ok=True)
        workdir = tempfile.mkdtemp(prefix="demo-", dir=".sluice")
    config = DemoConfig(Path(workdir).resolve(), parallelism=parallelism,
                        restore_parallelism=restore_parallelism, events_per_split=events_per_split)
    summary = run_demo(config, lambda line: click.echo(line))
    click.echo(json.dumps(summary, default=str))
    if not summary["identical_to_uninterrupted_local_run"] or summary["savepoint_validation"] != "passed":
        sys.exit(1)


def _parse_params(values: tuple[str, ...]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint="--param")
        try:
            params[key] = json.loads(raw)
        except ValueError:
            params[key] = raw
    return params


def _runtime_options(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, Any]:
    """``--option key=value``: a key some runtime reads (engine/runtime/options.py), a value of its type."""
    from engine.errors import JobDefinitionError
    from engine.runtime.options import check_cli_option

    options = _parse_params(values)
    for key, value in options.items():
        try:
            check_cli_option(key, value)
        except JobDefinitionError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return options


def _spark_conf(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """``--spark-conf key=value`` (repeatable): Spark settings, kept as strings as Spark takes them."""
    conf: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.startswith("spark."):
            raise click.BadParameter(f"expected spark.<setting>=value (e.g. spark.ui.enabled=true), got {item!r}",
                                     ctx=ctx, param=param)
        conf[key] = value
    return conf


def _run_options(fn: Any) -> Any:
    """The options shared by ``run`` and ``restore``."""
    options = [
        click.option("--job-id", "job_name", default=None,
                     help="the job's id: its folder in --storage, and JOB_ID in the other verbs (default: the spec's "
                          "module name)"),
        deprecated_alias("--name", "job_name", "--job-id", default=None),
        click.option("--runtime", type=click.Choice(["local", "spark"]), default="local", show_default=True),
        click.option("--parallelism", type=click.IntRange(min=1), default=None),
        click.option("--storage", default=None, callback=_location,
                     help="checkpoint storage: s3://bucket/prefix or file:///path"),
        click.option("--savepoint-dir", default=None, callback=_location,
                     help="default savepoint root (s3:// or file://; default: the --storage root)"),
        click.option("--retained", type=click.IntRange(min=1), default=3, show_default=True,
                     help="completed checkpoints to retain"),
        click.option("--checkpoint-interval", "interval_ms", type=int, default=5_000, show_default=True,
                     help="ms between checkpoints; 0 disables checkpointing"),
        click.option("--output", default=None, callback=_location,
                     help="folder for the job's result streams (exactly-once files)"),
        click.option("--host", default="127.0.0.1", show_default=True, help="control API bind address"),
        click.option("--port", type=int, default=0, help="control API port (0: any free port)"),
        click.option("--token", envvar="SLUICE_CONTROL_TOKEN", show_envvar=True, default=None,
                     help="bearer token for the control API"),
        click.option("--param", "params", multiple=True, help="key=value passed to the job function (JSON values)"),
        click.option("--option", "options", multiple=True, callback=_runtime_options,
                     help="runtime option key=value, value as JSON (e.g. bundle_size=64); the keys are listed "
                          "below, an unknown one is refused"),
        click.option("--spark-conf", "spark_conf", multiple=True, callback=_spark_conf,
                     help="Spark setting key=value for the session the spark runtime starts (repeatable), e.g. "
                          "spark.ui.enabled=true turns the Spark UI on"),
        click.option("--progress/--no-progress", default=None,
                     help="progress lines on stderr for validation, restore and the wait for the first checkpoint "
                          "(default: on a terminal only)"),
        click.option("--started-by", default="cli", hidden=True,
                     help="who starts this master, recorded with the job's desired state (the Airflow operators "
                          "pass airflow:<dag>/<run>/<task>)"),
        click.option("--skip-validation", is_flag=True,
                     help="restore without validating the snapshot first (logged loudly; not recommended)"),
        click.option("--validated-digest", default=None, hidden=True,
                     help="sha256 of the snapshot's _metadata as the caller validated it just before (the Airflow "
                          "restore operator): unchanged, it is not validated a second time"),
        click.option("--lease-ttl", "lease_ttl_s", type=click.FloatRange(min=1.0), default=15.0, show_default=True,
                     help="seconds the job's lease lasts without a renewal (renewed with every heartbeat); a "
                          "crashed master blocks a new one at most this long"),
        click.option("--lease-wait", "lease_wait_s", type=click.FloatRange(min=0.0), default=0.0,
                     show_default=True,
                     help="seconds to wait for another master's lease on the job to expire before refusing "
                          "to start (use about --lease-ttl when restarting a master that crashed)"),
        click.option("--log-level", envvar="SLUICE_LOG_LEVEL", default="INFO", show_default=True,
                     type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False),
                     help="level of Sluice's own log lines (libraries stay at WARNING)"),
        click.option("--log-format", envvar="SLUICE_LOG_FORMAT", default="human", show_default=True,
                     type=click.Choice(["human", "json"]),
                     help="log lines on stderr: human-readable, or one JSON object per line with the event's "
                          "figures as keys (checkpoint_id, duration_ms, ...)"),
        click.option("--status-interval", "status_interval_ms", type=click.IntRange(min=50), default=2_000,
                     show_default=True,
                     help="ms between status publications (the status document in --storage) and samples of the "
                          "job view (GET /jobs/<job id>/view on the control API)"),
        click.option("--allow-drained", is_flag=True,
                     help="restore a drained snapshot (taken by stop --drain) too: the job starts at the end of "
                          "event time, where every new record is late for event-time windows"),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def _run_job(job: str, from_savepoint: str | None, job_name: str | None, runtime: str, parallelism: int | None,
             storage: str | None, savepoint_dir: str | None, retained: int, interval_ms: int, output: str | None,
             host: str, port: int, token: str | None, params: tuple[str, ...], options: dict[str, Any],
             skip_validation: bool, allow_drained: bool = False, started_by: str = "cli",
             validated_digest: str | None = None, lease_ttl_s: float = 15.0, lease_wait_s: float = 0.0,
             log_level: str = "INFO", log_format: str = "human", status_interval_ms: int = 2_000,
             spark_conf: dict[str, str] | None = None, progress: bool | None = None) -> None:
    from checkpoints.errors import LeaseHeld
    from engine.logs import configure_logging
    from engine.master.master import JobMaster, MasterConfig
    from engine.master.signals import SuspendOnSignal
    from engine.progress import Progress

    configure_logging(log_level, log_format)
    shown = Progress(progress)
    if spark_conf:
        if runtime != "spark":
            raise click.UsageError("--spark-conf needs --runtime spark: the local runtime starts no Spark session")
        options = {**options, "spark_conf": spark_conf}

    if from_savepoint is not None:
        from checkpoints.validation import ensure_restorable

        if skip_validation:
            click.echo(f"WARNING: restoring {from_savepoint} WITHOUT validating it (--skip-validation)", err=True)
        with shown.step(f"validating {from_savepoint}" if not skip_validation else f"checking {from_savepoint}"):
            ensure_restorable(from_savepoint, job_spec=job, skip_validation=skip_validation,
                              allow_drained=allow_drained, validated_digest=validated_digest)
    name = job_name or job.partition(":")[0].rsplit(".", 1)[-1]
    config = MasterConfig(job_spec=job, job_name=name, params=_parse_params(params), runtime=runtime,
                          parallelism=parallelism, checkpoint_interval_ms=interval_ms or None, storage_uri=storage,
                          savepoint_dir=savepoint_dir, retained_checkpoints=retained, from_savepoint=from_savepoint,
                          output_dir=output, host=host, port=port, token=token,
                          runtime_options=options, started_by=started_by,
                          lease_ttl_ms=int(lease_ttl_s * 1000), lease_wait_s=lease_wait_s,
                          status_interval_ms=status_interval_ms)
    master = JobMaster(config)
    master.on_fenced = _exit_fenced
    # SIGTERM / SIGINT suspend the job (engine/master/signals.py) for as long as the master lives
    signals = SuspendOnSignal(master).install()
    try:
        try:
            with shown.step(f"restoring from {from_savepoint}" if from_savepoint else f"starting {name}"):
                master.start()
        except LeaseHeld as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(json.dumps({"job_id": master.client.get_job_id(), "control_url": master.url}), err=True)
        if shown.enabled and interval_ms:
            _show_first_checkpoint(master, shown)
        try:
            result = master.wait()
        except Exception:
            if master.suspension is None:
                raise
            result = None  # what the job did after the signal is in the status document and the log
    finally:
        signals.uninstall()
    if master.suspension is not None:
        _exit_suspended(master)
    click.echo(json.dumps({"job_id": result.job_id, "runtime_ms": result.net_runtime_ms,
                           "restarts": result.restarts, "metrics": result.metrics}))


def _show_first_checkpoint(master: Any, shown: Any) -> None:
    """A progress step, on a daemon thread, from the job's start to its first completed checkpoint."""
    import threading
    import time

    def watch() -> None:
        with shown.step("waiting for the first checkpoint") as outcome:
            while True:
                try:
                    status = master.view.job.status()
                except Exception:  # noqa: BLE001 - the job is gone: the run's own output says why
                    outcome.append("the job is gone")
                    return
                if status.get("last_completed_checkpoint"):
                    outcome.append(f"checkpoint {status['last_completed_checkpoint']} completed")
                    return
                if status.get("state") not in ("CREATED", "RUNNING", "RESTARTING", "INITIALIZING"):
                    outcome.append(f"the job is {status.get('state')} without a checkpoint")
                    return
                time.sleep(0.2)

    threading.Thread(target=watch, name="sluice-progress", daemon=True).start()


#: exit status of a master that another master fenced (EX_TEMPFAIL: supervision decides what runs)
EXIT_FENCED = 75


def _exit_fenced(error: BaseException) -> None:
    """A fenced master stops at once: no final status, no commit, no clean-up that could touch the new
    holder's files.  The process exits from the heartbeat thread, mid-whatever the job was doing."""
    print(f"FENCED: {error}", file=sys.stderr, flush=True)
    os._exit(EXIT_FENCED)


def _exit_suspended(master: Any) -> None:
    """A master stopped by a signal has suspended its job: say so and how to resume, then exit at once with
    128 + the signal's number (143 for SIGTERM, 130 for SIGINT), as a shell reports a signalled process."""
    try:
        line = master.describe_suspension()
    except Exception as exc:  # noqa: BLE001 - the exit status matters more than the sentence
        line = f"SUSPENDED: job suspended on {master.suspension.signal} ({type(exc).__name__}: {exc})"
    print(line, file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(master.suspension.exit_status)  # daemon threads and atexit hooks must not delay the exit


def _epilog() -> str:
    from engine.runtime.options import help_epilog

    return help_epilog()


@main.command(epilog=_epilog())
@click.argument("job")
@click.option("--from-savepoint", default=None,
              help="restore from this savepoint or retained checkpoint (validated first)")
@_run_options
def run(job: str, from_savepoint: str | None, **kwargs: Any) -> None:
    """Run JOB (an import path module:function) under a job master with a control API."""
    _run_job(job, from_savepoint, **kwargs)


@main.command(epilog=_epilog())
@click.argument("job")
@click.argument("snapshot")
@_run_options
def restore(job: str, snapshot: str, **kwargs: Any) -> None:
    """Validate SNAPSHOT with Great Expectations, then run JOB from it (refused if it fails or is drained)."""
    _run_job(job, snapshot, **kwargs)


def _client(job_id: str, url: str | None, storage: str | None, token: str | None,
           control_hosts: str | None) -> Any:
    from engine.master.client import ControlClient, discover_control_url, trusted_control_url

    if url is None:
        if storage is None:
            raise click.UsageError("give --url of the job master, or --storage where its status document lives")
        url = discover_control_url(storage, job_id)
        if token:  # storage is no authority on where the token may go
            url = trusted_control_url(url, (control_hosts or "").split(","))
    return ControlClient(url, job_id, token)


_locate = [
    click.argument("job_id"),
    click.option("--url", default=None, help="job master control URL"),
    click.option("--storage", default=None, callback=_location,
                 help="checkpoint storage to find the master's status document in"),
    click.option("--token", envvar="SLUICE_CONTROL_TOKEN", show_envvar=True, default=None,
                 help="bearer token for the job master's control API"),
    click.option("--control-hosts", envvar="SLUICE_CONTROL_HOSTS", default=None,
                 help="comma-separated hosts (name, .domain suffix or CIDR network) besides loopback that the "
                      "token may be sent to when the control URL is read from --storage"),
]


def _with_locate(fn: Any) -> Any:
    for decorator in reversed(_locate):
        fn = decorator(fn)
    return fn


def _json_output(fn: Any) -> Any:
    """``--json``: the plain data for scripts instead of lines for a person (the default), as every verb spells it.
    The older ``--format json|human`` still works, hidden, with a deprecation note."""

    def old_format(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        if value is None:
            return
        click.echo("DeprecationWarning: --format is deprecated; use --json for JSON (human lines are the default).",
                   err=True)
        ctx.params["as_json"] = value == "json"

    fn = click.option("--format", "as_json__format", type=click.Choice(["json", "human"]), default=None, hidden=True,
                      expose_value=False, callback=old_format)(fn)
    return click.option("--json", "as_json", is_flag=True, help="print the plain data as JSON (for scripts)")(fn)


@main.command()
@_with_locate
@_json_output
def status(job_id: str, url: str | None, storage: str | None, token: str | None,
           control_hosts: str | None, as_json: bool) -> None:
    """Print a job's status in a few lines (--json: the document as served): its master's, or, when no master
    answers, the status document the last one published in --storage (a stopped, suspended, failed or killed
    job), marked "source": "status document"."""
    from engine.master.client import ControlApiUnavailable, UntrustedControlUrl

    try:
        client = _client(job_id, url, storage, token, control_hosts)
        shown = client.status()
        click.echo(json.dumps(shown, indent=2) if as_json
                   else _human_status({"control_url": client.url, **shown}))
        return
    except UntrustedControlUrl:
        raise  # the token is not sent to a host off the allow list: say so, never fall back quietly
    except ControlApiUnavailable as exc:
        if storage is None:
            raise
        unreachable = str(exc)
    from checkpoints.backends import open_store
    from checkpoints.status import read_status

    document = read_status(open_store(storage), job_id)
    if document is None:
        raise ControlApiUnavailable(unreachable)
    shown = json.loads(document.to_json())
    shown.update(source="status document", note=f"no job master answers ({unreachable}); this is what the "
                 "last master published, with its heartbeat time")
    click.echo(json.dumps(shown, indent=2) if as_json else _human_status(shown))


def _when(ms: Any, now_ms: int | None) -> str:
    """``2026-11-26 13:10:04 UTC (12 s ago)``, or ``-``; ``now_ms`` None: the time alone (an event time, whose
    distance from the wall clock says nothing)."""
    if not isinstance(ms, int) or isinstance(ms, bool) or ms <= 0:
        return "-"
    from datetime import datetime, timezone

    stamp = datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{stamp} ({_age(now_ms - ms)} ago)" if now_ms is not None and ms <= now_ms else stamp


def _age(ms: int) -> str:
    seconds = max(0, ms) / 1000
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _human_status(s: dict[str, Any], now_ms: int | None = None) -> str:
    """A few lines for a person: a master's status (``GET /jobs/{id}``) or a status document (``_status.json``)."""
    import time

    now = int(time.time() * 1000) if now_ms is None else now_ms
    extra = s.get("extra") or {}
    control_url = s.get("control_url") or extra.get("control_url")
    source = s.get("source") or "job master"
    lines = [f"job {s.get('job_id')}: {s.get('state')} (from the {source}"
             + (f", heartbeat {_when(s.get('heartbeat_ms'), now)}" if s.get("heartbeat_ms") else "") + ")"]
    facts = [("runtime", s.get("runtime") or extra.get("runtime")),
             ("parallelism", s.get("parallelism") or extra.get("parallelism")),
             ("attempt", s.get("attempt")), ("restarts", s.get("restarts"))]
    known = ", ".join(f"{name} {value}" for name, value in facts if value is not None)
    if known:
        lines.append(f"  {known}")
    if s.get("records_in") is not None or s.get("records_per_second") is not None:
        lines.append(f"  records in {s.get('records_in', '-')}, out {s.get('records_out', '-')}, "
                     f"{s.get('records_per_second') or 0:.1f} records/s in")
    lag = s.get("lag_ms")
    lines.append(f"  watermark {_when(s.get('watermark_ms'), None)}"
                 + (f" (event-time lag {_age(lag)})" if isinstance(lag, int) else ""))
    counts = ""
    if s.get("num_completed_checkpoints") is not None:
        counts = f"; {s['num_completed_checkpoints']} completed, {s.get('num_failed_checkpoints', 0)} failed"
    lines.append(f"  last checkpoint {s.get('last_completed_checkpoint') or '-'} at "
                 f"{_when(s.get('last_completed_ms'), now)}{counts}")
    splits = s.get("splits") or {}
    for split, state in sorted(splits.items()):
        lines.append(f"  split {split}: " + ("idle" if state.get("idle") else "active")
                     + f", watermark {_when(state.get('watermark_ms'), None)}")
    metrics = s.get("metrics") or {}
    if metrics:
        lines.append(f"  late records dropped {metrics.get('num_late_records_dropped', 0)}, "
                     f"dead letters {metrics.get('num_dead_letter_records', 0)}")
    suspension = s.get("suspension")
    if suspension:
        lines.append(f"  suspended on {suspension.get('signal')}" + (f": {suspension['note']}"
                                                                     if suspension.get("note") else ""))
    for failure in (s.get("failures") or [])[-3:]:
        lines.append(f"  failure: {failure.get('message') if isinstance(failure, dict) else failure}")
    if control_url:
        lines.append(f"  control API {control_url}; job view {control_url.rstrip('/')}/jobs/{s.get('job_id')}/view")
    if s.get("note"):
        lines.append(f"  note: {s['note']}")
    return "\n".join(lines)


@main.command(name="list")
@click.option("--storage", required=True, callback=_location,
              help="checkpoint storage root the jobs' masters publish their status documents in")
@_json_output
def list_jobs(storage: str, as_json: bool) -> None:
    """List the jobs under a storage root: each one's state, heartbeat and last checkpoint from its status
    document (the last one its master published; a job whose master died still says RUNNING there, with an
    old heartbeat).  Lists every key under the root once: on a large bucket, point --storage at the jobs'
    own prefix."""
    import time

    from checkpoints.backends import open_store
    from checkpoints.layout import STATUS_FILE
    from checkpoints.status import read_status

    store = open_store(storage)
    job_ids = sorted({info.key.split("/", 1)[0] for info in store.list("")
                      if info.key.count("/") == 1 and info.key.endswith("/" + STATUS_FILE)})
    now = int(time.time() * 1000)
    jobs = []
    for job_id in job_ids:
        try:
            document = read_status(store, job_id)
        except Exception as exc:  # noqa: BLE001 - one unreadable document must not hide the other jobs
            jobs.append({"job_id": job_id, "state": "UNREADABLE", "problem": f"{type(exc).__name__}: {exc}"})
            continue
        if document is not None:
            jobs.append({"job_id": job_id, "state": document.state, "heartbeat_ms": document.heartbeat_ms,
                         "last_completed_checkpoint": document.last_completed_checkpoint,
                         "last_completed_ms": document.last_completed_ms,
                         "runtime": document.extra.get("runtime"), "control_url": document.extra.get("control_url")})
    if as_json:
        click.echo(json.dumps({"storage": storage, "jobs": jobs}, indent=2))
        return
    if not jobs:
        click.echo(f"no job has published a status document under {storage}")
        return
    rows = [("JOB", "STATE", "HEARTBEAT", "LAST CHECKPOINT", "RUNTIME")]
    for job in jobs:
        checkpoint = job.get("last_completed_checkpoint")
        rows.append((job["job_id"], job["state"], _age(now - job["heartbeat_ms"]) + " ago" if job.get("heartbeat_ms")
                     else job.get("problem", "-"),
                     f"{checkpoint} ({_age(now - job['last_completed_ms'])} ago)" if checkpoint is not None
                     and job.get("last_completed_ms") else str(checkpoint or "-"), str(job.get("runtime") or "-")))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())


@main.command()
@_with_locate
@click.option("--file", "page_file", type=click.Path(dir_okay=False, writable=True), default=None,
              help="file to write the page to (default: sluice-view-<job id>.html here)")
@deprecated_alias("--output", "page_file", "--file", type=click.Path(dir_okay=False, writable=True), default=None)
def view(job_id: str, url: str | None, storage: str | None, token: str | None, control_hosts: str | None,
         page_file: str | None) -> None:
    """Save a running job's view (its master's GET /jobs/<job id>/view: charts of throughput, watermarks per
    split, checkpoints, late records and dead letters) to a file a browser opens, and print its path.  For a
    master with a token, which a browser cannot send; without one, the URL opens in a browser directly."""
    from pathlib import Path

    client = _client(job_id, url, storage, token, control_hosts)
    target = Path(page_file or f"sluice-view-{job_id}.html")
    target.write_text(client.view(), encoding="utf-8")
    click.echo(str(target.resolve()))


def _wait_for(client: Any, kind: str, trigger_id: str) -> None:
    from rich.console import Console

    with Console(stderr=True).status(f"{kind} {trigger_id} in progress"):
        op = client.wait(kind, trigger_id)
    if op["status"]["id"] == "COMPLETED":
        click.echo(op["operation"]["location"])
        return
    click.echo(f"{kind} failed: {op['operation'].get('failure-cause')}", err=True)
    sys.exit(1)


@main.command()
@_with_locate
@click.option("--savepoint-dir", "target", default=None, callback=_location,
              help="savepoint directory (default: the job's --savepoint-dir)")
@deprecated_alias("--target", "target", "--savepoint-dir", default=None, callback=_location)
@click.option("--trigger-id", default=None, help="idempotency key: retrying with it never takes a second savepoint")
def savepoint(job_id: str, url: str | None, storage: str | None, token: str | None,
           control_hosts: str | None, target: str | None,
              trigger_id: str | None) -> None:
    """Take a savepoint of a running job and print its location."""
    client = _client(job_id, url, storage, token, control_hosts)
    _wait_for(client, "savepoint", client.trigger_savepoint(target, trigger_id))


@main.command()
@_with_locate
@click.option("--savepoint/--no-savepoint", "with_savepoint", default=True, show_default=True)
@click.option("--drain", is_flag=True,
              help="emit MAX_WATERMARK first: fire all event-time windows (Flink --drain); for a job that will not "
                   "be resumed: restoring its savepoint needs --allow-drained")
@click.option("--savepoint-dir", "target", default=None, callback=_location,
              help="savepoint directory (default: the job's --savepoint-dir)")
@deprecated_alias("--target", "target", "--savepoint-dir", default=None, callback=_location)
def stop(job_id: str, url: str | None, storage: str | None, token: str | None,
           control_hosts: str | None, with_savepoint: bool, drain: bool,
         target: str | None) -> None:
    """Stop a running job, with a savepoint (default) or by cancelling it."""
    client = _client(job_id, url, storage, token, control_hosts)
    if not with_savepoint:
        client.cancel()
        click.echo("cancelled")
        return
    _wait_for(client, "stop", client.stop(target, drain))


@main.command()
@_with_locate
def cancel(job_id: str, url: str | None, storage: str | None, token: str | None,
           control_hosts: str | None) -> None:
    """Cancel a running job without a savepoint."""
    _client(job_id, url, storage, token, control_hosts).cancel()
    click.echo("cancelled")


@click.command("history")
@click.argument("job_id")
@click.option("--storage", required=True, callback=_location,
              help="checkpoint storage: its retained checkpoints, and the status document naming the job's master")
@click.option("--url", default=None, help="job master control URL (default: the one its status document names)")
@click.option("--token", envvar="SLUICE_CONTROL_TOKEN", show_envvar=True, default=None,
              help="bearer token for the job master's control API")
@click.option("--control-hosts", envvar="SLUICE_CONTROL_HOSTS", default=None,
              help="comma-separated hosts besides loopback the token may be sent to (see sluice status)")
@_json_output
def history_command(job_id: str, storage: str, url: str | None, token: str | None, control_hosts: str | None,
                    as_json: bool) -> None:
    """The checkpoint history of JOB_ID: the retained checkpoints in --storage and, when its job master answers,
    the master's history (GET /jobs/<id>/checkpoints: every completed checkpoint and savepoint it keeps, beyond
    the retained ones) with its completed and failed counts.  Without a master, the retained ones alone."""
    from checkpoints.backends import open_store
    from checkpoints.inspect import list_checkpoints
    from engine.master.client import ControlApiUnavailable, UntrustedControlUrl

    retained = list_checkpoints(open_store(storage), job_id)["checkpoints"]
    master: dict[str, Any] = {"answered": False}
    try:
        client = _client(job_id, url, storage, token, control_hosts)
        history = client.checkpoints()
        status = client.status()
        master = {"answered": True, "control_url": client.url, "history": history,
                  "num_completed_checkpoints": status.get("num_completed_checkpoints"),
                  "num_failed_checkpoints": status.get("num_failed_checkpoints")}
    except UntrustedControlUrl:
        raise  # the token is not sent to a host off the allow list: say so, never fall back quietly
    except ControlApiUnavailable as exc:  # no master runs, or none ever published a control URL: say why
        master["why"] = str(exc)
    if as_json:
        click.echo(json.dumps({"job_id": job_id, "storage": storage, "retained": retained, "master": master},
                              indent=2))
        return
    import time

    now = int(time.time() * 1000)
    click.echo(f"job {job_id}: {len(retained)} retained checkpoint(s) in {storage}")
    for c in retained:
        click.echo(f"  chk-{c['checkpoint_id']:<6} {_when(c['completed_ms'], now)}  {c['total_bytes']:>10} B  "
                   f"{c['uri']}{'  (latest)' if c['latest'] else ''}")
    if not master["answered"]:
        click.echo(f"no job master answers ({master['why']}): its history is not shown")
        return
    click.echo(f"job master {master['control_url']}: {master['num_completed_checkpoints']} completed, "
               f"{master['num_failed_checkpoints']} failed checkpoint(s); its history:")
    for h in master["history"]:
        triggered, completed = h.get("triggered_ms"), h.get("completed_ms")
        took = f"{completed - triggered} ms" if isinstance(triggered, int) and isinstance(completed, int) else "-"
        size = h.get("size_bytes")
        click.echo(f"  {h.get('kind', 'checkpoint'):10} {h.get('checkpoint_id'):<6} {_when(completed, now)}  "
                   f"took {took:>8}  {size if size is not None else '-':>10} B  {h.get('external_pointer') or ''}")


def _mount_storage_commands() -> None:
    from checkpoints.cli import checkpoints_cli, inspect_command
    from checkpoints.validation_cli import validate_command

    checkpoints_cli.add_command(history_command, "history")
    main.add_command(checkpoints_cli, "checkpoints")
    main.add_command(inspect_command, "inspect")
    main.add_command(validate_command, "validate")


_mount_storage_commands()


def entry_point() -> None:
    """Console entry: Sluice's own errors are printed as one clear line (exit 1), not a traceback."""
    from engine.errors import SluiceError

    try:
        main(standalone_mode=False)
    except SluiceError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(1)


if __name__ == "__main__":
    entry_point()
