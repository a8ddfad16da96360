"""``stream.write_files(path, format)``: Parquet or JSON-lines files, exactly-once under checkpointing.

Layout under ``path`` (a local folder, ``file:///`` or ``s3://bucket/prefix``)::

    _staging/<txn>/part-<n>.<ext>                       pre-committed, invisible
    part-<checkpoint:010d>-<subtask:05d>-<n:05d>.<ext>  committed, visible

``pre_commit(txn, n)`` writes the transaction's remaining values as staged
parts; ``commit`` copies each staged part to its final name and deletes the
staged one.  The final name is a function of (checkpoint, subtask, part
number) only, so committing the same handle twice (after a crash between copy
and delete, or on restore, seed 002 "Recovery") writes the same object again
instead of adding a duplicate; a handle whose staged parts are gone but whose
final files exist was committed already and commits as a no-op.

Readers see committed files only: names starting with ``_`` are not data (see
:func:`read_committed`).  Zero-padded numbers make name order commit order.

``mode="at_least_once"``: every ``write`` puts a visible file at once
(``part-alo-<txn>-<n>.<ext>``) and pre-commit/commit have nothing to do; after a
replay the replayed values appear again, which AT_LEAST_ONCE allows.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

from engine.errors import IllegalStateError, JobDefinitionError, UnsupportedFormatVersion
from engine.io.formats import EXTENSIONS, check_format, decode, encode
from engine.io.sink import CommitHandle, Transaction, TwoPhaseCommitSink
from engine.io.storage import check_folder_uri, is_visible_name, open_folder

STAGING = "_staging"
HANDLE_FORMAT_VERSION = 1
MODES = ("exactly_once", "at_least_once")


class FileSink(TwoPhaseCommitSink):
    """Writes values as ``format`` files under ``path``; a transaction rolls a part every ``max_records_per_file``."""

    def __init__(
        self,
        path: str,
        format: str = "parquet",  # noqa: A002 - the contract's name
        *,
        mode: str = "exactly_once",
        max_records_per_file: int = 1_000_000,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.path = check_folder_uri("path", path)
        self.format = check_format(format, ("parquet", "jsonl"))
        if mode not in MODES:
            raise JobDefinitionError("mode", mode, "must be 'exactly_once' or 'at_least_once'")
        if isinstance(max_records_per_file, bool) or not isinstance(max_records_per_file, int) \
                or max_records_per_file < 1:
            raise JobDefinitionError("max_records_per_file", max_records_per_file, "must be a positive int")
        self.mode = mode
        self.max_records_per_file = max_records_per_file
        self.storage_options = dict(storage_options or {})
        self.extension = EXTENSIONS[self.format]
        self._store = None

    def _folder(self):
        if self._store is None:
            self._store = open_folder(self.path, self.storage_options)
        return self._store

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_store"] = None
        return state

    @property
    def is_exactly_once(self) -> bool:
        return self.mode == "exactly_once"

    # -- the protocol ------------------------------------------------------------------------------

    def begin_transaction(self) -> Transaction:
        # random, so an attempt replayed after a crash never writes into a dead attempt's staging
        return Transaction(f"{self.subtask_index:05d}-{uuid.uuid4().hex}", self.subtask_index)

    def write(self, txn: Transaction, values: Sequence[Any]) -> None:
        if txn.is_closed:
            raise IllegalStateError(f"Bug: write to {txn!r} after it was pre-committed or aborted")
        if not self.is_exactly_once:
            if values:
                name = f"part-alo-{txn.txn_id}-{len(txn.staged):05d}.{self.extension}"
                self._folder().put_bytes(name, encode(self.format, values))
                txn.staged.append(name)
            return
        txn.values.extend(values)
        while len(txn.values) >= self.max_records_per_file:
            self._stage_part(txn, txn.values[:self.max_records_per_file])
            del txn.values[:self.max_records_per_file]

    def _stage_part(self, txn: Transaction, values: Sequence[Any]) -> None:
        key = f"{STAGING}/{txn.txn_id}/part-{len(txn.staged):05d}.{self.extension}"
        self._folder().put_bytes(key, encode(self.format, values))
        txn.staged.append(key)

    def pre_commit(self, txn: Transaction, checkpoint_id: int) -> CommitHandle:
        if isinstance(checkpoint_id, bool) or not isinstance(checkpoint_id, int) or checkpoint_id < 0:
            raise JobDefinitionError("checkpoint_id", checkpoint_id, "must be an int >= 0")
        if txn.is_closed:
            raise IllegalStateError(f"Bug: {txn!r} pre-committed twice")
        files: list[list[str]] = []
        if self.is_exactly_once:
            if txn.values:
                self._stage_part(txn, txn.values)
                txn.values = []
            files = [[staged, f"part-{checkpoint_id:010d}-{txn.subtask_index:05d}-{n:05d}.{self.extension}"]
                     for n, staged in enumerate(txn.staged)]
        txn.is_closed = True
        return {"format_version": HANDLE_FORMAT_VERSION, "sink": "file", "mode": self.mode,
                "txn": txn.txn_id, "checkpoint_id": checkpoint_id, "subtask": txn.subtask_index,
                "files": files}

    def commit(self, handle: CommitHandle) -> None:
        store = self._folder()
        for staged, final in _files(handle):
            if store.exists(staged):
                store.copy(staged, final)  # overwrites: the same bytes again if a commit was cut short
                store.delete(staged)
            elif not store.exists(final):
                raise IllegalStateError(
                    f"cannot commit transaction {handle['txn']} of checkpoint {handle['checkpoint_id']}: "
                    f"neither its staged part {store.key_uri(staged)} nor the committed {store.key_uri(final)} "
                    "exists. The staging folder was cleaned while the checkpoint still needed it; do not delete "
                    f"{STAGING}/ under a running or restorable job")

    def abort(self, handle: CommitHandle) -> None:
        store = self._folder()
        for staged, _final in _files(handle):
            store.delete(staged)

    def abort_transaction(self, txn: Transaction) -> None:
        if self.is_exactly_once:
            self._folder().delete_many(txn.staged)
        txn.values = []
        txn.is_closed = True

    # -- housekeeping -------------------------------------------------------------------------------

    def discard_orphaned_staging(self, keep_handles: Iterable[CommitHandle] = ()) -> int:
        """Delete staged parts that no handle in ``keep_handles`` refers to; returns how many.

        Call it on restore, after ``recover_and_commit``/``recover_and_abort`` and
        before new transactions begin: parts staged by attempts that died before
        their pre-commit reached a checkpoint are garbage then.  Deleting while
        other subtasks have open transactions would destroy their staging.
        """
        keep = {staged for handle in keep_handles for staged, _ in _files(handle)}
        store = self._folder()
        orphans = [info.key for info in store.list(STAGING + "/") if info.key not in keep]
        return store.delete_many(orphans)


def _files(handle: CommitHandle) -> list[tuple[str, str]]:
    if not isinstance(handle, dict) or handle.get("sink") != "file":
        raise JobDefinitionError("handle", handle, "must be a handle returned by FileSink.pre_commit")
    if handle.get("format_version") != HANDLE_FORMAT_VERSION:
        raise UnsupportedFormatVersion(
            f"file sink handle of transaction {handle.get('txn')!r} has format_version "
            f"{handle.get('format_version')!r}; this Sluice reads version {HANDLE_FORMAT_VERSION}")
    return [(str(staged), str(final)) for staged, final in handle["files"]]


def committed_files(path: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """Names of the visible output files under ``path``, in name (= commit) order."""
    store = open_folder(check_folder_uri("path", path), storage_options)
    return sorted(info.key for info in store.list("part-") if "/" not in info.key and is_visible_name(info.key))


def read_committed(path: str, storage_options: dict[str, Any] | None = None) -> list:
    """Every value in the committed output under ``path``: files in name order, rows in file order.

    JSON lines come back as parsed JSON (tuples written as arrays come back as
    lists); Parquet rows as dicts.
    """
    store = open_folder(check_folder_uri("path", path), storage_options)
    out: list = []
    for name in committed_files(path, storage_options):
        data = store.get_bytes(name)
        if name.endswith(".jsonl"):
            out.extend(json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip())
        elif name.endswith(".parquet"):
            table = decode("parquet", data)
            out.extend(table.rows(0, len(table))[0])
    return out
