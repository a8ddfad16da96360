"""Click commands for the lead's ``sluice`` CLI to mount: ``checkpoints list|clean <job>`` and ``inspect <snapshot>``
(``checkpoints history``, which asks a running master too, is engine/cli_control.py's).  The savepoint root is
``--savepoint-dir``, as in ``sluice run``; the older ``--savepoints`` still works, hidden, with a deprecation note.

Mount with ``cli.add_command(checkpoints_cli, "checkpoints")`` and
``cli.add_command(inspect_command, "inspect")``.  Both print a short human
summary, or the plain data with ``--json``.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import click

from checkpoints.backends import open_store
from checkpoints.errors import CorruptSnapshotError, InvalidStorageUri, UnsupportedFormatVersion
from checkpoints.inspect import inspect_snapshot, list_checkpoints
from checkpoints.lease import read_lease
from checkpoints.orphans import clean_orphans
from checkpoints.status import read_status
from engine.elements import MAX_WATERMARK, MIN_WATERMARK


def deprecated_alias(old: str, dest: str, new: str, **kwargs: Any) -> Any:
    """A hidden option ``old`` filling ``dest`` as ``new`` does, and saying on stderr, when used, that it is
    deprecated: old scripts keep working while each concept has one flag name in ``--help``.

    The alias has a name of its own (options sharing a name share the parsed value too, so a note could not
    tell which flag was typed) and puts its value into ``dest`` itself; click does not overwrite a value set
    that way with the other option's default."""

    def use(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is None:
            return
        click.echo(f"DeprecationWarning: {old} is deprecated; use {new} (the same value).", err=True)
        callback = kwargs.get("callback")
        ctx.params[dest] = callback(ctx, param, value) if callback is not None else value

    alias = f"{dest}__{old.lstrip('-').replace('-', '_')}"
    return click.option(old, alias, hidden=True, expose_value=False, **{**kwargs, "callback": use})


def checked_location(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Click callback for a storage location option (``--storage``, ``--savepoint-dir``, ...): s3://, file:// or a
    plain path, checked before anything starts, so a bad one is refused naming the flag."""
    if value is None:
        return None
    from checkpoints.errors import InvalidStorageUri

    try:
        open_store(value)
    except InvalidStorageUri as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None
    return value


def _savepoint_dir_of(store: Any, job_id: str) -> str | None:
    """The savepoint directory the job's (last) master published in its status document, if it names a valid
    one; None when there is no document (nothing read from storage is trusted beyond its checks)."""
    try:
        doc = read_status(store, job_id)
    except (CorruptSnapshotError, UnsupportedFormatVersion):
        return None  # `sluice status` says what is wrong with it; listing goes on from --storage
    root = (doc.extra or {}).get("savepoint_dir") if doc is not None else None
    if not isinstance(root, str) or not root.startswith(("s3://", "s3a://", "file://")):
        return None
    try:
        open_store(root)
    except InvalidStorageUri:
        return None
    return root


def _store_options(endpoint_url: str | None, region: str | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if endpoint_url:
        options["endpoint_url"] = endpoint_url
    if region:
        options["region"] = region
    return options


def _when(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _watermark(ms: int) -> str:
    if ms == MAX_WATERMARK:
        return "MAX_WATERMARK (end of event time)"
    if ms == MIN_WATERMARK:
        return "MIN_WATERMARK (none yet)"
    return f"{ms} ({_when(ms)})"


def _echo_event_time(event_time: dict[str, Any]) -> None:
    """The job's watermark, then each operator's (subtasks with equal watermarks on one line), then each split's."""
    job = event_time["job_ms"]
    none = not (job is not None or event_time["operators"] or event_time["splits"])
    click.echo("  watermarks:" + (" none recorded" if none else "" if job is None else f" job at {_watermark(job)}"))
    for uid, subtasks in event_time["operators"].items():
        by_value: dict[int, list[str]] = {}
        for subtask, ms in subtasks.items():
            by_value.setdefault(ms, []).append(subtask)
        parts = [f"subtask{'s' if len(subs) > 1 else ''} {', '.join(subs)} at {_watermark(ms)}"
                 for ms, subs in by_value.items()]
        click.echo(f"    operator {uid}: {'; '.join(parts)}")
    for split, ms in event_time["splits"].items():
        click.echo(f"    split {split}: {_watermark(ms)}")


@click.group("checkpoints")
def checkpoints_cli() -> None:
    """Checkpoints and savepoints of a job."""


@checkpoints_cli.command("list")
@click.argument("job_id")
@click.option("--storage", required=True, callback=checked_location,
              help="checkpoint root: s3://bucket/prefix or file:///path")
@click.option("--savepoint-dir", "savepoint_root", default=None, callback=checked_location,
              help="savepoint root (the job's --savepoint-dir; default: the one its master's status document "
                   "names, else --storage, where a job run without one puts its savepoints)")
@deprecated_alias("--savepoints", "savepoint_root", "--savepoint-dir", default=None, callback=checked_location)
@click.option("--endpoint-url", default=None, help="S3-compatible endpoint")
@click.option("--region", default=None, help="S3 region")
@click.option("--json", "as_json", is_flag=True, help="print the plain data as JSON")
def list_command(job_id: str, storage: str, savepoint_root: str | None, endpoint_url: str | None,
                 region: str | None, as_json: bool) -> None:
    """List the retained checkpoints and the savepoints of JOB_ID (savepoints from --savepoint-dir, else from
    the savepoint directory its master's status document names, else from --storage)."""
    options = _store_options(endpoint_url, region)
    store = open_store(storage, **(options if storage.startswith("s3") else {}))
    savepoint_root = savepoint_root or _savepoint_dir_of(store, job_id) or storage
    savepoint_store = open_store(savepoint_root, **(options if savepoint_root.startswith("s3") else {}))
    data = list_checkpoints(store, job_id, savepoint_store)
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    click.echo(f"job {job_id}: {len(data['checkpoints'])} retained checkpoint(s), highest id {data['max_checkpoint_id']}")
    for c in data["checkpoints"]:
        latest = "  (latest)" if c["latest"] else ""
        click.echo(f"  chk-{c['checkpoint_id']:<6} {_when(c['completed_ms'])}  {c['total_bytes']:>12} B  {c['uri']}{latest}")
    for s in data["savepoints"]:
        validation = s["validation"] or "not validated"
        click.echo(f"  savepoint {s['checkpoint_id']:<4} {_when(s['completed_ms'])}  validation={validation}  {s['uri']}")


@checkpoints_cli.command("clean")
@click.argument("job_id")
@click.option("--storage", required=True, callback=checked_location,
              help="checkpoint root: s3://bucket/prefix or file:///path")
@click.option("--savepoint-dir", "savepoint_root", default=None, callback=checked_location,
              help="savepoint root (the job's --savepoint-dir; its --storage when it has none): failed savepoints "
                   "there are cleaned too, and savepoints' commit handles keep their staged parts")
@deprecated_alias("--savepoints", "savepoint_root", "--savepoint-dir", default=None, callback=checked_location)
@click.option("--grace-period", "grace_s", type=int, default=3600, show_default=True,
              help="seconds a folder or a sink transaction must be untouched before it counts as an orphan")
@click.option("--job-stopped", is_flag=True,
              help="no master runs for the job: folders newer than every indexed checkpoint are orphans too")
@click.option("--output", "outputs", multiple=True,
              help="a folder the job's sinks write to (sluice run's --output, or one sink's path; repeatable): "
                   "staged parts there that no retained checkpoint or savepoint names are orphans too. Lists "
                   "every object below it; no other job may write there. Needs --savepoint-dir")
@click.option("--scratch", is_flag=True,
              help="also sluice-spark-* scratch folders in this host's temp dir whose Spark driver is gone "
                   "(per host: whatever JOB_ID is)")
@click.option("--scratch-dir", type=click.Path(file_okay=False), default=None,
              help="look for scratch folders here instead of the temp dir ($TMPDIR); implies --scratch")
@click.option("--delete", is_flag=True, help="delete the orphans (default: list them only)")
@click.option("--endpoint-url", default=None, help="S3-compatible endpoint")
@click.option("--region", default=None, help="S3 region")
@click.option("--json", "as_json", is_flag=True, help="print the plain data as JSON")
def clean_command(job_id: str, storage: str, savepoint_root: str | None, grace_s: int, job_stopped: bool,
                  outputs: tuple[str, ...], scratch: bool, scratch_dir: str | None, delete: bool,
                  endpoint_url: str | None, region: str | None, as_json: bool) -> None:
    """List (or with --delete remove) what no snapshot of JOB_ID owns: files of aborted, failed or subsumed
    checkpoints and failed savepoints; with --output, sinks' staged parts; with --scratch, Spark scratch folders.

    Scratch folders belong to a host, not to a job, yet they are reported here, behind a flag: this is the
    verb an operator runs to reclaim what crashes leave (a killed driver leaves both staged parts and its
    scratch folder), and a folder is removed only when the process that made it is gone, so running it for
    any job of the host is safe.  JSON: each orphan has a key, reason, bytes and kind (checkpoint_file and
    savepoint_file: a key relative to its root; staged_part: a URI; scratch_folder: a path).
    """
    import tempfile

    if outputs and not savepoint_root:
        raise click.UsageError(
            "--output needs --savepoint-dir: a staged part may be named only by a savepoint's commit handle, and "
            "deleting it would leave that savepoint unrestorable. Pass the job's savepoint root (its "
            "--savepoint-dir; the --storage URI when it has none)")
    options = _store_options(endpoint_url, region)
    store = open_store(storage, **(options if storage.startswith("s3") else {}))
    savepoint_store = (
        open_store(savepoint_root, **(options if savepoint_root.startswith("s3") else {})) if savepoint_root else None
    )
    try:
        output_stores = [open_store(uri, **(options if uri.startswith("s3") else {})) for uri in outputs]
    except InvalidStorageUri as exc:
        raise click.BadParameter(str(exc), param_hint="--output") from None
    if job_stopped:
        import time

        view = read_lease(store, job_id)
        now_ms = int(time.time() * 1000)
        if view is not None and view.lease.is_live(now_ms):
            raise click.UsageError(
                f"--job-stopped, but job {job_id!r} has a live job master: {view.lease.describe(now_ms)}. Its "
                "in-flight checkpoint and staged parts would be taken for garbage and deleted under it. Stop it "
                "first (sluice stop/cancel), or leave out --job-stopped: the grace period then keeps what a "
                "running job may still complete")
    if scratch and scratch_dir is None:
        scratch_dir = tempfile.gettempdir()
    report = clean_orphans(store, job_id, grace_period_ms=grace_s * 1000, dry_run=not delete,
                           savepoint_store=savepoint_store, job_stopped=job_stopped, outputs=output_stores,
                           scratch_dir=scratch_dir)
    if as_json:
        click.echo(json.dumps({"deleted": report.deleted, "total_bytes": report.total_bytes, "notes": list(report.notes),
                               "orphans": [{"key": o.key, "reason": o.reason, "bytes": o.bytes, "kind": o.kind.value}
                                           for o in report.orphans]},
                              indent=2))
        return
    verb = "deleted" if report.deleted else "would delete (dry run; pass --delete)"
    click.echo(f"job {job_id}: {len(report.orphans)} orphan(s), {report.total_bytes} B {verb}")
    for o in report.orphans:
        click.echo(f"  {o.key}  ({o.reason})")
    for note in report.notes:
        click.echo(f"  note: {note}")


@click.command("inspect")
@click.argument("snapshot")
@click.option("--verify", is_flag=True, help="also verify every file's sha256 (reads all state)")
@click.option("--endpoint-url", default=None, help="S3-compatible endpoint")
@click.option("--region", default=None, help="S3 region")
@click.option("--json", "as_json", is_flag=True, help="print the plain data as JSON")
def inspect_command(snapshot: str, verify: bool, endpoint_url: str | None, region: str | None, as_json: bool) -> None:
    """Show a checkpoint's or savepoint's metadata, sizes, key-group coverage, state counts and watermarks."""
    options = _store_options(endpoint_url, region) if snapshot.startswith("s3") else {}
    data = inspect_snapshot(snapshot, verify_checksums=verify, **options)
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
    else:
        click.echo(f"{data['type']} {data['checkpoint_id']} of job {data['job_id']} ({data['job_name']})  {data['uri']}")
        click.echo(f"  completed {_when(data['complete_timestamp_ms'])}, {data['total_files']} files, {data['total_bytes']} bytes")
        for op in data["operators"]:
            click.echo(
                f"  operator {op['uid']} ({op['name']}): parallelism {op['parallelism']}, "
                f"key groups {op['key_groups_covered']}/{op['max_parallelism']}, {op['rows']} rows, {op['bytes']} bytes"
            )
            for state, counts in sorted(op["states"].items()):
                click.echo(f"    {state}: {counts['rows']} rows in {counts['files']} files ({counts['shared_files']} shared)")
        _echo_event_time(data["event_time"])
        if data["drained"]:
            click.echo(f"  drained: {data['drained']}; restoring it needs --allow-drained")
        if data["validation"]:
            click.echo(f"  validation: {data['validation'].get('status')}")
        for p in data["problems"]:
            click.echo(f"  PROBLEM: {p}")
        if verify and not data["problems"]:
            click.echo(f"  verified: the sha256 of all {data['total_files']} files matches _metadata")
    if data["problems"]:
        raise SystemExit(1)
