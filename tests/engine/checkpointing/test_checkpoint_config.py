"""CheckpointConfig: PyFlink's setters, validated at definition time."""

from __future__ import annotations

import pytest

from engine.api.time import Duration
from engine.checkpointing.config import CheckpointConfig, CheckpointingMode, ExternalizedCheckpointRetention
from engine.checkpointing.job_status import JobStatus
from engine.checkpointing.properties import CheckpointProperties
from engine.elements import AlignmentType
from engine.errors import JobDefinitionError


def test_unaligned_checkpoints_with_at_least_once_are_refused_whichever_is_set_first():
    c = CheckpointConfig()
    c.set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE)
    with pytest.raises(JobDefinitionError) as err:
        c.enable_unaligned_checkpoints()
    assert err.value.parameter == "unaligned_checkpoints"
    c = CheckpointConfig()
    c.enable_unaligned_checkpoints()
    with pytest.raises(JobDefinitionError) as err:
        c.set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE)
    assert err.value.parameter == "checkpointing_mode"


@pytest.mark.parametrize("path", ["s3://my-bucket/jobs/a", "s3://my-bucket", "file:///tmp/checkpoints"])
def test_checkpoint_storage_dir_accepts_s3_and_absolute_file_urls(path):
    c = CheckpointConfig()
    c.set_checkpoint_storage_dir(path)
    assert c.get_checkpoint_storage_dir() == path


@pytest.mark.parametrize("path", ["/tmp/x", "file://relative/x", "s3://", "s3://Bad_Bucket/x", "hdfs:///x", ""])
def test_checkpoint_storage_dir_refuses_other_forms_and_names_the_accepted_ones(path):
    with pytest.raises(JobDefinitionError) as err:
        CheckpointConfig().set_checkpoint_storage_dir(path)
    assert "s3://bucket/prefix or file:///absolute/path" in str(err.value)


def test_setters_validate_their_values():
    c = CheckpointConfig()
    for setter, bad in [("set_checkpoint_interval", 5), ("set_checkpoint_timeout", 0),
                        ("set_max_concurrent_checkpoints", 0), ("set_tolerable_checkpoint_failure_number", -1),
                        ("set_min_pause_between_checkpoints", -1), ("set_num_retained_checkpoints", 0),
                        ("set_aligned_checkpoint_timeout", -5), ("set_externalized_checkpoint_retention", "RETAIN")]:
        with pytest.raises(JobDefinitionError):
            getattr(c, setter)(bad)
    c.set_aligned_checkpoint_timeout(Duration.of_seconds(2))
    assert c.get_aligned_checkpoint_timeout() == 2_000
    assert not c.is_checkpointing_enabled() and c.get_checkpoint_interval() == -1


def test_barrier_options_follow_mode_unaligned_and_timeout():
    c = CheckpointConfig()
    assert c.checkpoint_options().alignment is AlignmentType.ALIGNED
    c.enable_unaligned_checkpoints()
    assert c.checkpoint_options().alignment is AlignmentType.UNALIGNED
    c.set_aligned_checkpoint_timeout(100)
    options = c.checkpoint_options()
    assert options.alignment is AlignmentType.ALIGNED and options.aligned_checkpoint_timeout_ms == 100
    assert c.savepoint_options().alignment is AlignmentType.FORCED_ALIGNED


@pytest.mark.parametrize("retention,kept_on", [
    (ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION, {JobStatus.CANCELED, JobStatus.FAILED, JobStatus.SUSPENDED}),
    (ExternalizedCheckpointRetention.DELETE_ON_CANCELLATION, {JobStatus.FAILED, JobStatus.SUSPENDED}),
    (ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS, set()),
])
def test_retention_decides_which_endings_keep_a_checkpoint_and_savepoints_are_always_kept(retention, kept_on):
    props = CheckpointProperties.for_checkpoint(retention)
    assert {s for s in JobStatus if not props.should_discard_on_shutdown(s)} == kept_on
    savepoint = CheckpointProperties.for_savepoint()
    assert not any(savepoint.should_discard_on_shutdown(s) for s in JobStatus)
    assert savepoint.forced and not savepoint.can_be_subsumed()
