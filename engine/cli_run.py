"""The ``sluice run`` and ``sluice restore`` verbs: start a job under a job master (ARCHITECTURE section 7).

Both take the same options (``_run_options``); ``restore SNAPSHOT`` is ``run --from-savepoint SNAPSHOT``.  A
snapshot is validated with Great Expectations first (the outcome recorded in its ``_metadata``) and refused if it
fails, unless ``--skip-validation`` is given; a drained one (``stop --drain``: its watermark is MAX_WATERMARK) is
refused unless ``--allow-drained`` is given, and one holding state of an operator (uid) the job no longer has
unless ``-n/--allow-non-restored-state`` is given (Flink's ``-n/--allowNonRestoredState``; that state is then
dropped).  ``--option key=value`` takes the keys some runtime reads (engine/runtime/options.py), checked here.  The
master runs in this process until the job ends, then prints a JSON summary with the job's final ``state``.  The exit
status says how it ended: 0 for a job that finished (or was stopped with a savepoint), :data:`EXIT_CANCELED` for a
job cancelled from another shell (``sluice cancel``, ``sluice stop --no-savepoint``), 1 for a job that failed; a
fenced master exits with :data:`EXIT_FENCED`, a master stopped by SIGTERM or SIGINT suspends its job and exits
with 128 + the signal's number.  engine/cli.py mounts the verbs.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from checkpoints.cli import checked_location as _location
from checkpoints.cli import deprecated_alias


def _parse_params(values: tuple[str, ...], flag: str = "--param") -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint=flag)
        try:
            params[key] = json.loads(raw)
        except ValueError:
            params[key] = raw
    return params


def _runtime_options(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, Any]:
    """``--option key=value``: a key some runtime reads (engine/runtime/options.py), a value of its type."""
    from engine.errors import JobDefinitionError
    from engine.runtime.options import check_cli_option

    options = _parse_params(values, "--option")
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
        click.option("--runtime", type=click.Choice(["local", "spark"]), default="local", show_default=True,
                     help="run the job in this process (local) or on a local Spark session (spark)"),
        click.option("--parallelism", type=click.IntRange(min=1), default=None,
                     help="the job's default parallelism (default 1; a job's own set_parallelism wins)"),
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
        click.option("--allow-non-restored-state", "-n", "allow_non_restored_state", is_flag=True,
                     help="restore even when the snapshot holds state of an operator (uid) the job no longer has: "
                          "that state is dropped (Flink's -n/--allowNonRestoredState); without it such a snapshot "
                          "is refused, naming the operator"),
        click.option("--allow-drained", is_flag=True,
                     help="restore a drained snapshot (taken by stop --drain) too: the job starts at the end of "
                          "event time, where every new record is late for event-time windows"),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


#: the command-line spelling of a MasterConfig parameter its check() names
_FLAG_OF = {"job": "JOB", "token": "--token"}


def _run_job(job: str, from_savepoint: str | None, job_name: str | None, runtime: str, parallelism: int | None,
             storage: str | None, savepoint_dir: str | None, retained: int, interval_ms: int, output: str | None,
             host: str, port: int, token: str | None, params: tuple[str, ...], options: dict[str, Any],
             skip_validation: bool, allow_drained: bool = False, allow_non_restored_state: bool = False,
             started_by: str = "cli",
             validated_digest: str | None = None, lease_ttl_s: float = 15.0, lease_wait_s: float = 0.0,
             log_level: str = "INFO", log_format: str = "human", status_interval_ms: int = 2_000,
             spark_conf: dict[str, str] | None = None, progress: bool | None = None) -> None:
    from checkpoints.errors import LeaseHeld
    from engine.errors import JobDefinitionError
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
                              allow_drained=allow_drained, allow_non_restored_state=allow_non_restored_state,
                              validated_digest=validated_digest)
    name = job_name or job.partition(":")[0].rsplit(".", 1)[-1]
    config = MasterConfig(job_spec=job, job_name=name, params=_parse_params(params), runtime=runtime,
                          parallelism=parallelism, checkpoint_interval_ms=interval_ms or None, storage_uri=storage,
                          savepoint_dir=savepoint_dir, retained_checkpoints=retained, from_savepoint=from_savepoint,
                          output_dir=output, host=host, port=port, token=token,
                          runtime_options=options, started_by=started_by,
                          lease_ttl_ms=int(lease_ttl_s * 1000), lease_wait_s=lease_wait_s,
                          status_interval_ms=status_interval_ms)
    # usage errors (the master's own rules) before anything touches storage, naming the flag: exit 2
    try:
        config.check()
    except JobDefinitionError as exc:
        raise click.BadParameter(str(exc), param_hint=_FLAG_OF.get(exc.parameter, exc.parameter)) from None
    if storage is None and interval_ms:
        click.echo("WARNING: no --storage: checkpoints stay in this process's memory, so a restart starts from "
                   "scratch, and status, list and stop cannot find the job", err=True)
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
    state = master.client.get_job_status()
    click.echo(json.dumps({"job_id": result.job_id, "state": state, "runtime_ms": result.net_runtime_ms,
                           "restarts": result.restarts, "metrics": result.metrics}))
    dead = int((result.metrics or {}).get("num_dead_letter_records") or 0)
    if dead:  # where to find them: --output's _dead_letters/, dead_letter_dir, or the default (engine/local_dirs.py)
        click.echo(f"{dead} dead letter{'s' if dead > 1 else ''}: written to {master.dead_letter_dir}", err=True)
    if state == "CANCELED":
        # Flink's CLI reports such a job as CANCELED; a script must not read the cancel as a clean end
        click.echo(f"CANCELED: job {result.job_id!r} was cancelled without a savepoint; exit status "
                   f"{EXIT_CANCELED}", err=True)
        sys.exit(EXIT_CANCELED)


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

#: exit status of ``sluice run`` when its job was cancelled (``sluice cancel``, ``sluice stop --no-savepoint``):
#: apart from 0 (finished or stopped with a savepoint), 1 (failed, or an error), 2 (usage) and the above
EXIT_CANCELED = 3


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


@click.command(epilog=_epilog())
@click.argument("job")
@click.option("--from-savepoint", default=None,
              help="restore from this savepoint or retained checkpoint (validated first)")
@_run_options
def run(job: str, from_savepoint: str | None, **kwargs: Any) -> None:
    """Run JOB (an import path module:function) under a job master with a control API.

    Exit status: 0 the job finished or was stopped with a savepoint; 3 it was cancelled (sluice cancel, stop
    --no-savepoint: state CANCELED); 1 it failed; 2 usage error; 75 the master was fenced; 143/130 it was
    suspended by SIGTERM/SIGINT.
    """
    _run_job(job, from_savepoint, **kwargs)


@click.command(epilog=_epilog())
@click.argument("job")
@click.argument("snapshot")
@_run_options
def restore(job: str, snapshot: str, **kwargs: Any) -> None:
    """Validate SNAPSHOT with Great Expectations, then run JOB from it (refused if it fails or is drained).

    Exit status as for run: 0 finished or stopped with a savepoint, 3 cancelled, 1 failed (or the snapshot was
    refused), 2 usage error, 75 fenced, 143/130 suspended by a signal.
    """
    _run_job(job, snapshot, **kwargs)
