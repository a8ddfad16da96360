"""``sluice savepoint --dispose PATH`` (Flink's ``flink savepoint --dispose``): deletes a savepoint's folder, and
only a savepoint's: a checkpoint, a savepoint root or a folder whose ``_metadata`` cannot be read is refused with
the reason, and nothing is deleted.  On every backend, and from the command line on a local folder and on a
moto S3 server over HTTP (reached through ``AWS_ENDPOINT_URL``, as a deployment does)."""

from __future__ import annotations

import pytest
from ckpt_helpers import keys, write_checkpoint
from click.testing import CliRunner

from checkpoints import CheckpointStorage
from checkpoints.errors import NotASavepoint
from checkpoints.savepoints import dispose_savepoint
from engine.cli import main as sluice


def test_dispose_deletes_exactly_the_savepoint_folder_and_refuses_anything_else(backend):
    savepoints = backend.make("savepoints")
    storage = CheckpointStorage(backend.store, "job-d", savepoint_store=savepoints)
    _, doomed = write_checkpoint(storage, 4, savepoint=True)
    _, kept = write_checkpoint(storage, 5, savepoint=True)
    _, checkpoint = write_checkpoint(storage, 6)
    before_checkpoints, before_kept = keys(backend.store), {k for k in keys(savepoints) if "savepoint-5" in k}
    options = backend.uri_options()

    assert dispose_savepoint(doomed.uri, **options) > 1
    assert not any(k.startswith(doomed.snapshot_dir) for k in keys(savepoints))
    assert {k for k in keys(savepoints) if "savepoint-5" in k} == before_kept  # its sibling is untouched

    with pytest.raises(NotASavepoint, match=r"is checkpoint 6 of job 'job-d', not a savepoint"):
        dispose_savepoint(checkpoint.uri, **options)
    with pytest.raises(NotASavepoint, match=r"holds no _metadata \(a savepoint root"):
        dispose_savepoint(savepoints.key_uri("job-d"), **options)
    with pytest.raises(NotASavepoint, match="holds no _metadata"):
        dispose_savepoint(doomed.uri, **options)  # already gone
    savepoints.put_bytes(kept.snapshot_dir + "_metadata", b"{not json")
    with pytest.raises(NotASavepoint, match="is not a readable savepoint"):
        dispose_savepoint(kept.uri, **options)
    assert keys(backend.store) == before_checkpoints
    assert {k for k in keys(savepoints) if "savepoint-5" in k} == before_kept


@pytest.mark.parametrize("where", ["local", "s3"])
def test_sluice_savepoint_dispose_deletes_a_savepoint_and_says_why_it_refuses_a_checkpoint(where, tmp_path, request):
    if where == "s3":
        s3 = request.getfixturevalue("moto_s3")  # tests/conftest.py: sets AWS_ENDPOINT_URL for the CLI's boto3
        from checkpoints.backends import open_store

        root = open_store(f"s3://{s3.bucket}/sluice")
    else:
        from checkpoints import LocalFileSystemStore

        root = LocalFileSystemStore(tmp_path / "sluice")
    storage = CheckpointStorage(root, "purchases")
    _, savepoint = write_checkpoint(storage, 3, savepoint=True)
    _, checkpoint = write_checkpoint(storage, 4)

    refused = CliRunner().invoke(sluice, ["savepoint", "--dispose", checkpoint.uri])
    assert refused.exit_code == 1, refused.output
    assert "is checkpoint 4 of job 'purchases', not a savepoint" in refused.output
    assert any(k.startswith(checkpoint.snapshot_dir) for k in keys(root))

    done = CliRunner().invoke(sluice, ["savepoint", "--dispose", savepoint.uri])
    assert done.exit_code == 0, done.output
    assert done.output.startswith(f"disposed of savepoint {savepoint.uri} (")
    assert not any(k.startswith(savepoint.snapshot_dir) for k in keys(root))


def test_dispose_takes_a_path_instead_of_a_job():
    both = CliRunner().invoke(sluice, ["savepoint", "purchases", "--dispose", "/tmp/x"])
    assert both.exit_code == 2 and "--dispose" in both.output and "JOB_ID" in both.output
    neither = CliRunner().invoke(sluice, ["savepoint"])
    assert neither.exit_code == 2 and "JOB_ID" in neither.output


def test_checkpoints_list_shows_savepoints_in_the_storage_root_without_savepoint_dir(tmp_path):
    """A master run without --savepoint-dir puts savepoints in its --storage root; `checkpoints list` only looked
    in --savepoint-dir, so a savepoint just taken was not listed."""
    import json

    from checkpoints import LocalFileSystemStore

    root = LocalFileSystemStore(tmp_path / "sluice")
    storage = CheckpointStorage(root, "purchases")  # no savepoint store: savepoints go to the storage root
    _, savepoint = write_checkpoint(storage, 3, savepoint=True)

    listed = CliRunner().invoke(sluice, ["checkpoints", "list", "purchases", "--storage", root.key_uri(""), "--json"])
    human = CliRunner().invoke(sluice, ["checkpoints", "list", "purchases", "--storage", root.key_uri("")])

    assert listed.exit_code == 0, listed.output
    assert [s["uri"] for s in json.loads(listed.stdout)["savepoints"]] == [savepoint.uri]
    assert any(line.startswith("  savepoint 3 ") and line.endswith(savepoint.uri) for line in human.output.splitlines())


def test_checkpoints_history_without_a_master_shows_savepoints_in_the_storage_root(tmp_path):
    """`checkpoints history` showed only retained checkpoints without a master: a savepoint in the storage root
    (the master's default savepoint directory) was missing."""
    import json

    from checkpoints import LocalFileSystemStore

    root = LocalFileSystemStore(tmp_path / "sluice")
    storage = CheckpointStorage(root, "purchases")
    _, savepoint = write_checkpoint(storage, 3, savepoint=True)

    shown = CliRunner().invoke(sluice, ["checkpoints", "history", "purchases", "--storage", root.key_uri(""), "--json"])
    human = CliRunner().invoke(sluice, ["checkpoints", "history", "purchases", "--storage", root.key_uri("")])

    assert shown.exit_code == 0, shown.output
    assert [s["uri"] for s in json.loads(shown.stdout)["savepoints"]] == [savepoint.uri]
    assert any(line.startswith("  savepoint 3 ") and line.endswith(savepoint.uri) for line in human.output.splitlines())
