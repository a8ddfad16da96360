"""The S3 backend (boto3), also for S3-compatible stores through ``endpoint_url``.

Why it looks like this:

- **Clients per process.**  A store is sent to Spark executors, so it holds only
  configuration; the boto3 client is created on first use in each process (and
  again after a fork) and dropped by ``__getstate__``.  Credentials come from
  the standard chain (environment, profile, instance role) of each process; none
  are stored or sent.  The endpoint and region are: a store pickled for another
  process carries the ones this process resolved (``resolved_settings``), since
  an executor's environment was fixed when it started and may not name them.
- **Retries with backoff** are botocore's: ``retry_mode="standard"`` (or
  ``"adaptive"``, which also rate-limits the client after throttling) retries
  throttling errors, 500/502/503/504 and connection errors and timeouts with
  exponential backoff and jitter, ``max_attempts`` times in all.  What still
  fails afterwards leaves as :class:`StorageUnavailable`.
- **Multipart upload** above ``multipart_threshold`` bytes, in parts of
  ``multipart_part_size``.  A part that fails (after retries) aborts the upload,
  so no half object is ever visible and no parts are left billed.
- **Conditional writes** use S3's ``If-None-Match: *`` and ``If-Match: <etag>``
  on PutObject (and CompleteMultipartUpload); a 412 ``PreconditionFailed`` or a
  409 ``ConditionalRequestConflict`` becomes :class:`PreconditionFailed`, as does
  a 404 on If-Match (the object was deleted meanwhile).  moto 5.2.5 implements
  both headers, which the backend contract tests check.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any, Iterable, Iterator

from checkpoints.backends.base import ObjectInfo, ObjectStore
from checkpoints.errors import ObjectNotFound, PreconditionFailed, StorageUnavailable
from engine.errors import JobDefinitionError

DEFAULT_MULTIPART_THRESHOLD = 64 << 20
DEFAULT_PART_SIZE = 16 << 20
_MIN_PART_SIZE = 5 << 20  # S3's floor for every part but the last
_DELETE_BATCH = 1000  # S3's DeleteObjects limit

_NOT_FOUND_CODES = {"NoSuchKey", "404", "NotFound"}
_PRECONDITION_CODES = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}


class S3Store(ObjectStore):
    """Objects under ``s3://bucket/prefix/``; see the module docstring for retries, multipart and fencing."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        region: str | None = None,
        endpoint_url: str | None = None,
        max_attempts: int = 8,
        retry_mode: str = "standard",
        connect_timeout_s: float = 10.0,
        read_timeout_s: float = 60.0,
        multipart_threshold: int = DEFAULT_MULTIPART_THRESHOLD,
        multipart_part_size: int = DEFAULT_PART_SIZE,
        client_options: dict[str, Any] | None = None,
        list_page_size: int = 1000,
    ) -> None:
        if not bucket:
            raise JobDefinitionError("bucket", bucket, "must be a non-empty S3 bucket name")
        if retry_mode not in ("standard", "adaptive", "legacy"):
            raise JobDefinitionError("retry_mode", retry_mode, "must be 'standard', 'adaptive' or 'legacy'")
        if max_attempts < 1:
            raise JobDefinitionError("max_attempts", max_attempts, "must be at least 1 (1 means no retries)")
        if multipart_part_size < _MIN_PART_SIZE:
            raise JobDefinitionError(
                "multipart_part_size", multipart_part_size, f"must be at least {_MIN_PART_SIZE} bytes (S3's minimum)"
            )
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.region = region
        self.endpoint_url = endpoint_url
        self.max_attempts = max_attempts
        self.retry_mode = retry_mode
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.multipart_threshold = max(multipart_threshold, 1)
        self.multipart_part_size = multipart_part_size
        self.client_options = dict(client_options or {})
        self.list_page_size = list_page_size
        self._client: Any = None
        self._client_pid: int | None = None

    # -- process-local client ------------------------------------------------------------------

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client"] = None
        state["_client_pid"] = None
        state.update(self.resolved_settings())
        return state

    def resolved_settings(self) -> dict[str, Any]:
        """``endpoint_url`` and ``region`` as this process's boto3 resolves them (options, environment,
        config files): what another process must use to reach the same store."""
        if self.endpoint_url is not None and self.region is not None:
            return {"endpoint_url": self.endpoint_url, "region": self.region}
        meta = self.client.meta
        return {"endpoint_url": self.endpoint_url or meta.endpoint_url, "region": self.region or meta.region_name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        endpoint = f", endpoint_url={self.endpoint_url!r}" if self.endpoint_url else ""
        return f"S3Store({self.uri!r}{endpoint})"

    def __eq__(self, other: object) -> bool:
        """Same bucket and prefix, at the same endpoint; no endpoint (None) means the one this process
        resolves, so it matches a copy that carries the resolved one (``__getstate__``)."""
        return (
            isinstance(other, S3Store)
            and (other.bucket, other.prefix) == (self.bucket, self.prefix)
            and (other.endpoint_url is None or self.endpoint_url is None or other.endpoint_url == self.endpoint_url)
        )

    def __hash__(self) -> int:
        return hash(("s3", self.bucket, self.prefix))

    @property
    def client(self) -> Any:
        """The boto3 S3 client of this process, created on first use (and after a fork)."""
        if self._client is None or self._client_pid != os.getpid():
            import boto3
            from botocore.config import Config

            config = Config(
                retries={"total_max_attempts": self.max_attempts, "mode": self.retry_mode},
                connect_timeout=self.connect_timeout_s,
                read_timeout=self.read_timeout_s,
                region_name=self.region,
            )
            self._client = boto3.session.Session().client(
                "s3", endpoint_url=self.endpoint_url, config=config, **self.client_options
            )
            self._client_pid = os.getpid()
        return self._client

    @property
    def uri(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _unkey(self, full_key: str) -> str:
        return full_key[len(self.prefix) + 1 :] if self.prefix else full_key

    # -- reading -------------------------------------------------------------------------------

    def get_bytes(self, key: str) -> bytes:
        with _translated(self, key, "get"):
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()

    def get_range(self, key: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        with _translated(self, key, "get"):
            response = self.client.get_object(
                Bucket=self.bucket, Key=self._key(key), Range=f"bytes={start}-{start + length - 1}"
            )
            return response["Body"].read()

    def head(self, key: str) -> ObjectInfo:
        with _translated(self, key, "head"):
            r = self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        return ObjectInfo(key, int(r["ContentLength"]), r["ETag"], _millis(r.get("LastModified")))

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        paginator = self.client.get_paginator("list_objects_v2")
        with _translated(self, prefix, "list"):
            for page in paginator.paginate(
                Bucket=self.bucket, Prefix=self._key(prefix), PaginationConfig={"PageSize": self.list_page_size}
            ):
                for item in page.get("Contents", ()):
                    yield ObjectInfo(
                        self._unkey(item["Key"]), int(item["Size"]), item["ETag"], _millis(item.get("LastModified"))
                    )

    # -- writing -------------------------------------------------------------------------------

    def put_bytes(self, key: str, data: bytes) -> str:
        return self._put(key, data, {})

    def put_if_absent(self, key: str, data: bytes) -> str:
        return self._put(key, data, {"IfNoneMatch": "*"})

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        return self._put(key, data, {"IfMatch": etag})

    def _put(self, key: str, data: bytes, conditions: dict[str, str]) -> str:
        if len(data) > self.multipart_threshold:
            return self._put_multipart(key, data, conditions)
        with _translated(self, key, "put", conditional=bool(conditions)):
            r = self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, **conditions)
        return r["ETag"]

    def _put_multipart(self, key: str, data: bytes, conditions: dict[str, str]) -> str:
        full_key = self._key(key)
        with _translated(self, key, "start multipart upload of"):
            upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=full_key)["UploadId"]
        try:
            parts = []
            view = memoryview(data)
            for number, offset in enumerate(range(0, len(data), self.multipart_part_size), start=1):
                chunk = view[offset : offset + self.multipart_part_size]
                with _translated(self, key, f"upload part {number} of"):
                    r = self.client.upload_part(
                        Bucket=self.bucket, Key=full_key, UploadId=upload_id, PartNumber=number, Body=bytes(chunk)
                    )
                parts.append({"ETag": r["ETag"], "PartNumber": number})
            with _translated(self, key, "complete multipart upload of", conditional=bool(conditions)):
                r = self.client.complete_multipart_upload(
                    Bucket=self.bucket,
                    Key=full_key,
                    UploadId=upload_id,
                    MultipartUpload={"Parts": parts},
                    **conditions,
                )
            return r["ETag"]
        except BaseException:
            try:
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=full_key, UploadId=upload_id)
            except Exception:  # the original failure matters more; S3 lifecycle rules reap leftovers
                pass
            raise

    def delete(self, key: str) -> None:
        with _translated(self, key, "delete"):
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))

    def delete_many(self, keys: Iterable[str]) -> int:
        keys = list(keys)
        for start in range(0, len(keys), _DELETE_BATCH):
            batch = keys[start : start + _DELETE_BATCH]
            with _translated(self, batch[0], "delete"):
                r = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": self._key(k)} for k in batch], "Quiet": True}
                )
            errors = [e for e in r.get("Errors", ()) if e.get("Code") not in _NOT_FOUND_CODES]
            if errors:
                first = errors[0]
                raise StorageUnavailable(
                    f"{len(errors)} of {len(batch)} deletes under {self.uri} failed, first "
                    f"{first.get('Key')!r}: {first.get('Code')} {first.get('Message', '')}".rstrip()
                )
        return len(keys)

    def copy(self, source_key: str, target_key: str, source_store: ObjectStore | None = None) -> None:
        if source_store is None or (
            isinstance(source_store, S3Store) and source_store.endpoint_url == self.endpoint_url
        ):
            src = source_store if isinstance(source_store, S3Store) else self
            with _translated(self, source_key, "copy"):
                # managed copy: CopyObject below 5 GB, multipart UploadPartCopy above
                self.client.copy(
                    {"Bucket": src.bucket, "Key": src._key(source_key)}, self.bucket, self._key(target_key)
                )
        else:
            self.put_bytes(target_key, source_store.get_bytes(source_key))


class _translated:
    """Map botocore errors to the package's errors at the boundary (STYLE section 5, httpx's map_exceptions)."""

    def __init__(self, store: S3Store, key: str, action: str, conditional: bool = False) -> None:
        self.store, self.key, self.action, self.conditional = store, key, action, conditional

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None:
            return False
        from botocore.exceptions import BotoCoreError, ClientError

        where = self.store.key_uri(self.key)
        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            code = str(error.get("Code", ""))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if self.conditional and (code in _PRECONDITION_CODES or status in (409, 412, 404)):
                raise PreconditionFailed(
                    f"conditional {self.action} {where} lost: {code or status} "
                    f"({error.get('Message', 'the object exists or changed since it was read')})"
                ) from exc
            if code in _NOT_FOUND_CODES or status == 404:
                raise ObjectNotFound(f"no object {where} (S3 {code or status})") from exc
            raise StorageUnavailable(
                f"S3 {self.action} {where} failed after up to {self.store.max_attempts} attempts: "
                f"{code or status} {error.get('Message', '')}".rstrip()
            ) from exc
        if isinstance(exc, BotoCoreError):
            raise StorageUnavailable(
                f"S3 {self.action} {where} failed after up to {self.store.max_attempts} attempts: {exc}"
            ) from exc
        return False


def _millis(value: datetime | None) -> int:
    return int(value.timestamp() * 1000) if value is not None else 0
