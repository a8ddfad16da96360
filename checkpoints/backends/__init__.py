"""Storage backends behind one :class:`ObjectStore` interface, and :func:`open_store` to pick one by URI."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlparse

from checkpoints.backends.base import ObjectInfo, ObjectStore
from checkpoints.backends.local import LocalFileSystemStore
from checkpoints.backends.s3 import S3Store
from checkpoints.errors import InvalidStorageUri

__all__ = ["LocalFileSystemStore", "ObjectInfo", "ObjectStore", "S3Store", "open_store"]

_ACCEPTED = "'s3://bucket/prefix', 'file:///absolute/path' or a plain local path"


def open_store(uri: str, **options: Any) -> ObjectStore:
    """The store rooted at ``uri``; ``options`` go to :class:`S3Store` (region, endpoint_url, retries...).

    Accepted forms: ``s3://bucket/prefix`` (also ``s3a://``), ``file:///absolute/path``
    and a plain path.  Anything else is refused with the accepted forms and what was given.
    """
    if not isinstance(uri, str) or not uri.strip():
        raise InvalidStorageUri(f"storage location must be {_ACCEPTED}; got {uri!r}")
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    if scheme in ("s3", "s3a"):
        if not parsed.netloc:
            raise InvalidStorageUri(f"S3 location has no bucket; expected {_ACCEPTED}; got {uri!r}")
        return S3Store(parsed.netloc, parsed.path.strip("/"), **options)
    if options:
        raise InvalidStorageUri(
            f"options {sorted(options)} only apply to s3:// locations; got {uri!r}"
        )
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise InvalidStorageUri(f"file URI must name a local absolute path (file:///path); got {uri!r}")
        return LocalFileSystemStore(unquote(parsed.path))
    if scheme == "" or (len(scheme) == 1 and uri[1:3] in (":\\", ":/")):  # plain path (or a Windows drive)
        return LocalFileSystemStore(uri)
    raise InvalidStorageUri(f"unsupported storage scheme {scheme!r}: expected {_ACCEPTED}; got {uri!r}")

