"""SluiceHook: one Airflow connection gives the job master's control API and the job's storage.

The hook owns connection and protocol (STYLE section 8), as ``S3Hook`` owns its
conn id: operators, sensors, triggers and the UI view take a conn id and ask the
hook; none of them builds URLs, reads tokens or opens stores itself.

Connection fields (conn type ``sluice``, registered with its form by
:mod:`sluice.provider_info`; ``generic`` works too):

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
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from checkpoints.backends import open_store
from checkpoints.desired_state import read_desired_state
from checkpoints.drained import drained_reason
from checkpoints.index import read_index
from checkpoints.inspect import list_checkpoints
from checkpoints.orphans import clean_orphans
from checkpoints.restore import load_snapshot
from checkpoints.restore_points import RestoreCandidate, RestoreChoice, choose_restore_point
from checkpoints.retention import SavepointHistoryPolicy
from checkpoints.savepoints import apply_savepoint_policy, list_savepoints
from checkpoints.status import read_status
from engine.master.client import (
    ControlApiError,
    ControlApiUnavailable,
    ControlClient,
    OperationKind,
    UntrustedControlUrl,
    published_control_url,
    trusted_control_url,
)
from sluice.exceptions import SluiceAirflowError

#: the shortest orphan grace period while the job runs (see SluiceHook.clean_orphans)
LIVE_MIN_GRACE_MS = 10 * 60 * 1000

#: checkpoint history entries with one of these statuses count as failed checkpoints
FAILED_CHECKPOINT_STATES = frozenset({"FAILED", "DECLINED", "EXPIRED", "ABORTED"})


@dataclass(frozen=True, slots=True)
class SupervisedJobStatus:
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
        """The connection's extra; fields saved by the connection form may carry ``extra__sluice__`` prefixes."""
        extra = dict(self.connection.extra_dejson or {})
        prefix = f"extra__{self.conn_type}__"
        for key in [k for k in extra if k.startswith(prefix)]:
            extra.setdefault(key[len(prefix):], extra.pop(key))
        return {k: v for k, v in extra.items() if v not in (None, "")}

    @property
    def token(self) -> str | None:
        return self.connection.password or None

    @property
    def storage_uri(self) -> str:
        uri = self.extra.get("storage_uri")
        if not uri:
            raise SluiceAirflowError(f"connection {self.sluice_conn_id!r} has no extra 'storage_uri' (checkpoint "
                                     "root, e.g. s3://bucket/checkpoints); add it to the connection's extra")
        return str(uri)

    @property
    def savepoint_dir(self) -> str | None:
        return self.extra.get("savepoint_dir") or None

    def job_id(self, job_id: str | None = None) -> str:
        resolved = job_id or self.extra.get("job_id")
        if not resolved:
            raise SluiceAirflowError(f"no job id given and connection {self.sluice_conn_id!r} has no extra "
                                     "'job_id'")
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
        return read_status(self.store, self.job_id(job_id))

    # -- control API -----------------------------------------------------------------------------

    @property
    def control_hosts(self) -> list[str]:
        """Hosts besides loopback the token may be sent to when the control URL comes from storage
        (extra ``control_hosts``: a list, or comma-separated; names, ``.domain`` suffixes, CIDR networks)."""
        raw = self.extra.get("control_hosts") or []
        return [h.strip() for h in (raw.split(",") if isinstance(raw, str) else raw) if str(h).strip()]

    def _url_from_storage(self, url: str) -> str:
        """A control URL read from the status document, if the token may go there (UntrustedControlUrl if not)."""
        if not self.token:
            return url
        return trusted_control_url(url, self.control_hosts, source=f"the status document in {self.storage_uri}")

    def control_url(self, job_id: str | None = None) -> str | None:
        url = self.configured_control_url()
        if url:
            return url
        doc = self.read_status_document(job_id)
        published = published_control_url(self.store, self.job_id(job_id), doc) if doc is not None else None
        return self._url_from_storage(published) if published else None

    def client(self, job_id: str | None = None, *, url: str | None = None) -> ControlClient:
        """The engine's control-API client for the job (the one the CLI and the triggers use too)."""
        job = self.job_id(job_id)
        base = url or self.control_url(job)
        if not base:
            raise ControlApiUnavailable(f"job {job!r}: no control URL (the connection names none and the job "
                                        "published no status document with one); is the job running?")
        return ControlClient(base, job, self.token, timeout_s=self.timeout_s)

    def get_status(self, job_id: str | None = None) -> SupervisedJobStatus:
        """The job's status from the control API, or from its status document when the master is unreachable."""
        job = self.job_id(job_id)
        doc = self.read_status_document(job)
        url = self.configured_control_url()
        published = published_control_url(self.store, job, doc) if doc is not None else None
        if url is None and published:
            try:
                url = self._url_from_storage(published)
            except UntrustedControlUrl as exc:
                self.log.warning("job %s: %s; using the status document only", job, exc)
        api: dict[str, Any] | None = None
        failed = 0
        if url:
            try:
                with self.client(job, url=url) as client:
                    api = client.status()
                    history = client.checkpoints()
                failed = sum(1 for h in history if str(h.get("status", "")).upper() in FAILED_CHECKPOINT_STATES)
            except ControlApiError as exc:
                self.log.info("job %s: control API not usable (%s); using the status document", job, exc)
                api = None
        if api is not None:
            base = _status_fields(doc)
            base.update({k: v for k, v in api.items() if v is not None})
            failed = max(failed, int(api.get("failed_checkpoints", 0) or 0))
            return SupervisedJobStatus(
                job_id=job, source="control-api", state=base.get("state"), heartbeat_ms=now_ms(),
                last_completed_checkpoint=base.get("last_completed_checkpoint"),
                last_completed_ms=base.get("last_completed_ms"), failed_checkpoints=failed,
                lag_ms=base.get("lag_ms"), watermark_ms=base.get("watermark_ms"),
                records_per_second=base.get("records_per_second"), control_url=url, details=base,
            )
        if doc is None:
            return SupervisedJobStatus(job_id=job, source="none")
        fields = _status_fields(doc)
        failed_from_doc = sum(1 for f in doc.failures if "checkpoint" in str(f.get("kind", "")).lower())
        return SupervisedJobStatus(
            job_id=job, source="status-document", state=doc.state, heartbeat_ms=doc.heartbeat_ms,
            last_completed_checkpoint=doc.last_completed_checkpoint, last_completed_ms=doc.last_completed_ms,
            failed_checkpoints=failed_from_doc, lag_ms=doc.lag_ms, watermark_ms=doc.watermark_ms,
            records_per_second=doc.records_per_second, control_url=url, details=fields,
        )

    def checkpoint_history(self, job_id: str | None = None) -> list[dict[str, Any]]:
        with self.client(job_id) as client:
            return client.checkpoints()

    def trigger_savepoint(self, trigger_id: str, *, job_id: str | None = None,
                          target_directory: str | None = None) -> str:
        """Ask for a savepoint; the same ``trigger_id`` re-attaches to the same savepoint (idempotent)."""
        with self.client(job_id) as client:
            return client.trigger_savepoint(target_directory or self.savepoint_dir, trigger_id)

    def stop_with_savepoint(self, trigger_id: str, *, job_id: str | None = None,
                            target_directory: str | None = None, drain: bool = False) -> str:
        with self.client(job_id) as client:
            return client.stop(target_directory or self.savepoint_dir, drain, trigger_id)

    def wait_for_operation(self, kind: OperationKind, trigger_id: str, *, job_id: str | None = None,
                           timeout_s: float = 600, poll_interval_s: float = 1.0) -> str:
        """Poll until the operation completes; returns the snapshot location or raises with the failure cause."""
        with self.client(job_id) as client:
            result = client.wait(kind, trigger_id, timeout_s=timeout_s, poll_s=poll_interval_s)
        if result["status"]["id"] != "COMPLETED":
            raise SluiceAirflowError(f"{kind} {trigger_id} of job {self.job_id(job_id)!r} failed: "
                                     f"{result.get('operation', {}).get('failure-cause')}")
        return str(result["operation"]["location"])

    def cancel(self, job_id: str | None = None) -> None:
        with self.client(job_id) as client:
            client.cancel()

    # -- desired state ---------------------------------------------------------------------------

    def desired_state(self, job_id: str | None = None) -> Any:
        """What the operators last asked for (:class:`checkpoints.desired_state.DesiredState`), or None."""
        return read_desired_state(self.store, self.job_id(job_id))

    # -- checkpoints and savepoints --------------------------------------------------------------

    def list_checkpoints(self, job_id: str | None = None) -> dict[str, Any]:
        """Retained checkpoints (newest last), status and savepoints as plain data (``checkpoints.inspect``)."""
        return list_checkpoints(self.store, self.job_id(job_id), self.savepoint_store)

    def list_savepoints(self, job_id: str | None = None) -> list[Any]:
        if self.savepoint_store is None:
            return []
        return list_savepoints(self.savepoint_store, self.job_id(job_id))

    def load_snapshot(self, uri: str, *, job_id: str | None = None, verify_checksums: bool = True) -> Any:
        """Load (and so structurally validate) a snapshot; raises CorruptSnapshotError with the reason."""
        return load_snapshot(uri, expected_job_id=job_id, verify_checksums=verify_checksums,
                             **self._store_options(uri))

    def validate_snapshot(self, uri: str, *, job_id: str | None = None, job_spec: str | None = None,
                          record: bool = True, allow_drained: bool = False) -> dict[str, Any]:
        """Validate a snapshot's state with Great Expectations and record the outcome in its ``_metadata``.

        Returns ``{"status": "passed"|"failed", ...}`` (never raises for a failed
        validation: callers decide; :class:`SluiceRestoreOperator` refuses).  A
        snapshot that does not even load (the validator checks integrity first:
        missing files, checksums, key-group coverage) fails with the reason.
        """
        # Great Expectations logs at INFO from its first import on (~200 lines registering functions) and
        # every step after: keep it out of the task log, whose one line about validation is the summary
        logging.getLogger("great_expectations").setLevel(logging.WARNING)
        # imported here, not with the others: it loads Great Expectations (seconds), which DAG parsing must not pay
        from checkpoints.validation import validate_snapshot

        options: dict[str, Any] = {"record": record, "allow_drained": allow_drained, **self._store_options(uri)}
        if job_spec:
            options["job_spec"] = job_spec
        if self.extra.get("data_docs_dir"):
            options["data_docs_dir"] = self.extra["data_docs_dir"]
        try:
            report = validate_snapshot(uri, **options)
        except Exception as exc:  # an integrity failure found by the validator refuses the snapshot as well
            return {"status": "failed", "stage": "validate", "reason": f"{type(exc).__name__}: {exc}",
                    "validated_ms": now_ms()}
        # with record, its metadata_sha256 is what the master compares before it skips a second
        # validation (sluice run --validated-digest)
        outcome = dict(report.to_dict())
        self.log.info("validation of %s (job %s): %s%s", uri, job_id or "-", outcome.get("status"),
                      f" ({outcome['reason']})" if outcome.get("reason") else "")
        return outcome

    def apply_savepoint_policy(self, *, job_id: str | None = None, max_count: int | None = None,
                               max_age_ms: int | None = None, dry_run: bool = False) -> list[str]:
        """Delete savepoints beyond the history policy; returns the URIs deleted (or that would be)."""
        if self.savepoint_store is None:
            raise SluiceAirflowError(f"connection {self.sluice_conn_id!r} has no extra 'savepoint_dir'")
        doomed = apply_savepoint_policy(self.savepoint_store, self.job_id(job_id),
                                        SavepointHistoryPolicy(max_count=max_count, max_age_ms=max_age_ms),
                                        dry_run=dry_run)
        return [s.uri for s in doomed]

    def clean_orphans(self, *, job_id: str | None = None, grace_period_ms: int = 60 * 60 * 1000,
                      dry_run: bool = True, live_min_grace_ms: int = LIVE_MIN_GRACE_MS,
                      outputs: Sequence[str] = ()) -> dict[str, Any]:
        """Find (and unless ``dry_run``, delete) files no retained checkpoint owns, older than the grace period.

        While a master is live, the grace period is at least ``live_min_grace_ms``: a
        checkpoint that just completed is in storage before its handle is in the
        index, and a shorter grace period would delete it (seen in the tests: the
        index then named a checkpoint whose ``_metadata`` was gone).

        ``outputs``: the job's output folders (local or s3://, opened with this connection's AWS
        options); their staged sink parts that no retained checkpoint or savepoint names and
        whose transaction is older than the grace period are orphans too.  Savepoints are read
        from ``savepoint_dir``, else from the checkpoint storage, where a master started without
        ``--savepoint-dir`` puts them."""
        job = self.job_id(job_id)
        live = self.get_status(job).source == "control-api"
        if grace_period_ms < live_min_grace_ms and live:
            self.log.warning("job %s is running: grace period raised from %d to %d ms", job, grace_period_ms,
                             live_min_grace_ms)
            grace_period_ms = live_min_grace_ms
        # with no live master nothing can add a newer checkpoint to the index, so folders above it are
        # orphans too (checkpoints.orphans leaves them alone while the job may run)
        output_stores = [self.open_store(uri) for uri in outputs if uri]
        savepoint_store = self.savepoint_store or (self.store if output_stores else None)
        report = clean_orphans(self.store, job, grace_period_ms=grace_period_ms, dry_run=dry_run,
                               savepoint_store=savepoint_store, job_stopped=not live, outputs=output_stores)
        return {"deleted": report.deleted, "total_bytes": report.total_bytes, "notes": list(report.notes),
                "orphans": [{"key": o.key, "reason": o.reason, "bytes": o.bytes, "kind": o.kind.value}
                            for o in report.orphans]}

    def retention_audit(self, *, job_id: str | None = None, expected_retained: int) -> dict[str, Any]:
        """Check that exactly ``expected_retained`` handles are retained, each loads, and nothing dangles.

        Returns ``{"ok": bool, "problems": [...], "retained": [...]}``; fewer handles than
        expected is only a problem once the job completed that many checkpoints."""
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

    def restore_candidates(self, job_id: str | None = None) -> list[RestoreCandidate]:
        """Every retained checkpoint and every savepoint of the job, as restore candidates."""
        job = self.job_id(job_id)
        candidates = [RestoreCandidate(self.store.key_uri(h.metadata_key.rsplit("/", 1)[0]), "checkpoint",
                                       h.checkpoint_id, h.completed_ms)
                      for h in read_index(self.store, job).index.checkpoints]
        for savepoint in self.list_savepoints(job):
            m = savepoint.metadata
            recorded = None if m is None or m.validation is None else m.validation_passed()
            candidates.append(RestoreCandidate(savepoint.uri, "savepoint", savepoint.checkpoint_id,
                                               m.complete_timestamp_ms if m else 0, recorded))
        return candidates

    def restore_point(self, job_id: str | None = None, *, allow_drained: bool = False) -> RestoreChoice:
        """The newest restorable snapshot across retained checkpoints and savepoints, by completion time.

        A candidate that does not load (corrupt, missing files, another job's) or,
        unless ``allow_drained``, a drained savepoint is passed over, and named in
        ``passed_over`` with the reason (:mod:`checkpoints.restore_points`)."""
        job = self.job_id(job_id)

        def inspect(candidate: RestoreCandidate) -> str | None:
            try:
                snapshot = self.load_snapshot(candidate.uri, job_id=job)
            except Exception as exc:  # a snapshot that does not load is passed over with its reason
                return f"does not load: {exc}"
            drained = drained_reason(snapshot.metadata)
            if drained and not allow_drained:
                return f"drained ({drained}): restoring it would drop every new record as late"
            return None

        point = choose_restore_point(job, self.restore_candidates(job), inspect)  # NoRestorePoint: none left
        self.log.info("job %s restores from %s %s (completed %s); passed over: %s", job, point.kind, point.uri,
                      point.completed_ms, list(point.passed_over) or "nothing")
        return point


def _status_fields(doc: Any) -> dict[str, Any]:
    if doc is None:
        return {}
    return {"state": doc.state, "heartbeat_ms": doc.heartbeat_ms, "epoch": doc.epoch,
            "last_completed_checkpoint": doc.last_completed_checkpoint, "last_completed_ms": doc.last_completed_ms,
            "watermark_ms": doc.watermark_ms, "lag_ms": doc.lag_ms, "records_per_second": doc.records_per_second,
            "failures": list(doc.failures), "extra": dict(doc.extra)}
