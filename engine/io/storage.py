"""Where file sources and sinks read and write: the checkpoint package's object stores.

File sources and sinks go through :func:`checkpoints.backends.open_store`, the same
storage layer checkpoints use, so a local folder (a plain path or ``file:///``)
and ``s3://bucket/prefix`` behave alike and boto3 stays inside that package
(ARCHITECTURE section 6, "Backends").  Stores hold configuration only and
create clients lazily, so sources and sinks can be shipped to Spark executors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.errors import JobDefinitionError

if TYPE_CHECKING:
    from checkpoints.backends import ObjectStore


def check_folder_uri(parameter: str, uri: object) -> str:
    if not isinstance(uri, str) or not uri.strip():
        raise JobDefinitionError(parameter, uri, "must be a local folder path, 'file:///path' or 's3://bucket/prefix'")
    return uri


def open_folder(uri: str, storage_options: dict[str, Any] | None = None) -> ObjectStore:
    """The store rooted at the folder ``uri`` (``storage_options`` go to the S3 backend: endpoint_url, region...)."""
    # imported here: checkpoints.errors imports engine.errors, which loads the engine package and this module;
    # a module-level import made `import checkpoints.backends` first (Airflow, the CLI) a circular import
    from checkpoints.backends import open_store

    return open_store(uri, **(storage_options or {}))


def options_for_another_process(uri: str, storage_options: dict[str, Any] | None = None,
                                store: ObjectStore | None = None) -> dict[str, Any]:
    """``storage_options`` for opening ``uri`` in another process (a Spark task): for S3, with the endpoint and
    region this process resolved, since an executor's environment was fixed when it started and may name
    neither; credentials stay with each process's own boto3 chain and are never added.  ``store``: this
    process's store for ``uri``, if it has one (resolving through it reuses its client)."""
    from checkpoints.backends import S3Store

    options = dict(storage_options or {})
    if store is None:
        store = open_folder(uri, options)
    if isinstance(store, S3Store):
        return {**options, **store.resolved_settings()}
    return options


def is_visible_name(name: str) -> bool:
    """Hidden and bookkeeping files (``_staging/``, ``_SUCCESS``, ``.crc``) are not data, as in Spark and Hadoop."""
    return not name.startswith(("_", "."))
