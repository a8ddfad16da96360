"""SluiceHook: one Airflow connection gives the job master's control API and the job's storage.

The hook owns connection and protocol (STYLE section 8), as ``S3Hook`` owns its
conn id: operators, sensors, triggers and the UI view take a conn id and ask the
hook; none of them builds URLs, reads tokens or opens stores itself.

Connection fields (any conn type; ``generic`` or ``http`` are fine):

==============  ===============================================================
host/port       control API (``schema`` http/https); optional, see below
password        bearer token of the control API (``--token`` of the master)
extra           ``storage_uri`` (checkpoint root, ``s3://bucket/prefix`` or
                ``file:///path``), ``savepoint_dir`` (savepoint root),
                ``aws_conn_id`` (an Airflow AWS connection: region, endpoint,
                credentials for boto3), ``data_docs_dir`` (where Great
                Expectations writes Data Docs), ``control_url`` (overrides host/port),
                ``job_id`` (default job for calls that omit it)
==============  ===============================================================

A master started with ``--port 0`` listens on a random port, so when the
connection names no control URL the hook reads it from the job's status
document (``extra.control_url``), which the master publishes to storage.  When
the control API does not answer, :meth:`SluiceHook.get_status` falls back to
that status document (ARCHITECTURE section 7: "supervision works from storage
alone").
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import httpx

from airflow.sdk import BaseHook

#: the shortest orphan grace period while the job runs (see SluiceHook.clean_orphans)
LIVE_MIN_GRACE_MS = 10 * 60 * 1000

#: checkpoint history entries with one of these statuses count as failed checkpoints
FAILED_CHECKPOINT_STATES = frozenset({"FAILED", "DECLINED", "EXPIRED", "ABORTED"})


class SluiceError(Exception):
    """Base of the plugin's errors; messages say what happened, to which job, and what to do."""


class ControlApiUnavailable(SluiceError):
    """The job master's control API could not be reached (no URL known, connection refused, timeout)."""


class ControlApiError(SluiceError):
    """The control API answered with an error status."""

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        self.status_code = status_code


class SnapshotValidationFailed(SluiceError):
    """A snapshot failed validation: restoring from it is refused."""


class NoRestorePoint(SluiceError):
    """Neither a loadable retained checkpoint nor a validated savepoint exists for the job."""


@dataclass(frozen=True, slots=True)
class JobStatus:
    """What supervision needs to know about a job, from the control API or, failing that, from storage.

    ``source`` says where it came from: ``"control-api"`` (the master answered),
    ``"status-document"`` (only storage did) or ``"none"`` (the job never ran).
    """

    job_id: str
    source: str
    state: str | None = None
    heartbeat_ms: int | None = None
    last_completed_checkpoint: int | None = None
    last_completed_ms: int | None = None
    failed_checkpoints: int = 0
    lag_ms: int | None = None
    watermark_ms: int | None = None
    records_per_second: float | None = None
    control_url: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def heartbeat_age_ms(self, now_ms: int) -> int | None:
        return None if self.heartbeat_ms is None else max(0, now_ms - self.heartbeat_ms)

    def checkpoint_age_ms(self, now_ms: int) -> int | None:
        return None if self.last_completed_ms is None else max(0, now_ms - self.last_completed_ms)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True, slots=True)
class RestorePoint:
    """A snapshot a job can be started from: a retained checkpoint or a validated savepoint."""

    uri: str
    kind: str  # "checkpoint" | "savepoint"
    checkpoint_id: int
    skipped: tuple[str, ...] = ()  # newer snapshots passed over, and why

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def now_ms() -> int:
    return int(time.time() * 1000)


class SluiceHook(BaseHook):
    """Control API (httpx) and checkpoint storage (the ``checkpoints`` package) of Sluice jobs.

    :param sluice_conn_id: the Airflow connection described in the module docstring.
    :param timeout_s: per-request timeout of control API calls; a master that does not
        answer within it counts as unreachable, and status falls back to storage.
    """

    conn_name_attr = "sluice_conn_id"
    default_conn_name = "sluice_default"
    conn_type = "sluice"
    hook_name = "Sluice job"

    def __init__(self, sluice_conn_id: str = default_conn_name, *, timeout_s: float = 10.0) -> None:
        super().__init__()
        self.sluice_conn_id = sluice_conn_id
        self.timeout_s = timeout_s

    # -- connection ------------------------------------------------------------------------------

    @cached_property
    def connection(self) -> Any:
        return self.get_connection(self.sluice_conn_id)

    @cached_property
    def extra(self) -> dict[str, Any]:
        return dict(self.connection.extra_dejson or {})

    @property
    def token(self) -> str | None:
        return self.connection.password or None

    @property
    def storage_uri(self) -> str:
        uri = self.extra.get("storage_uri")
        if not uri:
            raise SluiceError(f"connection {self.sluice_conn_id!r} has no extra 'storage_uri' (checkpoint root, "
                              "e.g. s3://bucket/checkpoints); add it to the connection's extra")
        return str(uri)

    @property
    def savepoint_dir(self) -> str | None:
        return self.extra.get("savepoint_dir") or None

    def job_id(self, job_id: str | None = None) -> str:
        resolved = job_id or self.extra.get("job_id")
        if not resolved:
            raise SluiceError(f"no job id given and connection {self.sluice_conn_id!r} has no extra 'job_id'")
        return str(resolved)

    def configured_control_url(self) -> str | None:
        """The control URL the connection names (extra ``control_url``, or schema://host:port), if any."""
        if self.extra.get("control_url"):
            return str(self.extra["control_url"]).rstrip("/")
        conn = self.connection
        if conn.host:
            scheme = conn.schema or "http"
            host = conn.host if "://" not in conn.host else conn.host.split("://", 1)[1]
            return f"{scheme}://{host}:{conn.port}" if conn.port else f"{scheme}://{host}"
        return None

    # -- storage ---------------------------------------------------------------------------------

    @cached_property
    def _aws(self) -> dict[str, Any]:
        """Region, endpoint and frozen credentials from the Airflow AWS connection named in ``aws_conn_id``."""
        aws_conn_id = self.extra.get("aws_conn_id")
        if not aws_conn_id:
            return {}
        from airflow.providers.amazon.aws.hooks.base_aws import AwsGenericHook

        aws = AwsGenericHook(aws_conn_id=aws_conn_id, client_type="s3")
        creds = aws.get_credentials()
        return {
            "region": aws.region_name,
            "endpoint_url": aws.conn_config.get_service_endpoint_url("s3"),
            "access_key": creds.access_key,
            "secret_key": creds.secret_key,
            "token": creds.token,
        }

    def _store_options(self, uri: str) -> dict[str, Any]:
        if not uri.startswith(("s3://", "s3a://")) or not self._aws:
            return {}
        aws = self._aws
        client_options = {"aws_access_key_id": aws["access_key"], "aws_secret_access_key": aws["secret_key"]}
        if aws["token"]:
            client_options["aws_session_token"] = aws["token"]
        options: dict[str, Any] = {"client_options": client_options}
        if aws["region"]:
            options["region"] = aws["region"]
        if aws["endpoint_url"]:
            options["endpoint_url"] = aws["endpoint_url"]
        return options

    def open_store(self, uri: str) -> Any:
        from checkpoints.backends import open_store

        return open_store(uri, **self._store_options(uri))

    @cached_property
    def store(self) -> Any:
        return self.open_store(self.storage_uri)

    @cached_property
    def savepoint_store(self) -> Any:
        return self.open_store(self.savepoint_dir) if self.savepoint_dir else None

    def process_environment(self) -> dict[str, str]:
        """Environment variables that give a job process started by Airflow the same S3 access.

        The job's boto3 clients use the standard credential chain, and botocore reads
        ``AWS_ENDPOINT_URL_S3`` for the endpoint, so nothing secret lands on a command line."""
        if not self._aws:
            return {}
        env = {"AWS_ACCESS_KEY_ID": self._aws["access_key"], "AWS_SECRET_ACCESS_KEY": self._aws["secret_key"]}
        if self._aws["token"]:
            env["AWS_SESSION_TOKEN"] = self._aws["token"]
        if self._aws["region"]:
            env["AWS_DEFAULT_REGION"] = self._aws["region"]
        if self._aws["endpoint_url"]:
            env["AWS_ENDPOINT_URL_S3"] = self._aws["endpoint_url"]
        return env

    def read_status_document(self, job_id: str | None = None) -> Any:
        """The job's last published :class:`checkpoints.status.StatusDocument`, or None."""
        from checkpoints.status import read_status

        return read_status(self.store, self.job_id(job_id))

    # -- control API -----------------------------------------------------------------------------

    def control_url(self, job_id: str | None = None) -> str | None:
        url = self.configured_control_url()
        if url:
            return url
        doc = self.read_status_document(job_id)
        return (doc.extra or {}).get("control_url") if doc is not None else None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def request(self, method: str, path: str, *, job_id: str | None = None, url: str | None = None,
                **kwargs: Any) -> Any:
        """One control API call; returns the decoded JSON body (None when it has none)."""
        base = url or self.control_url(job_id)
        if not base:
            raise ControlApiUnavailable(f"job {self.job_id(job_id)!r}: no control URL (the connection names none and "
                                        "the job published no status document with one); is the job running?")
        try:
            response = httpx.request(method, base.rstrip("/") + path, headers=self.headers(),
                                     timeout=self.timeout_s, **kwargs)
        except httpx.TransportError as exc:
            raise ControlApiUnavailable(f"control API {base} unreachable ({type(exc).__name__}: {exc})") from exc
        if response.status_code >= 400:
            raise ControlApiError(f"{method} {base}{path} answered {response.status_code}: {response.text[:500]}",
                                  response.status_code)
        return response.json() if response.content else None

    def get_status(self, job_id: str | None = None) -> JobStatus:
        """The job's status from the control API, or from its status document when the master is unreachable."""
        job = self.job_id(job_id)
        doc = self.read_status_document(job)
        url = self.configured_control_url() or ((doc.extra or {}).get("control_url") if doc else None)
        api: dict[str, Any] | None = None
        failed = 0
        if url:
            try:
                api = self.request("GET", f"/jobs/{job}", job_id=job, url=url)
                history = (self.request("GET", f"/jobs/{job}/checkpoints", job_id=job, url=url) or {}).get("history", [])
                failed = sum(1 for h in history if str(h.get("status", "")).upper() in FAILED_CHECKPOINT_STATES)
            except (ControlApiUnavailable, ControlApiError) as exc:
                self.log.info("job %s: control API not usable (%s); using the status document", job, exc)
                api = None
        if api is not None:
            base = _status_fields(doc)
            base.update({k: v for k, v in api.items() if v is not None})
            failed = max(failed, int(api.get("failed_checkpoints", 0) or 0))
            return JobStatus(
                job_id=job, source="control-api", state=base.get("state"), heartbeat_ms=now_ms(),
                last_completed_checkpoint=base.get("last_completed_checkpoint"),
                last_completed_ms=base.get("last_completed_ms"), failed_checkpoints=failed,
                lag_ms=base.get("lag_ms"), watermark_ms=base.get("watermark_ms"),
                records_per_second=base.get("records_per_second"), control_url=url, details=base,
            )
        if doc is None:
            return JobStatus(job_id=job, source="none")
        fields = _status_fields(doc)
        failed_from_doc = sum(1 for f in doc.failures if "checkpoint" in str(f.get("kind", "")).lower())
        return JobStatus(
            job_id=job, source="status-document", state=doc.state, heartbeat_ms=doc.heartbeat_ms,
            last_completed_checkpoint=doc.last_completed_checkpoint, last_completed_ms=doc.last_completed_ms,
            failed_checkpoints=failed_from_doc, lag_ms=doc.lag_ms, watermark_ms=doc.watermark_ms,
            records_per_second=doc.records_per_second, control_url=url, details=fields,
        )

    def checkpoint_history(self, job_id: str | None = None) -> list[dict[str, Any]]:
        job = self.job_id(job_id)
        return list((self.request("GET", f"/jobs/{job}/checkpoints", job_id=job) or {}).get("history", []))

    def trigger_savepoint(self, trigger_id: str, *, job_id: str | None = None,
                          target_directory: str | None = None) -> str:
        """Ask for a savepoint; the same ``trigger_id`` re-attaches to the same savepoint (idempotent)."""
        job = self.job_id(job_id)
        body = {"target_directory": target_directory or self.savepoint_dir, "trigger_id": trigger_id}
        return str(self.request("POST", f"/jobs/{job}/savepoints", job_id=job, json=body)["request-id"])

    def stop_with_savepoint(self, trigger_id: str, *, job_id: str | None = None,
                            target_directory: str | None = None, drain: bool = False) -> str:
        job = self.job_id(job_id)
        body = {"target_directory": target_directory or self.savepoint_dir, "drain": drain, "trigger_id": trigger_id}
        return str(self.request("POST", f"/jobs/{job}/stop", job_id=job, json=body)["request-id"])

    def operation_status(self, kind: str, trigger_id: str, *, job_id: str | None = None) -> dict[str, Any]:
        """``{"status": {"id": IN_PROGRESS|COMPLETED|FAILED}, "operation": {...}}`` of a savepoint or stop."""
        if kind not in ("savepoints", "stop"):
            raise SluiceError(f"operation kind must be 'savepoints' or 'stop', got {kind!r}")
        job = self.job_id(job_id)
        return self.request("GET", f"/jobs/{job}/{kind}/{trigger_id}", job_id=job)

    def wait_for_operation(self, kind: str, trigger_id: str, *, job_id: str | None = None,
                           timeout_s: float = 600, poll_interval_s: float = 1.0) -> str:
        """Poll until the operation completes; returns the snapshot location or raises with the failure cause."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.operation_status(kind, trigger_id, job_id=job_id)
            state = result.get("status", {}).get("id")
            if state == "COMPLETED":
                return str(result["operation"]["location"])
            if state == "FAILED":
                raise SluiceError(f"{kind} {trigger_id} of job {self.job_id(job_id)!r} failed: "
                                  f"{result.get('operation', {}).get('failure-cause')}")
            if time.monotonic() > deadline:
                raise SluiceError(f"{kind} {trigger_id} still {state} after {timeout_s}s")
            time.sleep(poll_interval_s)

    def cancel(self, job_id: str | None = None) -> None:
        job = self.job_id(job_id)
        self.request("PATCH", f"/jobs/{job}", job_id=job, params={"mode": "cancel"})

    # -- checkpoints and savepoints --------------------------------------------------------------

    def list_checkpoints(self, job_id: str | None = None) -> dict[str, Any]:
        """Retained checkpoints (newest last), status and savepoints as plain data (``checkpoints.inspect``)."""
        from checkpoints.inspect import list_checkpoints

        return list_checkpoints(self.store, self.job_id(job_id), self.savepoint_store)

    def list_savepoints(self, job_id: str | None = None) -> list[Any]:
        from checkpoints.savepoints import list_savepoints

        if self.savepoint_store is None:
            return []
        return list_savepoints(self.savepoint_store, self.job_id(job_id))

    def load_snapshot(self, uri: str, *, job_id: str | None = None, verify_checksums: bool = True) -> Any:
        """Load (and so structurally validate) a snapshot; raises CorruptSnapshotError with the reason."""
        from checkpoints.restore import load_snapshot

        return load_snapshot(uri, expected_job_id=job_id, verify_checksums=verify_checksums,
                             **self._store_options(uri))

    def validate_snapshot(self, uri: str, *, job_id: str | None = None, job_spec: str | None = None,
                          record: bool = True) -> dict[str, Any]:
        """Validate a snapshot's state with Great Expectations and record the outcome in its ``_metadata``.

        Returns ``{"status": "passed"|"failed", ...}`` (never raises for a failed
        validation: callers decide; :class:`SluiceRestoreOperator` refuses).  A
        snapshot that does not even load (the validator checks integrity first:
        missing files, checksums, key-group coverage) fails with the reason.
        """
        self.log.info("validating %s (job %s) with Great Expectations", uri, job_id or "-")
        validator = _ge_validator()
        if validator is None:
            raise SluiceError("checkpoints.validation (Great Expectations) is not available in this environment; "
                              "install it before validating snapshots")
        try:
            result = validator(uri, **self._validator_options(uri, record, job_spec))
        except Exception as exc:  # an integrity failure found by the validator refuses the snapshot as well
            return {"status": "failed", "stage": "validate", "reason": f"{type(exc).__name__}: {exc}",
                    "validated_ms": now_ms()}
        return _as_outcome(result)

    def _validator_options(self, uri: str, record: bool, job_spec: str | None) -> dict[str, Any]:
        import inspect

        validator = _ge_validator()
        params = inspect.signature(validator).parameters if validator else {}
        options: dict[str, Any] = {}
        store_options = self._store_options(uri)
        if store_options and any(p.kind == p.VAR_KEYWORD for p in params.values()):
            options.update(store_options)  # validate_snapshot(uri, ..., **store_options)
        if "record" in params:
            options["record"] = record
        if "job_spec" in params and job_spec:
            options["job_spec"] = job_spec
        if "data_docs_dir" in params and self.extra.get("data_docs_dir"):
            options["data_docs_dir"] = self.extra["data_docs_dir"]
        return options

    def apply_savepoint_policy(self, *, job_id: str | None = None, max_count: int | None = None,
                               max_age_ms: int | None = None, dry_run: bool = False) -> list[str]:
        """Delete savepoints beyond the history policy; returns the URIs deleted (or that would be)."""
        from checkpoints.retention import SavepointHistoryPolicy
        from checkpoints.savepoints import apply_savepoint_policy

        if self.savepoint_store is None:
            raise SluiceError(f"connection {self.sluice_conn_id!r} has no extra 'savepoint_dir'")
        doomed = apply_savepoint_policy(self.savepoint_store, self.job_id(job_id),
                                        SavepointHistoryPolicy(max_count=max_count, max_age_ms=max_age_ms),
                                        dry_run=dry_run)
        return [s.uri for s in doomed]

    def clean_orphans(self, *, job_id: str | None = None, grace_period_ms: int = 60 * 60 * 1000,
                      dry_run: bool = True, live_min_grace_ms: int = LIVE_MIN_GRACE_MS) -> dict[str, Any]:
        """Find (and unless ``dry_run``, delete) files no retained checkpoint owns, older than the grace period.

        While a master is live, the grace period is at least ``live_min_grace_ms``: a
        checkpoint that just completed is in storage before its handle is in the
        index, and a shorter grace period would delete it (seen in the tests: the
        index then named a checkpoint whose ``_metadata`` was gone)."""
        from checkpoints.orphans import clean_orphans

        job = self.job_id(job_id)
        live = self.get_status(job).source == "control-api"
        if grace_period_ms < live_min_grace_ms and live:
            self.log.warning("job %s is running: grace period raised from %d to %d ms", job, grace_period_ms,
                             live_min_grace_ms)
            grace_period_ms = live_min_grace_ms
        # with no live master nothing can add a newer checkpoint to the index, so folders above it are
        # orphans too (checkpoints.orphans leaves them alone while the job may run)
        report = clean_orphans(self.store, job, grace_period_ms=grace_period_ms, dry_run=dry_run,
                               savepoint_store=self.savepoint_store, job_stopped=not live)
        return {"deleted": report.deleted, "total_bytes": report.total_bytes, "notes": list(report.notes),
                "orphans": [{"key": o.key, "reason": o.reason, "bytes": o.bytes} for o in report.orphans]}

    def retention_audit(self, *, job_id: str | None = None, expected_retained: int) -> dict[str, Any]:
        """Check that exactly ``expected_retained`` handles are retained, each loads, and nothing dangles.

        Returns ``{"ok": bool, "problems": [...], "retained": [...]}``; fewer handles than
        expected is only a problem once the job completed that many checkpoints."""
        from checkpoints.index import read_index

        job = self.job_id(job_id)
        index = read_index(self.store, job).index
        problems: list[str] = []
        ids = index.ids()
        if len(ids) > expected_retained or (len(ids) < expected_retained and index.max_checkpoint_id >= expected_retained):
            problems.append(f"{len(ids)} retained handles {ids}, expected {expected_retained}")
        for handle in index.checkpoints:
            uri = self.store.key_uri(handle.metadata_key.rsplit("/", 1)[0])
            try:
                self.load_snapshot(uri, job_id=job, verify_checksums=False)
            except Exception as exc:  # every unreadable handle is reported, not just the first
                if handle.checkpoint_id in read_index(self.store, job).index.ids():  # not merely subsumed meanwhile
                    problems.append(f"retained checkpoint {handle.checkpoint_id} does not load: {exc}")
        orphans = self.clean_orphans(job_id=job, dry_run=True)
        if orphans["orphans"]:
            problems.append(f"{len(orphans['orphans'])} dangling file(s), {orphans['total_bytes']} bytes "
                            f"(older than the grace period)")
        return {"ok": not problems, "problems": problems, "retained": ids, "orphans": orphans["orphans"]}

    def restore_point(self, job_id: str | None = None) -> RestorePoint:
        """The newest retained checkpoint that loads, else the newest savepoint whose validation passed.

        A corrupt latest checkpoint is skipped (and named in ``skipped``): restoring from
        it would fail or, worse, restore wrong state."""
        from checkpoints.index import read_index

        job = self.job_id(job_id)
        skipped: list[str] = []
        for handle in reversed(read_index(self.store, job).index.checkpoints):
            uri = self.store.key_uri(handle.metadata_key.rsplit("/", 1)[0])
            try:
                self.load_snapshot(uri, job_id=job)
                return RestorePoint(uri, "checkpoint", handle.checkpoint_id, tuple(skipped))
            except Exception as exc:  # a corrupt checkpoint is passed over, with its reason
                skipped.append(f"{uri}: {exc}")
        for savepoint in reversed(self.list_savepoints(job)):
            if savepoint.metadata is None or not savepoint.metadata.validation_passed():
                skipped.append(f"{savepoint.uri}: validation not passed")
                continue
            try:
                self.load_snapshot(savepoint.uri, job_id=job)
                return RestorePoint(savepoint.uri, "savepoint", savepoint.checkpoint_id, tuple(skipped))
            except Exception as exc:  # likewise
                skipped.append(f"{savepoint.uri}: {exc}")
        raise NoRestorePoint(f"job {job!r} has no loadable retained checkpoint and no validated savepoint; "
                             f"passed over: {skipped or 'nothing'}. See docs/runbooks/recover-corrupt-checkpoint.md")


def _status_fields(doc: Any) -> dict[str, Any]:
    if doc is None:
        return {}
    return {"state": doc.state, "heartbeat_ms": doc.heartbeat_ms, "epoch": doc.epoch,
            "last_completed_checkpoint": doc.last_completed_checkpoint, "last_completed_ms": doc.last_completed_ms,
            "watermark_ms": doc.watermark_ms, "lag_ms": doc.lag_ms, "records_per_second": doc.records_per_second,
            "failures": list(doc.failures), "extra": dict(doc.extra)}


def _ge_validator() -> Any:
    """The Great Expectations snapshot validator of ``checkpoints.validation``, or None when not installed."""
    try:
        from checkpoints import validation
    except ImportError:
        return None
    return getattr(validation, "validate_snapshot", None)


def _as_outcome(result: Any) -> dict[str, Any]:
    """The validator's result as a plain ``{"status": "passed"|"failed", ...}`` dict."""
    if isinstance(result, dict):
        outcome = dict(result)
    elif hasattr(result, "to_dict"):
        outcome = dict(result.to_dict())
    elif dataclasses.is_dataclass(result):
        outcome = dataclasses.asdict(result)
    else:
        outcome = {"status": "passed" if getattr(result, "success", False) else "failed", "result": str(result)}
    if "status" not in outcome and "success" in outcome:
        outcome["status"] = "passed" if outcome["success"] else "failed"
    return outcome
