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
