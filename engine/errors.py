"""Every error Sluice's engine raises, one hierarchy by area (STYLE section 5).

Messages name the parameter, the value, the rule and the way out.  Protocol
outcomes (a duplicate acknowledgement, a declined checkpoint) are values, not
exceptions; these classes are for definitions that cannot run, data that cannot
be read and invariants that broke.
"""

from __future__ import annotations


class SluiceError(Exception):
    """Base of every error raised by Sluice."""


class JobDefinitionError(SluiceError, ValueError):
    """A job, window or strategy definition is invalid; raised at build time, before any data flows."""

    def __init__(self, parameter: str, value: object, rule: str, hint: str | None = None) -> None:
        self.parameter = parameter
        self.value = value
        self.rule = rule
        self.hint = hint
        message = f"`{parameter}` {rule}; got {value!r}"
        if hint:
            message += f". {hint}"
        super().__init__(message)


class MissingTimestampError(SluiceError, ValueError):
    """A record reached an event-time window without a timestamp: assign timestamps with a WatermarkStrategy first."""


class MalformedRecordError(SluiceError, ValueError):
    """A record's field cannot be used as the job asks (an empty or non-numeric CSV cell under ``sum``): the
    record goes to the dead-letter output with this reason (``stage``) and the job carries on."""

    def __init__(self, message: str, stage: str) -> None:
        self.stage = stage
        super().__init__(message)


class StateSerializationError(SluiceError, TypeError):
    """A value put into keyed state cannot be persisted without pickle (convert it to dict/list/tuple/scalars)."""


class CorruptSnapshotError(SluiceError):
    """A snapshot is missing files, fails its checksums or contradicts its own metadata; it is refused, never partially restored."""


class UnsupportedFormatVersion(CorruptSnapshotError):
    """A persisted document carries a format version this Sluice cannot read (written by a newer release?)."""


class DrainedSnapshotError(SluiceError):
    """A snapshot was taken after event time ended (``stop --drain``): restored, every new record would be late."""

    def __init__(self, snapshot: str, reason: str) -> None:
        self.snapshot = snapshot
        self.reason = reason
        super().__init__(
            f"snapshot {snapshot} is drained: {reason}. A job restored from it starts at the end of event time: "
            "every new record is late for its event-time windows (dropped, or sent to a late side output), so "
            "none of them fires again. Restore the savepoint of a stop without --drain, or a retained checkpoint "
            "(`sluice checkpoints list <job>`); to restore this one anyway pass --allow-drained "
            "(allow_drained=True)")


class CheckpointDeclinedError(SluiceError):
    """A checkpoint could not be taken or completed; carries the CheckpointFailureReason."""


class JobMasterFenced(SluiceError):
    """Another job master took over this job's storage (its lease, or the retained-checkpoints index).

    The fenced master stops at once and writes nothing more: no checkpoint, no
    sink commit, no status.  It is never a tolerable checkpoint failure and never
    restarted in-process; only one master may run per job id (checkpoints.lease)."""


def fenced_cause(error: BaseException | None) -> JobMasterFenced | None:
    """The :class:`JobMasterFenced` in ``error``'s cause/context chain, if any."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, JobMasterFenced):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


class JobFailedError(SluiceError, RuntimeError):
    """A job failed more often than its restart or tolerable-failure policy allows."""


class IllegalStateError(SluiceError, RuntimeError):
    """An internal invariant broke: this is a bug in Sluice, report it with the message."""


class InjectedFault(SluiceError, RuntimeError):
    """A crash a test asked for (engine.runtime.local.faults.FaultPlan); the attempt fails and the job restarts."""
