"""Shared rules for every persisted JSON document (``_metadata``, index, status): STYLE section 4.

Each document carries ``format_version`` "<major>.<minor>".  A reader accepts any
minor version of its major (minor versions only add optional fields) and
refuses another major with :class:`UnsupportedFormatVersion`.  Missing or
mistyped fields are :class:`CorruptSnapshotError` naming the document and field.
"""

from __future__ import annotations

import json
from typing import Any

from engine.errors import CorruptSnapshotError, UnsupportedFormatVersion


def dumps(doc: dict[str, Any]) -> bytes:
    """Canonical JSON (sorted keys) so equal documents are byte-equal and hash alike."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")


def loads(data: bytes | str, what: str) -> dict[str, Any]:
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CorruptSnapshotError(f"{what} is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise CorruptSnapshotError(f"{what} must be a JSON object, found {type(doc).__name__}")
    return doc


def check_version(doc: dict[str, Any], what: str, supported: str) -> str:
    version = doc.get("format_version")
    if not isinstance(version, str) or not version.partition(".")[0].isdigit():
        raise CorruptSnapshotError(f"{what} has no valid 'format_version' (found {version!r})")
    if version.partition(".")[0] != supported.partition(".")[0]:
        raise UnsupportedFormatVersion(
            f"{what} has format_version {version!r}; this Sluice reads major version "
            f"{supported.partition('.')[0]} ({supported}). Restore it with the Sluice release that wrote it"
        )
    return version


class Fields:
    """Typed access to a decoded JSON object; every failure names ``what`` and the field."""

    def __init__(self, doc: Any, what: str) -> None:
        if not isinstance(doc, dict):
            raise CorruptSnapshotError(f"{what} must be a JSON object, found {type(doc).__name__}")
        self.doc = doc
        self.what = what

    def get(self, name: str, types: type | tuple[type, ...], *, optional: bool = False, default: Any = None) -> Any:
        if name not in self.doc or self.doc[name] is None:
            if optional:
                return default
            raise CorruptSnapshotError(f"{self.what} lacks field {name!r}")
        value = self.doc[name]
        # bool is an int subclass; a JSON true must not pass as a number
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
            raise CorruptSnapshotError(
                f"{self.what} field {name!r} must be {_names(types)}, found {type(value).__name__} {value!r:.60}"
            )
        return value

    def sub(self, name: str, index: int | None = None) -> Fields:
        value = self.get(name, dict) if index is None else self.get(name, list)[index]
        label = f"{self.what}.{name}" if index is None else f"{self.what}.{name}[{index}]"
        return Fields(value, label)


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _names(types: type | tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in _as_tuple(types))
