"""The object-store interface every checkpoint backend implements (ARCHITECTURE section 6 "Backends").

The engine and the checkpoint package talk only to :class:`ObjectStore`; boto3
lives in :mod:`checkpoints.backends.s3` alone.  Keys are ``/``-separated and
relative to the store's root (its bucket prefix or directory).

Contract, checked by ``tests/checkpoints/test_backends.py`` for every backend:

- ``put_bytes`` replaces the object atomically: a reader sees the old or the
  new content, never a torn one.
- ``put_if_absent`` / ``put_if_match`` are compare-and-set: exactly one of two
  racing writers wins, the other gets :class:`PreconditionFailed`.  They return
  the new entity tag.  This is what fences two job masters on the index.
- ``get_bytes`` / ``head`` of a missing key raise :class:`ObjectNotFound`.
- ``list`` yields every object under a prefix, in key order, paginating
  internally; ``delete`` of a missing key is not an error (S3 semantics).

A store must be safe to send to another process (a Spark executor): it holds
configuration only and creates any client lazily in the process that uses it.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Iterable, Iterator
from checkpoints.errors import ObjectNotFound, StorageUnavailable


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """What ``head`` and ``list`` tell about one object."""

    key: str
    size: int
    etag: str
    last_modified_ms: int


class ObjectStore(abc.ABC):
    """Minimal blob store with conditional writes; see the module docstring for the contract."""

    #: ``s3://bucket/prefix`` or ``file:///path``: where the store's root is, for messages and URIs
    @property
    @abc.abstractmethod
    def uri(self) -> str: ...

    @abc.abstractmethod
    def get_bytes(self, key: str) -> bytes: ...

    @abc.abstractmethod
    def get_range(self, key: str, start: int, length: int) -> bytes:
        """``length`` bytes from offset ``start`` (fewer at the end of the object)."""

    def iter_chunks(self, key: str, chunk_size: int = 8 << 20, size: int | None = None) -> Iterator[bytes]:
        """The object in chunks, so a checksum can be verified without holding a large file in memory."""
        size = self.head(key).size if size is None else size
        offset = 0
        while offset < size:
            chunk = self.get_range(key, offset, min(chunk_size, size - offset))
            if not chunk:
                break
            offset += len(chunk)
            yield chunk

    @abc.abstractmethod
    def put_bytes(self, key: str, data: bytes) -> str:
        """Write ``data`` (replacing any object) and return its entity tag."""

    @abc.abstractmethod
    def put_if_absent(self, key: str, data: bytes) -> str:
        """Create ``key`` only if it does not exist; :class:`PreconditionFailed` otherwise."""

    @abc.abstractmethod
    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        """Replace ``key`` only if its entity tag is still ``etag``; :class:`PreconditionFailed` otherwise
        (also when the object was deleted meanwhile)."""

    @abc.abstractmethod
    def head(self, key: str) -> ObjectInfo: ...

    def exists(self, key: str) -> bool:
        try:
            self.head(key)
        except ObjectNotFound:
            return False
        return True

    @abc.abstractmethod
    def list(self, prefix: str = "") -> Iterator[ObjectInfo]: ...

    @abc.abstractmethod
    def delete(self, key: str) -> None: ...

    def delete_unfinished_writes(self, prefix: str = "") -> int:
        """Delete what writes cut short by a killed process left under ``prefix`` (invisible to ``list``);
        call only while nobody writes there.  Stores whose writes are atomic have nothing to delete."""
        return 0

    def delete_many(self, keys: Iterable[str]) -> int:
        """Delete every key (missing ones are ignored); returns how many were asked for."""
        count = 0
        for key in keys:
            self.delete(key)
            count += 1
        return count

    @abc.abstractmethod
    def copy(self, source_key: str, target_key: str, source_store: ObjectStore | None = None) -> None:
        """Copy an object; server-side when both keys live in the same backend, else through this process."""

    def get_with_etag(self, key: str, attempts: int = 5) -> tuple[bytes, str]:
        """The object's bytes and the entity tag that describes them, for a conditional write over what was read:
        head, get, head again, retried while a write lands in between (:class:`StorageUnavailable` after
        ``attempts``); :class:`ObjectNotFound` when there is none."""
        for _ in range(attempts):
            before = self.head(key)
            data = self.get_bytes(key)
            if self.head(key).etag == before.etag:
                return data, before.etag
        raise StorageUnavailable(f"{self.key_uri(key)} kept changing while it was read")

    def key_uri(self, key: str) -> str:
        return self.uri.rstrip("/") + "/" + key
