"""Loading a checkpoint or savepoint for restore, with full validation first: no partial restore.

``load_snapshot(uri)`` reads ``_metadata`` and checks, before anything is
restored (ARCHITECTURE section 5, issue 4 "Bad input and faults"):

- the folder has ``_metadata`` (else :class:`SnapshotNotFound`: it never completed);
- its format version is known (else :class:`UnsupportedFormatVersion`);
- the job id is the expected one, when one is given;
- a savepoint references nothing outside its folder (it must be relocatable);
- every keyed operator's subtasks cover key groups ``[0, max_parallelism - 1]``
  exactly once: no gap, no overlap;
- every state file exists with the recorded size and, with ``verify_checksums``
  (the default), the recorded sha256.

Every problem found is listed in one :class:`CorruptSnapshotError` naming the
object and the problem.  State tables are then read lazily, per operator, and
verified again as they are read.
"""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import pyarrow as pa

from checkpoints import layout
from checkpoints.backends import ObjectStore, open_store
from checkpoints.errors import ObjectNotFound, SnapshotNotFound
from checkpoints.metadata import CheckpointMetadata, OperatorState, StateFileHandle
from checkpoints.state_files import decode_table
from checkpoints.watermark_consistency import watermark_problems
from engine.errors import CorruptSnapshotError
from engine.state.key_groups import KeyGroupRange


def split_snapshot_uri(uri: str) -> tuple[str, str]:
    """``(parent_uri, folder_name)`` of a snapshot folder URI; a trailing ``/_metadata`` is accepted."""
    text = uri.rstrip("/")
    if text.endswith("/" + layout.METADATA_FILE):
        text = text[: -len(layout.METADATA_FILE) - 1]
    parsed = urlparse(text)
    if parsed.scheme in ("s3", "s3a"):
        parent, _, name = parsed.path.strip("/").rpartition("/")
        return f"{parsed.scheme}://{parsed.netloc}/{parent}".rstrip("/"), name
    if parsed.scheme == "file":
        parent, name = posixpath.split(parsed.path)
        return f"file://{parent}", name
    parent, name = posixpath.split(text)
    return parent or ".", name


@dataclass
class Snapshot:
    """A validated checkpoint or savepoint; state tables are read on demand."""

    metadata: CheckpointMetadata
    uri: str
    store: ObjectStore
    snapshot_dir: str
    shared_dir: str | None

    def operator_uids(self) -> list[str]:
        return [op.uid for op in self.metadata.operators]

    def operator(self, uid: str) -> OperatorState:
        return self.metadata.operator(uid)

    def file_key(self, handle: StateFileHandle) -> str:
        return layout.resolve(self.snapshot_dir, self.shared_dir, handle.path)

    def read_file(self, handle: StateFileHandle) -> pa.Table:
        key = self.file_key(handle)
        try:
            data = self.store.get_bytes(key)
        except ObjectNotFound as exc:
            raise CorruptSnapshotError(f"state file {self.store.key_uri(key)} is missing") from exc
        return decode_table(data, handle, self.store.key_uri(key))

    def state_tables(self, operator_uid: str, key_group_range: KeyGroupRange | None = None) -> dict[str, pa.Table]:
        """One Arrow table per state name of the operator, all subtasks concatenated.

        Delta files are applied to the files before them with the same table and
        incremental key (see ``CheckpointStorageLocation.write_state_changes``).
        With ``key_group_range`` (a restoring subtask's range after rescaling) only
        files of subtasks overlapping it are read, and rows outside it are dropped
        by their ``key_group`` column."""
        op = self.operator(operator_uid)
        parts: dict[str, list[pa.Table]] = {}
        for sub in op.subtasks:
            if key_group_range is not None and sub.key_group_range is not None:
                mine = KeyGroupRange(*sub.key_group_range).intersection(key_group_range)
                if len(mine) == 0:
                    continue
            chains: dict[tuple[str, str | None, int], list[StateFileHandle]] = {}
            for position, handle in enumerate(sub.files):
                # a private (non-incremental) file is a chain of its own
                ident = (handle.table, handle.incremental_key, -1 if handle.incremental_key else position)
                chains.setdefault(ident, []).append(handle)
            for (table_name, _, _), chain in chains.items():
                table = self._read_chain(chain)
                if key_group_range is not None and "key_group" in table.column_names:
                    import pyarrow.compute as pc

                    column = table.column("key_group")
                    table = table.filter(
                        pc.and_(
                            pc.greater_equal(column, key_group_range.start_key_group),
                            pc.less_equal(column, key_group_range.end_key_group),
                        )
                    )
                parts.setdefault(table_name, []).append(table)
        return {name: _concat(tables) for name, tables in sorted(parts.items())}

    def _read_chain(self, chain: list[StateFileHandle]) -> pa.Table:
        table = self.read_file(chain[0])
        for delta in chain[1:]:
            table = apply_delta(table, self.read_file(delta), delta.merge_key or (), self.store.key_uri(self.file_key(delta)))
        return table

    def state_frames(self, operator_uid: str) -> dict[str, Any]:
        """``{state name: pandas.DataFrame}`` of one operator: what the validation helper checks."""
        return {name: table.to_pandas() for name, table in self.state_tables(operator_uid).items()}


DELETED_COLUMN = "_deleted"
#: state files up to this size are verified with one GET; larger ones are streamed in ranges
_WHOLE_READ_LIMIT = 16 << 20


def apply_delta(base: pa.Table, delta: pa.Table, merge_key: tuple[str, ...], where: str) -> pa.Table:
    """Rows of ``base`` whose merge key the delta does not mention, plus the delta's non-deleted rows."""
    missing = [c for c in merge_key if c not in base.column_names or c not in delta.column_names]
    if not merge_key or missing:
        raise CorruptSnapshotError(f"delta file {where} has merge key {list(merge_key)} but lacks columns {missing}")
    keys = delta.select(list(merge_key))
    kept = base.join(keys, keys=list(merge_key), join_type="left anti") if keys.num_rows else base
    upserts = delta
    if DELETED_COLUMN in delta.column_names:
        import pyarrow.compute as pc

        upserts = delta.filter(pc.invert(pc.fill_null(delta.column(DELETED_COLUMN), False))).drop_columns([DELETED_COLUMN])
    try:
        return pa.concat_tables([kept.select(base.column_names), upserts.select(base.column_names)],
                                promote_options="default")
    except (pa.ArrowException, KeyError) as exc:
        raise CorruptSnapshotError(f"delta file {where} does not fit the state it changes: {exc}") from exc


def _concat(tables: list[pa.Table]) -> pa.Table:
    if len(tables) == 1:
        return tables[0]
    return pa.concat_tables(tables, promote_options="default")


def load_snapshot(
    uri: str,
    *,
    expected_job_id: str | None = None,
    verify_checksums: bool = True,
    **store_options: Any,
) -> Snapshot:
    """Open and fully validate the snapshot at ``uri`` (a ``chk-<id>`` or ``savepoint-...`` folder, or its
    ``_metadata``); ``store_options`` go to :func:`open_store` (e.g. ``endpoint_url``)."""
    parent_uri, name = split_snapshot_uri(uri)
    store = open_store(parent_uri, **store_options)
    return load_snapshot_from(store, name, expected_job_id=expected_job_id, verify_checksums=verify_checksums)


def load_snapshot_from(
    store: ObjectStore, folder: str, *, expected_job_id: str | None = None, verify_checksums: bool = True
) -> Snapshot:
    """Like :func:`load_snapshot` for a folder key inside an already opened store."""
    snapshot, problems = open_snapshot(store, folder, expected_job_id=expected_job_id, verify_checksums=verify_checksums)
    if problems:
        raise CorruptSnapshotError(
            f"snapshot {snapshot.uri} is refused ({len(problems)} problem{'s' if len(problems) > 1 else ''}); "
            "nothing was restored: " + "; ".join(problems)
        )
    return snapshot


def open_snapshot(
    store: ObjectStore, folder: str, *, expected_job_id: str | None = None, verify_checksums: bool = True
) -> tuple[Snapshot, list[str]]:
    """Read ``_metadata`` and list every problem instead of raising (``sluice inspect`` shows them).

    Raises only when there is nothing to inspect: no ``_metadata``
    (:class:`SnapshotNotFound`) or unreadable metadata (CorruptSnapshotError,
    UnsupportedFormatVersion)."""
    snapshot_dir = folder.strip("/") + "/"
    metadata_key = snapshot_dir + layout.METADATA_FILE
    uri = store.key_uri(snapshot_dir.rstrip("/"))
    metadata = _read_metadata(store, snapshot_dir)
    problems: list[str] = []
    if expected_job_id is not None and metadata.job_id != expected_job_id:
        problems.append(f"{store.key_uri(metadata_key)} belongs to job {metadata.job_id!r}, not {expected_job_id!r}")
    base = posixpath.basename(snapshot_dir.rstrip("/"))
    named_id = layout.parse_checkpoint_dir(base) or layout.parse_savepoint_dir(base)
    if named_id is not None and named_id != metadata.checkpoint_id:  # the runtimes name the folder by the id
        problems.append(f"{store.key_uri(metadata_key)} says checkpoint {metadata.checkpoint_id}, but its folder "
                        f"{base} was written for checkpoint {named_id}: the _metadata was altered or moved")
    shared_dir: str | None = None
    if metadata.is_savepoint():
        outside = sorted(p for p in metadata.referenced_paths() if layout.is_shared_path(p))
        if outside:
            problems.append(f"savepoint references files outside its folder ({', '.join(outside[:3])}): not self-contained")
    else:
        # a checkpoint's shared/ folder is its job folder's, i.e. a sibling of chk-<id>/
        parent = posixpath.dirname(snapshot_dir.rstrip("/"))
        shared_dir = (parent + "/" if parent else "") + layout.SHARED_PREFIX
    snapshot = Snapshot(metadata, uri, store, snapshot_dir, shared_dir)
    problems.extend(key_group_problems(metadata))
    problems.extend(delta_chain_problems(metadata))
    problems.extend(_sink_handle_problems(metadata))
    problems.extend(watermark_problems(metadata))
    if not any("not self-contained" in p for p in problems):
        problems.extend(_file_problems(snapshot, verify_checksums))
    return snapshot, problems


def _sink_handle_problems(metadata: CheckpointMetadata) -> list[str]:
    """Sink commit handles a restore would commit are checked now: names confined to the sink's own
    staging and final names, well-formed checksums (engine/io/file_sink.py)."""
    from engine.io.file_sink import file_sink_handle_problems

    problems: list[str] = []
    for op in metadata.operators:
        problems.extend(file_sink_handle_problems(op.config, f"operator {op.uid}"))
    return problems


def read_snapshot_metadata(uri: str, **store_options: Any) -> CheckpointMetadata:
    """Only the ``_metadata`` of the snapshot at ``uri``: no state file is read or checked."""
    parent_uri, name = split_snapshot_uri(uri)
    return _read_metadata(open_store(parent_uri, **store_options), name.strip("/") + "/")


def _read_metadata(store: ObjectStore, snapshot_dir: str) -> CheckpointMetadata:
    metadata_key = snapshot_dir + layout.METADATA_FILE
    try:
        raw = store.get_bytes(metadata_key)
    except ObjectNotFound:
        raise SnapshotNotFound(
            f"no snapshot at {store.key_uri(snapshot_dir.rstrip('/'))}: it has no {layout.METADATA_FILE}, "
            "so it never completed (or the path is wrong)"
        ) from None
    return CheckpointMetadata.from_json(raw, store.key_uri(metadata_key))


def key_group_problems(metadata: CheckpointMetadata) -> list[str]:
    """Gaps, overlaps and out-of-range key groups across each keyed operator's subtasks."""
    problems: list[str] = []
    seen_uids: set[str] = set()
    for op in metadata.operators:
        where = f"operator {op.uid!r} of checkpoint {metadata.checkpoint_id}"
        if op.uid in seen_uids:
            problems.append(f"{where} appears twice in _metadata")
        seen_uids.add(op.uid)
        subtask_ids = [s.subtask for s in op.subtasks]
        if len(set(subtask_ids)) != len(subtask_ids):
            problems.append(f"{where} lists a subtask twice: {sorted(subtask_ids)}")
        if not op.is_keyed():
            continue
        ranges = []
        for s in op.subtasks:
            if s.key_group_range is None:
                problems.append(f"{where} subtask {s.subtask} has no key_group_range while others have one")
                continue
            start, end = s.key_group_range
            if start > end:
                continue  # an empty range (more subtasks than key groups) covers nothing
            if start < 0 or end >= op.max_parallelism:
                problems.append(
                    f"{where} subtask {s.subtask} key groups [{start}, {end}] lie outside [0, {op.max_parallelism - 1}]"
                )
            ranges.append((start, end, s.subtask))
        ranges.sort()
        expected = 0
        for start, end, subtask in ranges:
            if start > expected:
                problems.append(f"{where} leaves key groups [{expected}, {start - 1}] uncovered (gap before subtask {subtask})")
            elif start < expected:
                problems.append(
                    f"{where} covers key groups [{start}, {min(end, expected - 1)}] twice (subtask {subtask} overlaps)"
                )
            expected = max(expected, end + 1)
        if expected < op.max_parallelism:
            problems.append(f"{where} leaves key groups [{expected}, {op.max_parallelism - 1}] uncovered (gap at the end)")
    return problems


def delta_chain_problems(metadata: CheckpointMetadata) -> list[str]:
    """A delta file must follow a full file of the same table and incremental key in its subtask."""
    problems: list[str] = []
    for op in metadata.operators:
        for sub in op.subtasks:
            seen_full: set[tuple[str, str | None]] = set()
            for handle in sub.files:
                ident = (handle.table, handle.incremental_key)
                if not handle.is_delta():
                    seen_full.add(ident)
                elif handle.incremental_key is None or ident not in seen_full:
                    problems.append(
                        f"operator {op.uid!r} subtask {sub.subtask}: delta file {handle.path} has no full file of "
                        f"state {handle.table!r} / {handle.incremental_key!r} before it"
                    )
    return problems


def _file_problems(snapshot: Snapshot, verify_checksums: bool) -> list[str]:
    problems: list[str] = []
    checked: set[str] = set()
    for uid, subtask, handle in snapshot.metadata.files():
        key = snapshot.file_key(handle)
        if key in checked:  # one shared file may back several handles
            continue
        checked.add(key)
        where = f"state file {snapshot.store.key_uri(key)} (operator {uid!r}, subtask {subtask})"
        try:
            if verify_checksums and handle.bytes <= _WHOLE_READ_LIMIT:
                # one request instead of head + ranged reads: most state files are small
                data = snapshot.store.get_bytes(key)
                size, digest = len(data), hashlib.sha256(data).hexdigest()
            else:
                size = snapshot.store.head(key).size
                digest = None
        except ObjectNotFound:
            problems.append(f"{where} is missing")
            continue
        if size != handle.bytes:
            state = "truncated" if size < handle.bytes else "longer than recorded"
            problems.append(f"{where} is {state}: {size} bytes, _metadata records {handle.bytes}")
            continue
        if verify_checksums:
            if digest is None:
                hasher = hashlib.sha256()
                for chunk in snapshot.store.iter_chunks(key, size=size):
                    hasher.update(chunk)
                digest = hasher.hexdigest()
            if digest != handle.sha256:
                problems.append(f"{where} fails its checksum: sha256 {digest}, _metadata records {handle.sha256}")
    return problems

