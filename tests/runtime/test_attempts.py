"""The shared restart loop (engine/runtime/attempts.py) driven directly with fake attempts.

The runtimes' own restart tests (tests/runtime/local/test_recovery.py, tests/runtime/spark/
test_spark_restart_recovery.py, test_spark_restart_strategy.py) run it with real jobs; these pin the
loop's rules one by one: restarts counted against the strategy, its delay waited, the restore point
(newest retained checkpoint that reads, the run's start when none), the end states and the end status.
"""

from __future__ import annotations

import pytest

from checkpoints.errors import StorageUnavailable
from engine.api.restart import RestartStrategies
from engine.checkpointing.job_status import JobStatus
from engine.clock import ManualClock
from engine.errors import CorruptSnapshotError, JobFailedError, JobMasterFenced
from engine.runtime.attempts import Attempts, RestartPoint


class FakeRun:
    """Attempts whose outcomes are scripted: each ``outcomes`` item is an end state, or an exception raised.
    ``retained``: checkpoint id -> what loading it does (a value, or an exception, or a list of those: one
    per read); ``start_failures``: build number -> the exception that build raises."""

    def __init__(self, outcomes: list, retained: dict | None = None, restarts: int = 3, delay_ms: int = 100,
                 committed: tuple[int, ...] = (), start_failures: dict | None = None, **options) -> None:
        self.outcomes = list(outcomes)
        self.retained = dict(retained or {})
        #: start call number (1 for the first) -> the exception that call raises
        self.start_failures = dict(start_failures or {})
        self.start_calls = 0
        self.started: list[RestartPoint | None] = []
        self.ended: list[tuple[int, str | None]] = []
        self.end_statuses: list[JobStatus | None] = []
        self.loads: list[int] = []
        self.clock = ManualClock(0)
        self.attempts = Attempts(
            "fake", RestartStrategies.fixed_delay_restart(restarts, delay_ms), self.clock,
            start=self.start, run=self.run, end=self.end, load=self.load,
            candidates=lambda: [(cid, cid) for cid in sorted(self.retained, reverse=True)],
            committed=lambda cid: ["s3://out/"] if cid in committed else [],
            on_end=self.end_statuses.append, **options)

    def start(self, choice: RestartPoint | None) -> int:
        self.start_calls += 1
        if self.start_calls in self.start_failures:
            raise self.start_failures[self.start_calls]
        self.started.append(choice)
        return len(self.started)

    def run(self, attempt: int) -> str:
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def end(self, attempt: int, failure: Exception | None) -> None:
        self.ended.append((attempt, None if failure is None else str(failure)))

    def load(self, cid: int) -> str:
        self.loads.append(cid)
        reads = self.retained[cid]
        result = reads.pop(0) if isinstance(reads, list) else reads
        if isinstance(result, Exception):
            raise result
        return result


def test_failed_attempts_restart_until_one_finishes_waiting_the_strategys_delay():
    run = FakeRun([ValueError("one"), ValueError("two"), "finished"], restarts=2, delay_ms=250)
    assert run.attempts.run() == 3
    a = run.attempts
    assert (a.state, a.attempt, a.restarts) == ("finished", 3, 2)
    assert run.ended == [(1, "one"), (2, "two"), (3, None)]
    assert run.started == [None, None, None]  # nothing retained: each attempt starts from the run's start
    assert run.clock.now_ms() == 500
    assert a.failures == ["ValueError: one", "ValueError: two"]
    assert run.end_statuses == [JobStatus.FINISHED]


def test_the_run_fails_when_the_strategy_allows_no_more_restarts():
    run = FakeRun([ValueError("one"), KeyError("two"), "finished"], restarts=1)
    with pytest.raises(JobFailedError) as failed:
        run.attempts.run()
    assert str(failed.value) == ("job 'fake' failed after 1 restart(s) (restart strategy allows 1): "
                                 "KeyError: 'two'")
    assert isinstance(failed.value.__cause__, KeyError)
    assert (run.attempts.state, run.attempts.attempt, run.attempts.restarts) == ("failed", 2, 1)
    assert run.ended == [(1, "one"), (2, "'two'")]
    assert run.end_statuses == [JobStatus.FAILED]  # retention is applied once, when the whole run ends


def test_a_fenced_master_is_never_restarted_whatever_the_strategy_allows():
    fenced = RuntimeError("checkpoint 4 not written")
    fenced.__cause__ = JobMasterFenced("another master holds the lease")
    run = FakeRun([fenced, "finished"], restarts=5)
    with pytest.raises(JobFailedError, match="failed after 0 restart"):
        run.attempts.run()
    assert (run.attempts.attempt, run.attempts.restarts, run.clock.now_ms()) == (1, 0, 0)


def test_a_restart_passes_over_an_unreadable_checkpoint_and_waits_out_unreachable_storage():
    run = FakeRun([ValueError("one"), ValueError("two"), "finished"], delay_ms=10,
                  retained={1: "state@1", 2: CorruptSnapshotError("chk-2: checksum mismatch")})
    run.attempts.run()
    assert [c and (c.checkpoint_id, c.loaded) for c in run.started] == [None, (1, "state@1"), (1, "state@1")]
    # storage down for one read, then the same checkpoint is read again after the backoff
    run = FakeRun([ValueError("one"), "stopped"], delay_ms=10,
                  retained={3: [StorageUnavailable("503"), "state@3"]})
    run.attempts.run()
    assert run.loads == [3, 3]
    assert run.started[1] == RestartPoint(3, 3, "state@3")
    assert run.clock.now_ms() == 20  # the attempt's restart, then the unreachable read
    assert (run.attempts.state, run.end_statuses) == ("stopped", [JobStatus.FINISHED])


def test_an_unreadable_checkpoint_whose_output_a_sink_committed_fails_the_run():
    run = FakeRun([ValueError("one"), "finished"], committed=(2,),
                  retained={1: "state@1", 2: CorruptSnapshotError("chk-2: gone")})
    with pytest.raises(CorruptSnapshotError, match="exactly-once sinks already committed its output"):
        run.attempts.run()
    assert run.attempts.state == "failed" and run.end_statuses == [JobStatus.FAILED]


@pytest.mark.parametrize("state,status", [("cancelled", JobStatus.CANCELED), ("stopped", JobStatus.FINISHED),
                                          ("running", None)])
def test_the_end_status_follows_how_the_last_attempt_ended(state, status):
    run = FakeRun([state])
    run.attempts.run()
    assert (run.attempts.state, run.end_statuses) == (state, [status])


def test_a_restarted_attempt_that_cannot_be_built_restarts_again_only_when_allowed():
    run = FakeRun([ValueError("one"), "finished"], start_failures={2: OSError("sink cannot re-commit")},
                  restart_when_start_fails=True)
    run.attempts.run()
    assert (run.attempts.state, run.attempts.attempt, run.attempts.restarts) == ("finished", 2, 2)
    assert run.attempts.failures == ["ValueError: one", "OSError: sink cannot re-commit"]

    strict = FakeRun([ValueError("one"), "finished"], start_failures={2: OSError("down")})
    with pytest.raises(OSError, match="down"):
        strict.attempts.run()
    assert strict.attempts.state == "failed" and strict.end_statuses == [JobStatus.FAILED]


def test_a_first_attempt_that_cannot_be_built_fails_the_run_without_a_restart():
    run = FakeRun(["finished"], start_failures={1: CorruptSnapshotError("savepoint unreadable")},
                  restart_when_start_fails=True)
    with pytest.raises(CorruptSnapshotError):
        run.attempts.run()
    assert (run.attempts.state, run.attempts.attempt, run.attempts.restarts) == ("failed", 0, 0)
