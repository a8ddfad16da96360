"""Where everything of a job lives in checkpoint storage (ARCHITECTURE section 6 "Storage layout").

Under the checkpoint root (a store)::

    <job_id>/chk-<id>/<operator_uid>/<subtask>/<state>[.kg<group>].parquet   task-owned state files
    <job_id>/chk-<id>/_metadata        written LAST: a chk- folder without it does not exist
    <job_id>/shared/<sha256>.<ext>     incremental files, content-addressed, reference-counted
    <job_id>/_retained.json            the retained-handles index (seed 001: ZooKeeper's role)
    <job_id>/_status.json              the status document the job master publishes
    <job_id>/_desired_state.json       what operators want: running or suspended (who, when, why)
    <job_id>/_lease.json               which job master may write the job (holder, fencing token, expiry)

These are keys.  The file backend keeps the index, the status and the lease, which are replaced
compare-and-set, as a folder ``<key>.versions/`` of numbered versions (see
:mod:`checkpoints.backends.local`); read them through a store, not by path.

Under the savepoint root (a separate store or prefix)::

    <job_id>/savepoint-<id>-<suffix>/...   self-contained: every path in its _metadata is
                                           relative to the folder, none points into shared/

File paths inside ``_metadata`` are relative to the snapshot folder, except that
a path starting with ``shared/`` names a file in the job's shared folder.  That
is why ``shared`` is reserved as an operator uid.
"""

from __future__ import annotations

import re

from engine.errors import CorruptSnapshotError, JobDefinitionError

METADATA_FILE = "_metadata"
INDEX_FILE = "_retained.json"
STATUS_FILE = "_status.json"
DESIRED_STATE_FILE = "_desired_state.json"
LEASE_FILE = "_lease.json"
SHARED_DIR = "shared"
SHARED_PREFIX = SHARED_DIR + "/"
CHECKPOINT_DIR_PREFIX = "chk-"
SAVEPOINT_DIR_PREFIX = "savepoint-"
#: where a savepoint keeps its copies of incremental files (never under shared/)
SAVEPOINT_INCREMENTAL_DIR = "incremental"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_CHK_DIR = re.compile(r"^chk-(\d+)$")
_SAVEPOINT_DIR = re.compile(r"^savepoint-(\d+)-([A-Za-z0-9]+)$")


def check_name(parameter: str, value: object) -> str:
    """A job id, operator uid or state name becomes a path segment: letters, digits, '.', '_', '-'."""
    if not isinstance(value, str) or not _NAME.match(value) or value in (".", ".."):
        raise JobDefinitionError(
            parameter,
            value,
            "must be 1-200 characters of letters, digits, '.', '_' or '-', starting with a letter or digit",
            "it becomes a folder name in checkpoint storage",
        )
    return value


def check_checkpoint_id(checkpoint_id: object) -> int:
    if type(checkpoint_id) is not int or checkpoint_id < 1:
        raise JobDefinitionError("checkpoint_id", checkpoint_id, "must be a positive int (ids start at 1)")
    return checkpoint_id


def job_dir(job_id: str) -> str:
    return check_name("job_id", job_id) + "/"


def checkpoint_dir(job_id: str, checkpoint_id: int) -> str:
    return f"{job_dir(job_id)}{CHECKPOINT_DIR_PREFIX}{check_checkpoint_id(checkpoint_id)}/"


def shared_dir(job_id: str) -> str:
    return job_dir(job_id) + SHARED_PREFIX


def index_key(job_id: str) -> str:
    return job_dir(job_id) + INDEX_FILE


def status_key(job_id: str) -> str:
    return job_dir(job_id) + STATUS_FILE


def desired_state_key(job_id: str) -> str:
    return job_dir(job_id) + DESIRED_STATE_FILE


def lease_key(job_id: str) -> str:
    return job_dir(job_id) + LEASE_FILE


def savepoint_dir(job_id: str, checkpoint_id: int, suffix: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9]+", suffix):
        raise JobDefinitionError("suffix", suffix, "must be letters and digits only")
    return f"{job_dir(job_id)}{SAVEPOINT_DIR_PREFIX}{check_checkpoint_id(checkpoint_id)}-{suffix}/"


def parse_checkpoint_dir(name: str) -> int | None:
    """The id of a ``chk-<id>`` folder name, or None for any other name."""
    m = _CHK_DIR.match(name.strip("/"))
    return int(m.group(1)) if m else None


def parse_savepoint_dir(name: str) -> int | None:
    m = _SAVEPOINT_DIR.match(name.strip("/"))
    return int(m.group(1)) if m else None


def is_shared_path(relative_path: str) -> bool:
    return relative_path.startswith(SHARED_PREFIX)


def resolve(snapshot_dir: str, job_shared_dir: str | None, relative_path: str) -> str:
    """The store key of a file named in ``_metadata``: ``shared/...`` goes to the job's shared folder
    (only checkpoints have one), anything else is inside the snapshot folder."""
    if is_shared_path(relative_path):
        if job_shared_dir is None:
            raise CorruptSnapshotError(
                f"{relative_path!r} points into a job's shared/ folder, but this snapshot must be self-contained"
            )
        return job_shared_dir + relative_path[len(SHARED_PREFIX) :]
    return snapshot_dir + relative_path


def state_file_path(operator_uid: str, subtask: int, table: str, extension: str, key_group: int | None) -> str:
    """Relative path of a task-owned state file inside a snapshot folder."""
    if check_name("operator_uid", operator_uid) == SHARED_DIR:
        raise JobDefinitionError("operator_uid", operator_uid, "is reserved for incremental files", "rename the uid")
    if type(subtask) is not int or subtask < 0:
        raise JobDefinitionError("subtask", subtask, "must be a non-negative int")
    check_name("table", table)
    group = f".kg{key_group}" if key_group is not None else ""
    return f"{operator_uid}/{subtask}/{table}{group}.{extension}"
