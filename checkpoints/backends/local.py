"""The local-filesystem backend: the embedded default, and the reference the S3 backend is tested against.

Atomicity: every write goes to a temporary file in the target directory, is
fsync'ed and then ``os.replace``'d over the target, so readers never see a torn
object.  Conditional writes (``put_if_absent``, ``put_if_match``) run under an
exclusive ``fcntl.flock`` on ``<target>.lock``: the check and the rename happen
while the lock is held, so two processes (two job masters) cannot both win.
``flock`` is reliable on local disks; on NFS it may not be, so use S3 there.

The entity tag of a file is ``<inode>-<mtime_ns>-<size>`` from ``stat``: every
write renames a fresh file into place, so any write changes the tag, and head
need not read (possibly gigabytes of) content to compute it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from checkpoints.backends.base import ObjectInfo, ObjectStore
from checkpoints.errors import InvalidStorageUri, ObjectNotFound, PreconditionFailed, StorageUnavailable

_LOCK_SUFFIX = ".lock"
_TMP_PREFIX = ".tmp-"


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
        return self.root.joinpath(*parts)

    # -- reading -------------------------------------------------------------------------------

    def get_bytes(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return path.read_bytes()
        except FileNotFoundError as exc:
            raise ObjectNotFound(f"no object {self.key_uri(key)}") from exc
        except IsADirectoryError as exc:
            raise ObjectNotFound(f"{self.key_uri(key)} is a folder, not an object") from exc

    def get_range(self, key: str, start: int, length: int) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                f.seek(start)
                return f.read(length)
        except FileNotFoundError as exc:
            raise ObjectNotFound(f"no object {self.key_uri(key)}") from exc

    def head(self, key: str) -> ObjectInfo:
        path = self._path(key)
        try:
            st = path.stat()
        except FileNotFoundError as exc:
            raise ObjectNotFound(f"no object {self.key_uri(key)}") from exc
        if not path.is_file():
            raise ObjectNotFound(f"{self.key_uri(key)} is a folder, not an object")
        return ObjectInfo(key, st.st_size, _etag(st), st.st_mtime_ns // 1_000_000)

    def list(self, prefix: str = "") -> Iterator[ObjectInfo]:
        # walk only the deepest folder the prefix names, then filter by the remaining text
        folder_key, _, _ = prefix.rpartition("/")
        start = self._path(folder_key) if folder_key else self.root
        if not start.is_dir():
            return
        found: list[ObjectInfo] = []
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames.sort()
            for name in filenames:
                if name.endswith(_LOCK_SUFFIX) or name.startswith(_TMP_PREFIX):
                    continue
                full = Path(dirpath, name)
                key = full.relative_to(self.root).as_posix()
                if not key.startswith(prefix):
                    continue
                try:
                    st = full.stat()
                except FileNotFoundError:
                    continue  # deleted while listing
                found.append(ObjectInfo(key, st.st_size, _etag(st), st.st_mtime_ns // 1_000_000))
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
                if name.startswith(_TMP_PREFIX) and full.relative_to(self.root).as_posix().startswith(prefix):
                    _unlink_quietly(full)
                    deleted += 1
        return deleted

    # -- writing -------------------------------------------------------------------------------

    def put_bytes(self, key: str, data: bytes) -> str:
        path = self._path(key)
        tmp = self._write_temp(path, data)
        os.replace(tmp, path)
        return _etag(path.stat())

    def put_if_absent(self, key: str, data: bytes) -> str:
        path = self._path(key)
        tmp = self._write_temp(path, data)
        try:
            with self._locked(path):
                # os.link fails if the target exists: the check and the write are one step
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    raise PreconditionFailed(
                        f"{self.key_uri(key)} already exists (conditional create, If-None-Match: *)"
                    ) from None
                return _etag(path.stat())
        finally:
            _unlink_quietly(tmp)

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        path = self._path(key)
        tmp = self._write_temp(path, data)
        try:
            with self._locked(path):
                try:
                    current = _etag(path.stat())
                except FileNotFoundError:
                    raise PreconditionFailed(
                        f"{self.key_uri(key)} no longer exists (conditional replace, If-Match: {etag})"
                    ) from None
                if current != etag:
                    raise PreconditionFailed(
                        f"{self.key_uri(key)} changed since it was read: entity tag is {current}, "
                        f"expected {etag} (conditional replace, If-Match)"
                    )
                os.replace(tmp, path)
                return _etag(path.stat())
        finally:
            _unlink_quietly(tmp)

    def delete(self, key: str) -> None:
        path = self._path(key)
        _unlink_quietly(path)
        _unlink_quietly(path.with_name(path.name + _LOCK_SUFFIX))
        # remove folders left empty, up to the root, so a deleted checkpoint leaves no trace
        parent = path.parent
        while parent != self.root and self.root in parent.parents:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent

    def copy(self, source_key: str, target_key: str, source_store: ObjectStore | None = None) -> None:
        if source_store is None or source_store == self:
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
            self.put_bytes(target_key, source_store.get_bytes(source_key))

    # -- helpers -------------------------------------------------------------------------------

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

    @contextmanager
    def _locked(self, path: Path) -> Iterator[None]:
        lock_path = path.with_name(path.name + _LOCK_SUFFIX)
        with open(lock_path, "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _etag(st: os.stat_result) -> str:
    return f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
