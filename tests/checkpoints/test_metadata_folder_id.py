"""A ``_metadata`` whose checkpoint id differs from the id its folder was written for is refused (a new user's trial:
``checkpoint_id`` edited from 5 to 6 passed ``sluice validate`` and restored)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from checkpoints import load_snapshot
from engine.errors import CorruptSnapshotError

SAVEPOINT = Path(__file__).parents[1] / "runtime" / "spark" / "older_snapshots" / "spark"


def _copy(tmp_path: Path, name: str, checkpoint_id: int | None = None) -> Path:
    target = tmp_path / name
    shutil.copytree(SAVEPOINT, target)
    if checkpoint_id is not None:
        document = json.loads((target / "_metadata").read_text())
        document["checkpoint_id"] = checkpoint_id
        (target / "_metadata").write_text(json.dumps(document))
    return target


def test_the_id_its_folder_names_must_be_the_metadatas(tmp_path: Path) -> None:
    saved = json.loads((SAVEPOINT / "_metadata").read_text())["checkpoint_id"]
    load_snapshot(_copy(tmp_path / "a", f"savepoint-{saved}-abc123").as_uri())  # untouched: loads
    load_snapshot(_copy(tmp_path / "b", "any-name", saved + 1).as_uri())  # a folder named otherwise is not judged
    with pytest.raises(CorruptSnapshotError, match=f"says checkpoint {saved + 1}, but its folder savepoint-{saved}"):
        load_snapshot(_copy(tmp_path / "c", f"savepoint-{saved}-abc123", saved + 1).as_uri())
    with pytest.raises(CorruptSnapshotError, match=f"but its folder chk-{saved}"):
        load_snapshot(_copy(tmp_path / "d", f"chk-{saved}", saved + 1).as_uri())


def _sealed_copy(tmp_path: Path) -> tuple[Path, dict]:
    """The fixture savepoint rewritten in today's format (1.1, sealed), as the runtimes write it now."""
    from checkpoints.metadata import FORMAT_VERSION, seal

    target = _copy(tmp_path, "savepoint-4-sealed")
    document = json.loads((target / "_metadata").read_text())
    document["format_version"] = FORMAT_VERSION
    (target / "_metadata").write_bytes(seal(document))
    return target, json.loads((target / "_metadata").read_text())


def test_a_hand_edited_source_position_is_refused_by_the_seal(tmp_path: Path) -> None:
    """The trial's other edit: a split's position moved from 1200 to 1700 restored and skipped 500 records."""
    target, document = _sealed_copy(tmp_path)
    load_snapshot(target.as_uri())  # sealed and untouched: loads
    split = sorted(document["source_positions"])[0]
    document["source_positions"][split] += 500
    (target / "_metadata").write_text(json.dumps(document))
    with pytest.raises(CorruptSnapshotError, match="changed after it was written.*does not match its document_sha256"):
        load_snapshot(target.as_uri())


def test_a_sealed_format_without_its_seal_is_refused(tmp_path: Path) -> None:
    target, document = _sealed_copy(tmp_path)
    del document["document_sha256"]
    (target / "_metadata").write_text(json.dumps(document))
    with pytest.raises(CorruptSnapshotError, match="has no document_sha256: the field was removed"):
        load_snapshot(target.as_uri())
