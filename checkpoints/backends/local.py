"""The local-filesystem backend: the embedded default, and the reference the S3 backend is tested against.

Atomicity: every write goes to a temporary file in the target directory, is
fsync'ed and then renamed or linked into place, so readers never see a torn
object.

Conditional writes (``put_if_absent``, ``put_if_match``) hold no lock.
``put_if_absent`` is one ``os.link`` of the new file to the object's name,
which fails if the name exists.  An object replaced conditionally (the job's
``_retained.json``, ``_lease.json``, ``_status.json``) is
kept as numbered versions in the folder ``<name>.versions/``, and the object's
content is its highest version.  A conditional replace of version ``n`` is one
``os.link`` of the new content to the name ``n + 1``, which fails if the name
exists: of two racing writers exactly one wins.  No step of a write waits on another process,
so a writer frozen anywhere in a write (a GC pause, SIGSTOP, a VM migration)
holds nobody up, and when it wakes its link names a version that exists and
fails.  (The former ``flock`` around the check and the rename let a master
frozen inside it block the master that took its lease over.)  The last
``_KEEP_VERSIONS`` versions are kept, so a reader that listed the folder still
finds the version it chose; a writer that wakes after its version was deleted
sees versions far above it and withdraws its link.  ``put_bytes`` of an object
never replaced conditionally renames a file over it, as before; of a versioned
one, it adds the next version.  A plain file (an object written before, or by a
store before versions) is version 0: the first conditional replace makes it
version 1 and removes it.
``link`` is atomic on local disks; on NFS it may not be, so use S3 there.

The entity tag of a plain file is ``<inode>-<mtime_ns>-<size>`` from ``stat``:
every write renames a fresh file into place, so any write changes the tag, and
head need not read (possibly gigabytes of) content to compute it.  The entity
tag of a versioned object is ``v<version>-<inode>``.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

from checkpoints.backends.base import ObjectInfo, ObjectStore
from checkpoints.errors import InvalidStorageUri, ObjectNotFound, PreconditionFailed, StorageUnavailable

_LOCK_SUFFIX = ".lock"  # lock files of stores written before versions; ignored
_TMP_PREFIX = ".tmp-"
_VERSIONS_SUFFIX = ".versions"
#: versions of a conditionally written object kept behind the newest: a reader between listing the folder and
#: opening the version it chose, or a writer between its check and its link, has that many writes' grace
_KEEP_VERSIONS = 16
_READ_ATTEMPTS = 20


class LocalFileSystemStore(ObjectStore):
    """Objects are files under ``root``; keys are relative paths with ``/`` separators."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).absolute()

    def __repr__(self) -> str:
        return f"LocalFileSystemStore({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LocalFileSystemStore) and other.root == self.root

    def __hash__(self) -> int:
        return hash(("file", self.root))

    @property
    def uri(self) -> str:
        return self.root.as_uri()

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if not key or key.startswith("/") or any(p in ("", ".", "..") for p in parts):
            raise InvalidStorageUri(
                f"object key {key!r} is not a relative path of non-empty segments (no '.', '..' or '//')"
            )
        if any(p.endswith(_VERSIONS_SUFFIX) for p in parts):
            raise InvalidStorageUri(f"object key {key!r}: segments ending in {_VERSIONS_SUFFIX!r} are this "
                                    "store's own (the versions of conditionally written objects)")
        return self.root.joinpath(*parts)

    # -- reading -------------------------------------------------------------------------------

    def get_bytes(self, key: str) -> bytes:
        return self._read(key, lambda f: f.read())

    def get_range(self, key: str, start: int, length: int) -> bytes:
        def read(f):
            f.seek(start)
            return f.read(length)

        return self._read(key, read)

    def head(self, key: str) -> ObjectInfo:
        path = self._path(key)
        found = self._current(path)
        if found is None:
            raise self._not_found(key, path)
        _path, st, version = found
        return _info(key, st, version)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # walk only the deepest folder the prefix names, then filter by the remaining text
        folder_key, _, _ = prefix.rpartition("/")
        start = self._path(folder_key) if folder_key else self.root
        if not start.is_dir():
            return
        found: list[ObjectInfo] = []
        for dirpath, dirnames, filenames in os.walk(start):
            versioned = {d[: -len(_VERSIONS_SUFFIX)] for d in dirnames if d.endswith(_VERSIONS_SUFFIX)}
            dirnames[:] = sorted(d for d in dirnames if not d.endswith(_VERSIONS_SUFFIX))
            names = versioned | {n for n in filenames if not n.endswith(_LOCK_SUFFIX) and not n.startswith(_TMP_PREFIX)}
            for name in names:
                full = Path(dirpath, name)
                key = full.relative_to(self.root).as_posix()
                if not key.startswith(prefix):
                    continue
                current = self._current(full)
                if current is not None:  # None: deleted while listing
                    found.append(_info(key, current[1], current[2]))
        found.sort(key=lambda info: info.key)
        yield from found

    def delete_unfinished_writes(self, prefix: str = "") -> int:
        """Temporary files of writes a killed process never renamed into place (``.tmp-*``) under ``prefix``."""
        folder_key, _, _ = prefix.rpartition("/")
        start = self._path(folder_key) if folder_key else self.root
        deleted = 0
        if not start.is_dir():
            return 0
        for dirpath, _dirnames, filenames in os.walk(start):
            for name in filenames:
                full = Path(dirpath, name)
                key = full.relative_to(self.root).as_posix().replace(_VERSIONS_SUFFIX + "/", "/")
                if name.startswith(_TMP_PREFIX) and key.startswith(prefix):
                    _unlink_quietly(full)
                    deleted += 1
        return deleted

    # -- writing -------------------------------------------------------------------------------

    def put_bytes(self, key: str, data: bytes) -> str:
        path = self._path(key)
        if not _versions_dir(path).is_dir():
            tmp = self._write_temp(path, data)
            os.replace(tmp, path)
            return _etag(path.stat())
        # written conditionally before: the new content is the next version, whatever that is
        tmp = self._write_temp(_versions_dir(path) / "_", data)
        try:
            while True:
                newest = _versions(path)
                try:
                    return self._link_version(path, tmp, (newest[-1] if newest else 0) + 1)
                except PreconditionFailed:
                    continue
        finally:
            _unlink_quietly(tmp)

    def put_if_absent(self, key: str, data: bytes) -> str:
        path = self._path(key)
        exists = PreconditionFailed(f"{self.key_uri(key)} already exists (conditional create, If-None-Match: *)")
        if _versions(path):
            raise exists
        tmp = self._write_temp(path, data)
        try:
            # os.link fails if the target exists: the check and the write are one step, and no lock is held
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise exists from None
            if _versions(path):  # a conditional replace turned the object into versions meanwhile: it existed
                _unlink_quietly(path)
                raise exists
            return _etag(path.stat())
        finally:
            _unlink_quietly(tmp)

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        path = self._path(key)
        current = self._current(path)
        if current is None:
            raise PreconditionFailed(f"{self.key_uri(key)} no longer exists (conditional replace, If-Match: {etag})")
        current_path, st, version = current
        if _info(key, st, version).etag != etag:
            raise PreconditionFailed(
                f"{self.key_uri(key)} changed since it was read: entity tag is {_info(key, st, version).etag}, "
                f"expected {etag} (conditional replace, If-Match)"
            )
        tmp = self._write_temp(_versions_dir(path) / "_", data)
        try:
            # version 0 is a plain file (an object written unconditionally, or by a store before versions): the
            # first conditional write turns it into version 1, and the plain file goes once that one has landed
            new_etag = self._link_version(path, tmp, (version or 0) + 1, replaces=etag,
                                          base=None if version is None else (current_path, st.st_ino))
        finally:
            _unlink_quietly(tmp)
        if version is None:
            _unlink_quietly(current_path)
        return new_etag

    def delete(self, key: str) -> None:
        path = self._path(key)
        _unlink_quietly(path)
        _unlink_quietly(path.with_name(path.name + _LOCK_SUFFIX))
        shutil.rmtree(_versions_dir(path), ignore_errors=True)
        # remove folders left empty, up to the root, so a deleted checkpoint leaves no trace
        parent = path.parent
        while parent != self.root and self.root in parent.parents:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent

    def copy(self, source_key: str, target_key: str, source_store: ObjectStore | None = None) -> None:
        if (source_store is None or source_store == self) and not _versions_dir(self._path(source_key)).is_dir() \
                and not _versions_dir(self._path(target_key)).is_dir():
            source = self._path(source_key)
            target = self._path(target_key)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=target.parent)
            os.close(fd)
            try:
                shutil.copyfile(source, tmp)
            except FileNotFoundError as exc:
                _unlink_quietly(Path(tmp))
                raise ObjectNotFound(f"no object {self.key_uri(source_key)} to copy") from exc
            os.replace(tmp, target)
        else:
            self.put_bytes(target_key, (source_store or self).get_bytes(source_key))

    # -- helpers -------------------------------------------------------------------------------

    def _current(self, path: Path) -> tuple[Path, os.stat_result, int | None] | None:
        """The file holding the object's content now, its stat and its version (None: a plain file);
        None if there is no object.  A version deleted between listing and stat is looked up again."""
        for _ in range(_READ_ATTEMPTS):
            newest = _versions(path)
            if not newest:
                try:
                    st = path.stat()
                except FileNotFoundError:
                    if _versions(path):  # the first conditional write replaced the plain file meanwhile
                        continue
                    return None
                if not _stat_is_file(st):
                    return None
                return path, st, None
            chosen = _versions_dir(path) / _version_name(newest[-1])
            try:
                return chosen, chosen.stat(), newest[-1]
            except FileNotFoundError:
                continue
        raise StorageUnavailable(f"{path}: its versions kept changing under {_READ_ATTEMPTS} reads")

    def _read(self, key: str, read):
        path = self._path(key)
        for _ in range(_READ_ATTEMPTS):
            found = self._current(path)
            if found is None:
                raise self._not_found(key, path)
            try:
                with open(found[0], "rb") as f:
                    return read(f)
            except FileNotFoundError:
                continue  # replaced (plain) or deleted (an old version) between lookup and open
        raise StorageUnavailable(f"{self.key_uri(key)}: its content kept changing under {_READ_ATTEMPTS} reads")

    def _not_found(self, key: str, path: Path) -> ObjectNotFound:
        if path.is_dir():
            return ObjectNotFound(f"{self.key_uri(key)} is a folder, not an object")
        return ObjectNotFound(f"no object {self.key_uri(key)}")

    def _link_version(self, path: Path, tmp: Path, version: int, replaces: str | None = None,
                      base: tuple[Path, int] | None = None) -> str:
        """Make ``tmp``'s content version ``version`` of ``path``.  PreconditionFailed if that version exists,
        or if this writer was frozen between its check and its link long enough for the version it read
        (``base``: its file and inode) to be deleted, or for its version number to be written and deleted."""
        target = _versions_dir(path) / _version_name(version)
        lost = (f"{self.root.as_uri()}/{path.relative_to(self.root).as_posix()} changed since it was read "
                f"(conditional write of version {version}{f' over {replaces}' if replaces else ''} lost")
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise PreconditionFailed(lost + ")") from None
        newest = _versions(path)
        if base is not None:
            try:
                stale = os.stat(base[0]).st_ino != base[1]
            except FileNotFoundError:
                stale = True  # deleted: the object was deleted (and maybe created again), or pruned long since
        else:
            stale = bool(newest) and newest[-1] >= version + _KEEP_VERSIONS
        if stale:
            _unlink_quietly(target)
            raise PreconditionFailed(lost + ": the version it read is gone, this writer was paused past it)")
        for old in newest:
            if old > version - _KEEP_VERSIONS:
                break
            _unlink_quietly(_versions_dir(path) / _version_name(old))
        return _info("", target.stat(), version).etag

    def _write_temp(self, path: Path, data: bytes) -> Path:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=path.parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES):
                raise StorageUnavailable(f"cannot write {path}: {exc.strerror}") from exc
            raise
        return Path(tmp)


def _versions_dir(path: Path) -> Path:
    return path.with_name(path.name + _VERSIONS_SUFFIX)


def _version_name(version: int) -> str:
    return f"{version:020d}"


def _versions(path: Path) -> list[int]:
    """The versions of a conditionally written object, oldest first; [] if it has none."""
    try:
        names = os.listdir(_versions_dir(path))
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(int(n) for n in names if n.isdigit())


def _stat_is_file(st: os.stat_result) -> bool:
    return stat.S_ISREG(st.st_mode)


def _info(key: str, st: os.stat_result, version: int | None) -> ObjectInfo:
    etag = _etag(st) if version is None else f"v{version:x}-{st.st_ino:x}"
    return ObjectInfo(key, st.st_size, etag, st.st_mtime_ns // 1_000_000)


def _etag(st: os.stat_result) -> str:
    return f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
