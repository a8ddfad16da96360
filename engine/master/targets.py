"""Where a control-API request may have the master write a savepoint: inside its savepoint root.

A savepoint request names a ``target_directory``; without a rule, anyone holding
the token could make the master write (and later restore) snapshots in any
bucket or folder its credentials reach.  A target must be the master's savepoint
root or a folder below it, on the same store: same scheme family (``s3``/``s3a``,
or local paths and ``file://``), same bucket, and no ``.`` or ``..`` segment.
"""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit


def _parts(location: str) -> tuple[str, str, list[str]]:
    """(kind, bucket, path segments) of an s3:// URI or a local path / file:// URI."""
    parsed = urlsplit(location)
    scheme = parsed.scheme.lower()
    if scheme in ("s3", "s3a"):
        return "s3", parsed.netloc, [seg for seg in parsed.path.split("/") if seg]
    if scheme == "file":
        path = unquote(parsed.path)
    elif scheme == "":
        path = location
    else:
        raise ValueError(f"target_directory {location!r} has unsupported scheme {scheme!r} (s3:// or file://)")
    raw = [seg for seg in path.replace("\\", "/").split("/") if seg]
    if any(seg in (".", "..") for seg in raw):
        return "file", "", raw  # refused by the caller, with the segment named
    return "file", "", [seg for seg in os.path.realpath(os.path.abspath(path)).split("/") if seg]


def confine_target(requested: str, roots: tuple[str, ...] | list[str]) -> str:
    """``requested`` if it is one of ``roots`` or below one; ValueError naming the roots otherwise."""
    if not isinstance(requested, str) or not requested.strip():
        raise ValueError(f"target_directory must be a non-empty location, got {requested!r}")
    kind, bucket, segments = _parts(requested.strip())
    dots = [seg for seg in segments if seg in (".", "..")]
    if dots:
        raise ValueError(f"target_directory {requested!r} contains {dots[0]!r}: name the folder without . or .. "
                         "segments")
    for root in roots:
        root_kind, root_bucket, root_segments = _parts(root)
        if (kind, bucket) == (root_kind, root_bucket) and segments[:len(root_segments)] == root_segments:
            return requested.strip()
    raise ValueError(f"target_directory {requested!r} is outside this master's savepoint root "
                     f"{' or '.join(repr(r) for r in roots) or '(none configured)'}: savepoints go under "
                     "--savepoint-dir (a sub-folder of it is fine)")
