"""The ``sluice`` verbs that find a job and look at or control it (ARCHITECTURE section 7).

``status``, ``view``, ``savepoint``, ``stop`` and ``cancel`` reach a running job's master: directly with
``--url``, or through the status document it publishes in checkpoint storage (``--storage``; a token is sent
only to loopback or ``--control-hosts``).  ``status`` falls back to that document when no master answers;
``list`` reads every job's document under a storage root; ``checkpoints history`` lists the retained
checkpoints and, when the master answers, its history.  Verbs that print data print lines for a person;
``--json`` prints the plain data for scripts.  engine/cli.py mounts the verbs.
"""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any

import click

from checkpoints.cli import checked_location as _location
from checkpoints.cli import deprecated_alias


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


def _with_locate_options(fn: Any) -> Any:
    """``_locate`` without its JOB_ID argument, for a verb whose JOB_ID is optional."""
    for decorator in reversed(_locate[1:]):
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


@click.command()
@_with_locate
@_json_output
def status(job_id: str, url: str | None, storage: str | None, token: str | None,
           control_hosts: str | None, as_json: bool) -> None:
    """Print a job's status in a few lines (--json: the document as served): its master's, or, when no master
    answers, the status document the last one published in --storage (a stopped, suspended, failed or killed
    job), marked "source": "status document"."""
    from engine.master.client import ControlApiError, ControlApiUnavailable, UntrustedControlUrl

    try:
        client = _client(job_id, url, storage, token, control_hosts)
        shown = client.status()
        click.echo(json.dumps(shown, indent=2) if as_json
                   else _human_status({"control_url": client.url, **shown}))
        return
    except UntrustedControlUrl:
        raise  # the token is not sent to a host off the allow list: say so, never fall back quietly
    except ControlApiError as exc:
        refused = _needs_token(exc)
        if storage is None or not (isinstance(exc, ControlApiUnavailable) or refused):
            raise
        unreachable = refused or str(exc)
    from checkpoints.backends import open_store
    from checkpoints.status import read_status

    import time

    store = open_store(storage)
    document = read_status(store, job_id)
    if document is None:
        raise ControlApiUnavailable(unreachable)
    shown = json.loads(document.to_json())
    shown.update(source="status document", note=f"no job master answers ({unreachable}); this is what the "
                 "last master published, with its heartbeat time")
    gone = _master_gone(store, job_id, document, int(time.time() * 1000), storage)
    if gone:  # the same check and words as `sluice list`: a killed master's document says RUNNING forever
        shown.update(state="STALE", published_state=document.state, stale=gone)
    click.echo(json.dumps(shown, indent=2) if as_json else _human_status(shown))


def _needs_token(exc: Any) -> str | None:
    """Why the master refused, when it refused for want of the right token (401/403), else None."""
    if getattr(exc, "status_code", None) in (401, 403):
        return ("the job master refused the request: it needs its bearer token (--token or SLUICE_CONTROL_TOKEN)"
                f"; {exc}")
    return None


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
    from engine.master.client import ENDED_STATES

    # an ended job (or one whose master died) has no current rate, and no master answers at its control URL
    over = s.get("state") in ENDED_STATES or s.get("state") == "STALE"
    records_in = s["records_in"] if s.get("records_in") is not None else extra.get("records_in")
    records_out = s["records_out"] if s.get("records_out") is not None else extra.get("records_out")
    rate = None if over else s.get("records_per_second")
    if records_in is not None or records_out is not None or rate is not None:
        rate = None if over else rate or 0.0  # a running job without a rate yet reads 0.0, as before
        lines.append(f"  records in {'-' if records_in is None else records_in}, "
                     f"out {'-' if records_out is None else records_out}"
                     + (f", {rate:.1f} records/s in" if rate is not None else ""))
    lag = s.get("lag_ms")
    watermark = _when(s.get("watermark_ms"), None)
    # no lag beside no watermark (a job before its first one, or whose event time is still at 1970)
    lines.append(f"  watermark {watermark}"
                 + (f" (event-time lag {_age(lag)})" if isinstance(lag, int) and watermark != "-" else ""))
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
    if control_url and not over:
        lines.append(f"  control API {control_url}; job view {control_url.rstrip('/')}/jobs/{s.get('job_id')}/view")
    if s.get("stale"):
        lines.append(f"  STALE: {s['stale']}")
    if s.get("note"):
        lines.append(f"  note: {s['note']}")
    return "\n".join(lines)


@click.command(name="list")
@click.option("--storage", required=True, callback=_location,
              help="checkpoint storage root the jobs' masters publish their status documents in")
@_json_output
def list_jobs(storage: str, as_json: bool) -> None:
    """List the jobs under a storage root: each one's state, heartbeat and last checkpoint from its status
    document (the last one its master published).  A job whose document says it runs while no master holds its
    lease (its master died: killed, or its host lost) is listed STALE.  Lists every key under the root once: on
    a large bucket, point --storage at the jobs' own prefix."""
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
            job = {"job_id": job_id, "state": document.state, "heartbeat_ms": document.heartbeat_ms,
                   "last_completed_checkpoint": document.last_completed_checkpoint,
                   "last_completed_ms": document.last_completed_ms,
                   "runtime": document.extra.get("runtime"), "control_url": document.extra.get("control_url")}
            gone = _master_gone(store, job_id, document, now, storage)
            if gone:
                job.update(state="STALE", published_state=document.state, note=gone)
            jobs.append(job)
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
    for job in jobs:
        if job["state"] == "STALE":
            click.echo(f"STALE {job['job_id']}: {job['note']}")


def _master_gone(store: Any, job_id: str, document: Any, now_ms: int, storage: str) -> str | None:
    """Why the master of a job whose status document says it runs is gone (None: it is not known to be).

    A running master renews the job's lease (checkpoints.lease) every heartbeat; one that died stops, and its
    lease expires after its ttl.  A document without a lease (a master without one: none was ever taken under
    this root) is judged by its heartbeat against the default lease ttl."""
    from checkpoints.lease import DEFAULT_TTL_MS, read_lease
    from engine.master.client import ENDED_STATES

    if document.state in ENDED_STATES:
        return None
    try:
        view = read_lease(store, job_id)
    except Exception:  # noqa: BLE001 - an unreadable lease proves nothing either way
        return None
    state = document.state
    if view is not None:
        lease = view.lease
        if lease.is_live(now_ms):
            return None
        who = f"pid {lease.pid} on {lease.host or '?'}"
        how = f"released its lease ({who})" if lease.released else \
            f"stopped renewing its lease {_age(now_ms - lease.renewed_ms)} ago (ttl {lease.ttl_ms / 1000:g} s; {who})"
        return (f"its master {how}, while its last status document "
                f"says {state}. Restore the job from its newest retained checkpoint (`sluice "
                f"checkpoints list {shlex.quote(job_id)} --storage {shlex.quote(storage)}`), or let supervision "
                f"restore it")
    if now_ms - document.heartbeat_ms <= DEFAULT_TTL_MS:
        return None
    return (f"its master stopped publishing: heartbeat {_age(now_ms - document.heartbeat_ms)} ago, older than "
            f"a lease's ttl ({DEFAULT_TTL_MS / 1000:g} s), while it says {state}; it holds no lease")


@click.command()
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


@click.command()
@click.argument("job_id", required=False)
@_with_locate_options
@click.option("--savepoint-dir", "target", default=None, callback=_location,
              help="savepoint directory (default: the job's --savepoint-dir)")
@deprecated_alias("--target", "target", "--savepoint-dir", default=None, callback=_location)
@click.option("--trigger-id", default=None, help="idempotency key: retrying with it never takes a second savepoint")
@click.option("--dispose", metavar="SAVEPOINT", default=None, callback=_location,
              help="instead of taking one, delete this savepoint's folder (local or s3://, as savepoint or stop "
                   "printed it); refused, deleting nothing, unless its _metadata says it is a savepoint")
def savepoint(job_id: str | None, url: str | None, storage: str | None, token: str | None,
              control_hosts: str | None, target: str | None, trigger_id: str | None, dispose: str | None) -> None:
    """Take a savepoint of running job JOB_ID and print its location; or, with --dispose, delete one."""
    if dispose is not None:
        if job_id is not None:
            raise click.UsageError("--dispose deletes the savepoint it names and takes no JOB_ID")
        from checkpoints.errors import NotASavepoint
        from checkpoints.savepoints import dispose_savepoint

        try:
            deleted = dispose_savepoint(dispose)
        except NotASavepoint as exc:
            raise click.ClickException(str(exc)) from None
        click.echo(f"disposed of savepoint {dispose} ({deleted} objects deleted)")
        return
    if job_id is None:
        raise click.UsageError("Missing argument 'JOB_ID' (or --dispose SAVEPOINT to delete a savepoint).")
    client = _client(job_id, url, storage, token, control_hosts)
    _wait_for(client, "savepoint", client.trigger_savepoint(target, trigger_id))


@click.command()
@_with_locate
@click.option("--savepoint/--no-savepoint", "with_savepoint", default=True, show_default=True,
              help="take a savepoint as the job stops (--no-savepoint: cancel it)")
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


@click.command()
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
@click.option("--savepoint-dir", "savepoint_root", default=None, callback=_location,
              help="savepoint root (the job's --savepoint-dir; default: --storage, where a job run without one "
                   "puts its savepoints)")
@click.option("--url", default=None, help="job master control URL (default: the one its status document names)")
@click.option("--token", envvar="SLUICE_CONTROL_TOKEN", show_envvar=True, default=None,
              help="bearer token for the job master's control API")
@click.option("--control-hosts", envvar="SLUICE_CONTROL_HOSTS", default=None,
              help="comma-separated hosts besides loopback the token may be sent to (see sluice status)")
@_json_output
def history_command(job_id: str, storage: str, savepoint_root: str | None, url: str | None, token: str | None,
                    control_hosts: str | None, as_json: bool) -> None:
    """The checkpoint history of JOB_ID: the retained checkpoints in --storage, the savepoints in --savepoint-dir
    (default: --storage) and, when its job master answers, the master's history (GET /jobs/<id>/checkpoints:
    every completed checkpoint and savepoint it keeps, beyond the retained ones) with its completed and failed
    counts.  Without a master, the retained checkpoints and the savepoints alone."""
    from checkpoints.backends import open_store
    from checkpoints.inspect import list_checkpoints
    from engine.master.client import ControlApiError, ControlApiUnavailable, UntrustedControlUrl

    listed = list_checkpoints(open_store(storage), job_id, open_store(savepoint_root or storage))
    retained, savepoints = listed["checkpoints"], listed["savepoints"]
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
    except ControlApiError as exc:  # no master runs, none ever published a control URL, or it wants a token
        refused = _needs_token(exc)
        if not (isinstance(exc, ControlApiUnavailable) or refused):
            raise
        master["why"] = refused or str(exc)
    if as_json:
        click.echo(json.dumps({"job_id": job_id, "storage": storage, "retained": retained,
                               "savepoints": savepoints, "master": master}, indent=2))
        return
    import time

    now = int(time.time() * 1000)
    click.echo(f"job {job_id}: {len(retained)} retained checkpoint(s) in {storage}")
    for c in retained:
        click.echo(f"  chk-{c['checkpoint_id']:<6} {_when(c['completed_ms'], now)}  {c['total_bytes']:>10} B  "
                   f"{c['uri']}{'  (latest)' if c['latest'] else ''}")
    for p in savepoints:
        click.echo(f"  savepoint {p['checkpoint_id']:<4} {_when(p['completed_ms'], now)}  "
                   f"{p['total_bytes'] if p['total_bytes'] is not None else '-':>10} B  {p['uri']}"
                   + (f"  ({p['problem']})" if p.get("problem") else ""))
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
