"""Checkpoint configuration: PyFlink's ``CheckpointConfig`` setters, validated when they are called.

A bad setting fails the job definition (``JobDefinitionError``), not the first
checkpoint.  The one cross-setting rule comes from seed 003
(``InputProcessorUtils#createCheckpointBarrierHandler``): unaligned checkpoints
need barrier alignment to be meaningful, so they "cannot be used with
AT_LEAST_ONCE checkpointing mode"; whichever setter creates that combination
raises.

The config also derives the :class:`~engine.elements.CheckpointOptions` every
barrier of a periodic checkpoint or a savepoint carries (seed 003: the barrier
handler decides aligned / unaligned / alternating from them).
"""

from __future__ import annotations

import enum
import re

from engine.durations import SizeLike, non_negative_millis, positive_millis
from engine.elements import AlignmentType, CheckpointOptions, CheckpointType
from engine.errors import JobDefinitionError

#: Flink's MINIMAL_CHECKPOINT_TIME: shorter intervals or timeouts are refused.
MINIMAL_CHECKPOINT_TIME_MS = 10
DEFAULT_CHECKPOINT_TIMEOUT_MS = 10 * 60 * 1000
DEFAULT_MAX_CONCURRENT_CHECKPOINTS = 1
DEFAULT_NUM_RETAINED_CHECKPOINTS = 1
#: what PyFlink's ``set_fail_on_checkpointing_errors(False)`` sets: Java's Integer.MAX_VALUE
UNLIMITED_TOLERABLE_FAILURES = 2**31 - 1

_S3_DIR = re.compile(r"^s3a?://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$")
_FILE_DIR = re.compile(r"^file://(/.*)$")


class CheckpointingMode(enum.Enum):
    """The guarantee checkpoints give (seed 002 "Exactly Once vs. At Least Once").

    EXACTLY_ONCE aligns barriers (or persists in-flight data, unaligned);
    AT_LEAST_ONCE only tracks barriers, so records after barrier n on a fast
    channel may be in snapshot n and replayed after a restore (duplicates).
    """

    EXACTLY_ONCE = "EXACTLY_ONCE"
    AT_LEAST_ONCE = "AT_LEAST_ONCE"


class ExternalizedCheckpointRetention(enum.Enum):
    """What happens to retained checkpoints when the job stops (Flink's ExternalizedCheckpointCleanup).

    RETAIN_ON_CANCELLATION: kept when the job is cancelled or fails, deleted when it finishes.
    DELETE_ON_CANCELLATION: kept only when the job fails, deleted when cancelled or finished.
    NO_EXTERNALIZED_CHECKPOINTS: deleted whenever the job stops (cancelled, failed, finished).
    Savepoints are never deleted by Sluice, whatever this says.
    """

    RETAIN_ON_CANCELLATION = "RETAIN_ON_CANCELLATION"
    DELETE_ON_CANCELLATION = "DELETE_ON_CANCELLATION"
    NO_EXTERNALIZED_CHECKPOINTS = "NO_EXTERNALIZED_CHECKPOINTS"

    def is_externalized(self) -> bool:
        return self is not ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS


def _int_at_least(parameter: str, value: object, minimum: int, hint: str | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise JobDefinitionError(parameter, value, f"must be an int >= {minimum}", hint)
    return value


def validate_checkpoint_storage_dir(path: object) -> str:
    """Accept ``s3://bucket/prefix`` or ``file:///absolute/path``; name both forms when refusing."""
    accepted = "Use s3://bucket/prefix or file:///absolute/path"
    if not isinstance(path, str) or not path:
        raise JobDefinitionError("checkpoint_storage_dir", path, "must be a non-empty string", accepted)
    if path.startswith(("s3://", "s3a://")):
        if not _S3_DIR.match(path):
            raise JobDefinitionError(
                "checkpoint_storage_dir", path, "is not a valid S3 URL (bucket names are 3-63 lowercase letters, digits, '.', '-')", accepted
            )
        return path.rstrip("/")
    if path.startswith("file://"):
        if not _FILE_DIR.match(path):
            raise JobDefinitionError("checkpoint_storage_dir", path, "must be an absolute file URL (three slashes)", accepted)
        return path.rstrip("/") or "file:///"
    raise JobDefinitionError("checkpoint_storage_dir", path, "must start with s3:// or file://", accepted)


class CheckpointConfig:
    """PyFlink's ``env.get_checkpoint_config()``: every setter validates and returns nothing, as PyFlink's do.

    Checkpointing is disabled until an interval is set
    (``env.enable_checkpointing(interval_ms)`` or :meth:`set_checkpoint_interval`).
    """

    def __init__(self) -> None:
        self._interval_ms: int | None = None
        self._mode = CheckpointingMode.EXACTLY_ONCE
        self._min_pause_ms = 0
        self._timeout_ms = DEFAULT_CHECKPOINT_TIMEOUT_MS
        self._max_concurrent = DEFAULT_MAX_CONCURRENT_CHECKPOINTS
        self._tolerable_failures = 0
        #: whether the job chose the number (a job master applies its own default otherwise)
        self._tolerable_failures_set = False
        self._unaligned = False
        self._aligned_timeout_ms = 0
        self._storage_dir: str | None = None
        self._retention = ExternalizedCheckpointRetention.NO_EXTERNALIZED_CHECKPOINTS
        self._num_retained = DEFAULT_NUM_RETAINED_CHECKPOINTS
        self._force_unaligned = False

    # -- interval and mode -------------------------------------------------------------------
    def set_checkpoint_interval(self, checkpoint_interval: SizeLike) -> None:
        ms = positive_millis(checkpoint_interval, "checkpoint_interval")
        if ms < MINIMAL_CHECKPOINT_TIME_MS:
            raise JobDefinitionError("checkpoint_interval", checkpoint_interval,
                                     f"must be at least {MINIMAL_CHECKPOINT_TIME_MS} ms")
        self._interval_ms = ms

    def get_checkpoint_interval(self) -> int:
        """The interval in ms, or -1 when checkpointing is disabled (as PyFlink reports it)."""
        return -1 if self._interval_ms is None else self._interval_ms

    def is_checkpointing_enabled(self) -> bool:
        return self._interval_ms is not None

    def disable_checkpointing(self) -> None:
        self._interval_ms = None

    def set_checkpointing_mode(self, checkpointing_mode: CheckpointingMode) -> None:
        if not isinstance(checkpointing_mode, CheckpointingMode):
            raise JobDefinitionError("checkpointing_mode", checkpointing_mode,
                                     "must be CheckpointingMode.EXACTLY_ONCE or CheckpointingMode.AT_LEAST_ONCE")
        if checkpointing_mode is CheckpointingMode.AT_LEAST_ONCE and self._unaligned:
            raise self._unaligned_with_at_least_once("checkpointing_mode", checkpointing_mode)
        self._mode = checkpointing_mode

    def get_checkpointing_mode(self) -> CheckpointingMode:
        return self._mode

    # -- pacing ------------------------------------------------------------------------------
    def set_min_pause_between_checkpoints(self, min_pause_between_checkpoints: SizeLike) -> None:
        self._min_pause_ms = non_negative_millis(min_pause_between_checkpoints, "min_pause_between_checkpoints")

    def get_min_pause_between_checkpoints(self) -> int:
        return self._min_pause_ms

    def set_checkpoint_timeout(self, checkpoint_timeout: SizeLike) -> None:
        ms = positive_millis(checkpoint_timeout, "checkpoint_timeout")
        if ms < MINIMAL_CHECKPOINT_TIME_MS:
            raise JobDefinitionError("checkpoint_timeout", checkpoint_timeout,
                                     f"must be at least {MINIMAL_CHECKPOINT_TIME_MS} ms")
        self._timeout_ms = ms

    def get_checkpoint_timeout(self) -> int:
        return self._timeout_ms

    def set_max_concurrent_checkpoints(self, max_concurrent_checkpoints: int) -> None:
        self._max_concurrent = _int_at_least("max_concurrent_checkpoints", max_concurrent_checkpoints, 1)

    def get_max_concurrent_checkpoints(self) -> int:
        return self._max_concurrent

    def set_tolerable_checkpoint_failure_number(self, tolerable_checkpoint_failure_number: int) -> None:
        self._tolerable_failures = _int_at_least(
            "tolerable_checkpoint_failure_number", tolerable_checkpoint_failure_number, 0,
            "0 fails the job on the first checkpoint failure that counts")
        self._tolerable_failures_set = True

    def is_tolerable_checkpoint_failure_number_set(self) -> bool:
        return self._tolerable_failures_set

    def get_tolerable_checkpoint_failure_number(self) -> int:
        return self._tolerable_failures

    # -- alignment ---------------------------------------------------------------------------
    def enable_unaligned_checkpoints(self, enabled: bool = True) -> None:
        if not isinstance(enabled, bool):
            raise JobDefinitionError("enabled", enabled, "must be a bool")
        if enabled and self._mode is CheckpointingMode.AT_LEAST_ONCE:
            raise self._unaligned_with_at_least_once("unaligned_checkpoints", enabled)
        self._unaligned = enabled

    def disable_unaligned_checkpoints(self) -> None:
        self._unaligned = False

    def is_unaligned_checkpoints_enabled(self) -> bool:
        return self._unaligned

    def set_aligned_checkpoint_timeout(self, aligned_checkpoint_timeout: SizeLike) -> None:
        """Start checkpoints aligned and switch to unaligned once barriers are this late (0: always unaligned)."""
        self._aligned_timeout_ms = non_negative_millis(aligned_checkpoint_timeout, "aligned_checkpoint_timeout")

    def get_aligned_checkpoint_timeout(self) -> int:
        return self._aligned_timeout_ms

    @staticmethod
    def _unaligned_with_at_least_once(parameter: str, value: object) -> JobDefinitionError:
        return JobDefinitionError(
            parameter, value,
            "cannot combine unaligned checkpoints with CheckpointingMode.AT_LEAST_ONCE (seed 003)",
            "Use EXACTLY_ONCE with unaligned checkpoints, or disable unaligned checkpoints")

    # -- PyFlink's other names for the settings above (issue 19) -----------------------------
    def set_alignment_timeout(self, alignment_timeout: SizeLike) -> None:
        """PyFlink's deprecated name of :meth:`set_aligned_checkpoint_timeout`."""
        self._aligned_timeout_ms = non_negative_millis(alignment_timeout, "alignment_timeout")

    def get_alignment_timeout(self) -> int:
        return self.get_aligned_checkpoint_timeout()

    def set_force_unaligned_checkpoints(self, force_unaligned_checkpoints: bool = True) -> None:
        """Flink forces unaligned checkpoints onto edges it would otherwise keep aligned (iteration feedback,
        custom partitioners), whose in-flight data it cannot redistribute on rescale.  Sluice restores in-flight
        data only at the same parallelism (rescaling from an unaligned checkpoint is refused), so every edge,
        ``partition_custom``'s included, already takes unaligned checkpoints when they are enabled: the flag is
        kept and reported, and changes nothing."""
        if not isinstance(force_unaligned_checkpoints, bool):
            raise JobDefinitionError("force_unaligned_checkpoints", force_unaligned_checkpoints, "must be a bool")
        self._force_unaligned = force_unaligned_checkpoints

    def is_force_unaligned_checkpoints(self) -> bool:
        return self._force_unaligned

    def set_fail_on_checkpointing_errors(self, fail_on_checkpointing_errors: bool) -> None:
        """PyFlink's deprecated switch, as PyFlink maps it: True tolerates no checkpoint failure (0), False
        tolerates any number (2147483647, Java's Integer.MAX_VALUE): checkpoints fail, the job goes on."""
        if not isinstance(fail_on_checkpointing_errors, bool):
            raise JobDefinitionError("fail_on_checkpointing_errors", fail_on_checkpointing_errors, "must be a bool")
        tolerated = 0 if fail_on_checkpointing_errors else UNLIMITED_TOLERABLE_FAILURES
        self.set_tolerable_checkpoint_failure_number(tolerated)

    def is_fail_on_checkpointing_errors(self) -> bool:
        return self._tolerable_failures == 0

    # -- storage and retention ---------------------------------------------------------------
    def set_checkpoint_storage_dir(self, checkpoint_path: str) -> None:
        self._storage_dir = validate_checkpoint_storage_dir(checkpoint_path)

    def get_checkpoint_storage_dir(self) -> str | None:
        return self._storage_dir

    def set_externalized_checkpoint_retention(self, retention: ExternalizedCheckpointRetention) -> None:
        if not isinstance(retention, ExternalizedCheckpointRetention):
            raise JobDefinitionError("externalized_checkpoint_retention", retention,
                                     "must be an ExternalizedCheckpointRetention member",
                                     "RETAIN_ON_CANCELLATION, DELETE_ON_CANCELLATION or NO_EXTERNALIZED_CHECKPOINTS")
        self._retention = retention

    #: PyFlink's older spelling
    enable_externalized_checkpoints = set_externalized_checkpoint_retention

    def get_externalized_checkpoint_retention(self) -> ExternalizedCheckpointRetention:
        return self._retention

    def is_externalized_checkpoints_enabled(self) -> bool:
        return self._retention.is_externalized()

    def set_num_retained_checkpoints(self, num_retained_checkpoints: int) -> None:
        self._num_retained = _int_at_least("num_retained_checkpoints", num_retained_checkpoints, 1)

    def get_num_retained_checkpoints(self) -> int:
        return self._num_retained

    # -- derived -----------------------------------------------------------------------------
    def validate(self) -> None:
        """Re-check the cross-setting rule (setters already enforce it; runtimes call this before starting)."""
        if self._unaligned and self._mode is CheckpointingMode.AT_LEAST_ONCE:
            raise self._unaligned_with_at_least_once("unaligned_checkpoints", True)

    def checkpoint_options(self) -> CheckpointOptions:
        """Options of a periodic checkpoint's barrier (seed 003's handler selection, per checkpoint).

        AT_LEAST_ONCE -> tracker; EXACTLY_ONCE aligned; unaligned with a 0 timeout starts
        unaligned; unaligned with a positive timeout starts aligned and may switch.
        """
        if self._mode is CheckpointingMode.AT_LEAST_ONCE:
            return CheckpointOptions(CheckpointType.CHECKPOINT, AlignmentType.AT_LEAST_ONCE)
        if not self._unaligned:
            return CheckpointOptions(CheckpointType.CHECKPOINT, AlignmentType.ALIGNED)
        if self._aligned_timeout_ms == 0:
            return CheckpointOptions(CheckpointType.CHECKPOINT, AlignmentType.UNALIGNED)
        return CheckpointOptions(CheckpointType.CHECKPOINT, AlignmentType.ALIGNED, self._aligned_timeout_ms)

    def savepoint_options(self, checkpoint_type: CheckpointType = CheckpointType.SAVEPOINT) -> CheckpointOptions:
        """Savepoints are always aligned (FORCED_ALIGNED), never switched to unaligned (seed 003)."""
        if not checkpoint_type.is_savepoint():
            raise JobDefinitionError("checkpoint_type", checkpoint_type, "must be a savepoint type")
        if self._mode is CheckpointingMode.AT_LEAST_ONCE:
            return CheckpointOptions(checkpoint_type, AlignmentType.AT_LEAST_ONCE)
        return CheckpointOptions(checkpoint_type, AlignmentType.FORCED_ALIGNED)

    def __repr__(self) -> str:
        return (f"CheckpointConfig(interval_ms={self.get_checkpoint_interval()}, mode={self._mode.name}, "
                f"min_pause_ms={self._min_pause_ms}, timeout_ms={self._timeout_ms}, "
                f"max_concurrent={self._max_concurrent}, tolerable_failures={self._tolerable_failures}, "
                f"unaligned={self._unaligned}, aligned_timeout_ms={self._aligned_timeout_ms}, "
                f"storage_dir={self._storage_dir!r}, retention={self._retention.name}, "
                f"num_retained={self._num_retained})")
