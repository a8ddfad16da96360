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

Nothing in a handle is trusted when it comes back from a checkpoint: a handle names
only its own staging parts (``_staging/<its txn>/part-<n>`` or, staged by Spark
tasks, ``_staging/<its txn>/e<epoch>-<digest>``) and exactly the final names its
checkpoint, subtask and part number give, and carries each part's sha256 and size
(format version 2).  An edited or corrupt handle is refused with
:class:`CorruptSnapshotError` before any file is touched, so a tampered snapshot
cannot move, overwrite or delete committed output.

``mode="at_least_once"``: every ``write`` puts a visible file at once
(``part-alo-<txn>-<n>.<ext>``) and pre-commit/commit have nothing to do; after a
replay the replayed values appear again, which AT_LEAST_ONCE allows.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from engine.errors import CorruptSnapshotError, IllegalStateError, JobDefinitionError, UnsupportedFormatVersion
from engine.io.formats import EXTENSIONS, check_format, decode, encode
from engine.io.row_format import Encoder, RowFormatBuilder
from engine.io.sink import CommitHandle, Transaction, TwoPhaseCommitSink
from engine.io.storage import check_folder_uri, is_visible_name, open_folder

STAGING = "_staging"
#: 2 adds each part's sha256 and size; version 1 handles (no checksums) are still read
HANDLE_FORMAT_VERSION = 2
_READABLE_HANDLE_VERSIONS = (1, 2)
_TXN_ID = re.compile(r"^(\d{5})-[0-9a-f]{32}$")
#: a staged part's name inside its transaction folder: written by the sink, or by a Spark task
_STAGED_PART = re.compile(r"^(?:part-\d{5}|e\d{10}-[0-9a-f]{20})$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
MODES = ("exactly_once", "at_least_once")
#: what a file sink writes: Parquet, JSON lines, or text (a line per record, Flink's simple string encoder)
SINK_FORMATS = ("parquet", "jsonl", "text")


class FileSink(TwoPhaseCommitSink):
    """Writes values as ``format`` files under ``path``; a transaction rolls a part every ``max_records_per_file``.

    Also built the PyFlink way: ``FileSink.for_row_format(path, Encoder.simple_string_encoder()).build()``
    (``text``: a line per record; engine/io/row_format.py).
    """

    @staticmethod
    def for_row_format(base_path: str, encoder: Encoder) -> RowFormatBuilder:
        if not isinstance(encoder, Encoder):
            raise JobDefinitionError("encoder", encoder, "must be an Encoder", "Use Encoder.simple_string_encoder()")
        return RowFormatBuilder(base_path, lambda path: FileSink(path, format="text"))

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
        self.format = check_format(format, SINK_FORMATS)
        if mode not in MODES:
            raise JobDefinitionError("mode", mode, "must be 'exactly_once' or 'at_least_once'")
        if isinstance(max_records_per_file, bool) or not isinstance(max_records_per_file, int) \
                or max_records_per_file < 1:
            raise JobDefinitionError("max_records_per_file", max_records_per_file, "must be a positive int")
        self.mode = mode
        self.max_records_per_file = max_records_per_file
        self.storage_options = dict(storage_options or {})
        self.extension = EXTENSIONS[self.format]
        #: the input stream's declared type (``set_input_type``): a ``text`` file writes each record as Java's
        #: ``toString`` of that type, as Flink's SimpleStringEncoder does; without one, Python's ``str``
        self.input_type: Any = None
        self._store = None

    def set_input_type(self, type_info: Any) -> None:
        """The type the stream declared (Flink's ``InputTypeConfigurable``); called by ``sink_to``."""
        self.input_type = type_info

    def text_of(self) -> Callable[[Any], str] | None:
        """A ``text`` file's line for a value: Java's ``toString`` of the declared input type (None: untyped)."""
        return self.input_type.java_string if self.input_type is not None else None

    def _encode(self, values: Sequence[Any]) -> bytes:
        return encode(self.format, values, self.text_of())

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
                self._folder().put_bytes(name, self._encode(values))
                txn.staged.append(name)
            return
        txn.values.extend(values)
        while len(txn.values) >= self.max_records_per_file:
            self._stage_part(txn, txn.values[:self.max_records_per_file])
            del txn.values[:self.max_records_per_file]

    def _stage_part(self, txn: Transaction, values: Sequence[Any]) -> None:
        key = f"{STAGING}/{txn.txn_id}/part-{len(txn.staged):05d}.{self.extension}"
        data = self._encode(values)
        self._folder().put_bytes(key, data)
        txn.staged.append(key)
        txn.digests[key] = (hashlib.sha256(data).hexdigest(), len(data))

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
            files = [[staged, _final_name(checkpoint_id, txn.subtask_index, n, self.extension),
                      *txn.digests.get(staged, ())] for n, staged in enumerate(txn.staged)]
        txn.is_closed = True
        return {"format_version": HANDLE_FORMAT_VERSION, "sink": "file", "mode": self.mode,
                "txn": txn.txn_id, "checkpoint_id": checkpoint_id, "subtask": txn.subtask_index,
                "files": files}

    def commit(self, handle: CommitHandle) -> None:
        store = self._folder()
        for staged, final, _sha, _size in self._files(handle):
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
        for staged, _final, _sha, _size in self._files(handle):
            store.delete(staged)

    def recover_and_commit(self, handles: Iterable[CommitHandle]) -> None:
        """On restore: check every handle (names, then the bytes against its checksums) before committing any."""
        handles = list(handles)
        store = self._folder()
        for handle in handles:
            for staged, final, sha, size in self._files(handle):
                if sha is None:
                    continue  # a version-1 handle: names checked, no checksum to compare
                for key in (staged, final):
                    if store.exists(key):
                        data = store.get_bytes(key)
                        if len(data) != size or hashlib.sha256(data).hexdigest() != sha:
                            raise CorruptSnapshotError(
                                f"file sink handle of transaction {handle['txn']} (checkpoint "
                                f"{handle['checkpoint_id']}): {store.key_uri(key)} has {len(data)} bytes with a "
                                f"different sha256 than the {size} the snapshot recorded; refusing to commit "
                                "anything from this snapshot")
                        break
        for handle in handles:
            self.commit(handle)

    def _files(self, handle: CommitHandle) -> list[tuple[str, str, str | None, int | None]]:
        return _files(handle, self.extension)

    def abort_transaction(self, txn: Transaction) -> None:
        if self.is_exactly_once:
            self._folder().delete_many(txn.staged)
        txn.values = []
        txn.is_closed = True

    def has_committed(self, checkpoint_id: int) -> bool:
        """Whether the output holds a part that checkpoint ``checkpoint_id`` committed (exactly-once mode: the final
        names carry the id; any subtask).  A restart that would pass over that checkpoint asks this."""
        if not self.is_exactly_once:
            return False
        return any(True for _ in self._folder().list(f"part-{checkpoint_id:010d}-"))

    # -- housekeeping -------------------------------------------------------------------------------

    def discard_orphaned_staging(self, keep_handles: Iterable[CommitHandle] = (),
                                 keep_parts: Iterable[str] = ()) -> int:
        """Delete staged parts that no handle in ``keep_handles`` refers to and that are not among
        ``keep_parts`` (``_staging/<txn>/<part>`` keys, as snapshots in storage name them); returns how many.

        Call it on restore, after ``recover_and_commit``/``recover_and_abort`` and
        before new transactions begin: parts staged by attempts that died before
        their pre-commit reached a checkpoint are garbage then.  Deleting while
        other subtasks have open transactions would destroy their staging.
        """
        keep = {staged for handle in keep_handles for staged, *_ in self._files(handle)} | set(keep_parts)
        store = self._folder()
        orphans = [info.key for info in store.list(STAGING + "/") if info.key not in keep]
        # a part whose write a killed process cut short is no part at all (a local store's temporary file)
        return store.delete_many(orphans) + store.delete_unfinished_writes(STAGING + "/")


def _final_name(checkpoint_id: int, subtask: int, n: int, extension: str) -> str:
    return f"part-{checkpoint_id:010d}-{subtask:05d}-{n:05d}.{extension}"


def file_sink_handle_problems(document: Any, where: str = "") -> list[str]:
    """Every file-sink commit handle anywhere in ``document`` (a snapshot's operator config, as JSON) that
    ``_files`` would refuse, with the reason: checked when a snapshot is opened, before any restore."""
    problems: list[str] = []
    if isinstance(document, dict):
        if document.get("sink") == "file" and "files" in document:
            files = document.get("files")
            first = files[0] if isinstance(files, list) and files and isinstance(files[0], list) else None
            extension = str(first[0]).rpartition(".")[2] if first else "jsonl"
            try:
                if extension not in EXTENSIONS.values():
                    raise CorruptSnapshotError(f"file sink commit handle {document.get('txn')!r} names a part "
                                               f"with extension {extension!r}")
                _files(document, extension)
            except (CorruptSnapshotError, UnsupportedFormatVersion, JobDefinitionError) as exc:
                problems.append(f"{where}: {exc}" if where else str(exc))
            return problems
        for key, value in document.items():
            problems.extend(file_sink_handle_problems(value, f"{where}.{key}" if where else str(key)))
    elif isinstance(document, list):
        for i, value in enumerate(document):
            problems.extend(file_sink_handle_problems(value, f"{where}[{i}]"))
    return problems


def _files(handle: CommitHandle, extension: str) -> list[tuple[str, str, str | None, int | None]]:
    """A handle's (staged, final, sha256, bytes) parts, each name checked against what the handle may name.

    Refuses (CorruptSnapshotError) a handle whose transaction id, subtask or checkpoint
    id is malformed, a staged name outside its own transaction folder, a final name other
    than the one its checkpoint, subtask and part number give, or a malformed checksum."""
    if not isinstance(handle, dict) or handle.get("sink") != "file":
        raise JobDefinitionError("handle", handle, "must be a handle returned by FileSink.pre_commit")
    version = handle.get("format_version")
    if version not in _READABLE_HANDLE_VERSIONS:
        raise UnsupportedFormatVersion(
            f"file sink handle of transaction {handle.get('txn')!r} has format_version {version!r}; this Sluice "
            f"reads versions {list(_READABLE_HANDLE_VERSIONS)}")
    txn, subtask, checkpoint_id = handle.get("txn"), handle.get("subtask"), handle.get("checkpoint_id")
    match = _TXN_ID.match(txn) if isinstance(txn, str) else None

    def refuse(why: str) -> CorruptSnapshotError:
        return CorruptSnapshotError(f"file sink commit handle of transaction {txn!r} (checkpoint {checkpoint_id!r}) "
                                    f"{why}: the snapshot was edited or is corrupt; refusing to commit or abort it")

    if match is None or type(subtask) is not int or int(match.group(1)) != subtask:
        raise refuse(f"has a malformed transaction id or subtask ({subtask!r})")
    if type(checkpoint_id) is not int or checkpoint_id < 0 or not isinstance(handle.get("files"), list):
        raise refuse("has a malformed checkpoint id or file list")
    parts: list[tuple[str, str, str | None, int | None]] = []
    for n, entry in enumerate(handle["files"]):
        if not isinstance(entry, list) or len(entry) not in ((2, 4) if version == 2 else (2,)):
            raise refuse(f"has a malformed entry {n}")
        staged, final = entry[0], entry[1]
        folder, _, name = str(staged).rpartition("/")
        stem, dot, ext = name.rpartition(".")
        if folder != f"{STAGING}/{txn}" or not dot or ext != extension or not _STAGED_PART.match(stem):
            raise refuse(f"names {staged!r} as a staged part; a handle may only name parts under "
                         f"{STAGING}/{txn}/ with extension .{extension}")
        expected = _final_name(checkpoint_id, subtask, n, extension)
        if final != expected:
            raise refuse(f"names {final!r} as the committed name of part {n}; it must be {expected!r}")
        sha, size = (entry[2], entry[3]) if len(entry) == 4 else (None, None)
        if sha is not None and (not isinstance(sha, str) or not _SHA256.match(sha) or type(size) is not int
                                or size < 0):
            raise refuse(f"has a malformed checksum for part {n}")
        parts.append((staged, final, sha, size))
    return parts


def committed_files(path: str, storage_options: dict[str, Any] | None = None) -> list[str]:
    """Names of the visible output files under ``path``, in name (= commit) order."""
    store = open_folder(check_folder_uri("path", path), storage_options)
    return sorted(info.key for info in store.list("part-") if "/" not in info.key and is_visible_name(info.key))


def read_committed(path: str, storage_options: dict[str, Any] | None = None) -> list:
    """Every value in the committed output under ``path``: files in name order, rows in file order.

    JSON lines come back as parsed JSON (tuples written as arrays come back as
    lists); Parquet rows as dicts; text lines as strings.
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
        elif name.endswith(".txt"):
            out.extend(data.decode("utf-8").splitlines())
    return out
