"""The ``sluice`` command line (ARCHITECTURE section 7).

Verbs: ``demo`` and ``prepare-spark`` (here), ``run`` and ``restore`` (engine/cli_run.py), ``status``, ``list``,
``view``, ``savepoint``, ``stop``, ``cancel`` and ``checkpoints history`` (engine/cli_control.py), and the storage
verbs ``checkpoints list|clean``, ``inspect`` and ``validate`` from the checkpoints package; this module is the
group that mounts them all and the console entry point. Verbs that print data print lines for a person; ``--json``
prints the plain data for scripts (the older ``--format json|human`` still works, hidden, with a deprecation note).
One flag name per concept across verbs (tests/engine/test_cli_flags.py holds the table): the savepoint directory is
``--savepoint-dir``, the job's id ``--job-id`` (``JOB_ID`` where it is an argument), ``--output`` the job's output
folder; the older ``--target``, ``--savepoints``, ``--name`` and ``view --output`` still work, hidden, with a
deprecation note. ``run --from-savepoint`` and ``restore`` validate the snapshot with Great Expectations first and
refuse a snapshot that fails, unless ``--skip-validation`` is given; they refuse a drained snapshot (``stop
--drain``: its watermark is MAX_WATERMARK) unless ``--allow-drained`` is given, and one holding state of an operator
the job no longer has unless ``-n/--allow-non-restored-state`` is given. A running job is found through the status
document its master publishes in checkpoint storage (``--storage``), or directly with ``--url``.
"""

from __future__ import annotations

import json
import os
import sys

import click

from engine.cli_control import cancel, history_command, list_jobs, savepoint, status, stop, view
from engine.cli_run import restore, run

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
@click.option("--events-per-split", type=int, default=6_000, show_default=True,
              help="events in each of the job's four source splits")
@click.option("--parallelism", type=int, default=2, show_default=True, help="parallelism of the first run")
@click.option("--restore-parallelism", type=int, default=3, show_default=True,
              help="parallelism of the run restored from the savepoint")
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


@main.command("prepare-spark")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="seconds the recording job may take")
def prepare_spark(timeout: float) -> None:
    """Build the class archive the Spark driver's JVM starts from (Java class data sharing): a small Spark job runs
    once and its JVM writes the classes it loaded; every later Spark session of this virtualenv maps them and starts
    seconds sooner.  Run it again after changing PySpark or Java (engine/prepare_spark.py)."""
    from engine.prepare_spark import build_archive

    path = build_archive(timeout)
    click.echo(f"JVM class archive written: {path} ({path.stat().st_size // (1 << 20)} MiB)")


def _s3_options() -> list[click.Option]:
    """``--endpoint-url`` and ``--region`` for the verbs that run or find a job, as the storage verbs have them.

    They set boto3's environment (``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION``) for this process before the verb
    runs, so the job, its Spark session's Python workers (started from this environment) and the status reads
    all reach the same S3-compatible store."""
    def setter(*names: str):
        def apply(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
            if value:
                for name in names:
                    os.environ[name] = value
            return value
        return apply

    return [click.Option(["--endpoint-url"], default=None, expose_value=False, is_eager=True,
                         callback=setter("AWS_ENDPOINT_URL"), help="S3-compatible endpoint (sets AWS_ENDPOINT_URL)"),
            click.Option(["--region"], default=None, expose_value=False, is_eager=True,
                         callback=setter("AWS_DEFAULT_REGION", "AWS_REGION"),
                         help="S3 region (sets AWS_DEFAULT_REGION)")]


def _mount_commands() -> None:
    """The verbs defined in their own modules: running a job (engine/cli_run.py), finding and controlling one
    (engine/cli_control.py), and the storage verbs of the checkpoints package."""
    from checkpoints.cli import checkpoints_cli, inspect_command
    from checkpoints.validation_cli import validate_command

    for command in (run, restore, status, list_jobs, view, savepoint, stop, cancel):
        command.params.extend(_s3_options())
        main.add_command(command)
    history_command.params.extend(_s3_options())
    checkpoints_cli.add_command(history_command, "history")
    main.add_command(checkpoints_cli, "checkpoints")
    main.add_command(inspect_command, "inspect")
    main.add_command(validate_command, "validate")


_mount_commands()


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
