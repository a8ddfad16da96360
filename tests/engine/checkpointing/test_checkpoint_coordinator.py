"""CheckpointCoordinator (seed 001): pre-checks, ack outcomes, timeout, subsumption, retention, restart."""

from __future__ import annotations

import pytest
from checkpoint_harness import ALL_TASKS, JOB, SOURCES, Harness

from engine.checkpointing.checkpoint_id_counter import StandaloneCheckpointIDCounter
from engine.checkpointing.completed_checkpoint_store import StandaloneCompletedCheckpointStore
from engine.checkpointing.config import CheckpointConfig, CheckpointingMode
from engine.checkpointing.failure_reason import CheckpointFailureReason
from engine.checkpointing.job_status import JobStatus
from engine.checkpointing.pending_checkpoint import TaskAcknowledgeResult
from engine.checkpointing.task_state import TaskStateSnapshot
from engine.elements import AlignmentType, CheckpointType
from engine.errors import CheckpointDeclinedError, IllegalStateError, JobFailedError

R = TaskAcknowledgeResult


def reason_of(promise) -> CheckpointFailureReason:
    assert promise.is_failed(), promise
    error = promise.exception()
    assert isinstance(error, CheckpointDeclinedError)
    return error.reason


def config(**settings) -> CheckpointConfig:
    c = CheckpointConfig()
    c.set_checkpoint_interval(settings.pop("interval", 100))
    c.set_checkpoint_timeout(settings.pop("timeout", 1_000))
    for name, value in settings.items():
        getattr(c, f"set_{name}")(value)
    return c


# -- triggering and pre-checks ----------------------------------------------------------------

def test_a_triggered_checkpoint_asks_every_source_task_to_inject_the_barrier_with_the_coordinators_time():
    h = Harness()
    h.coordinator.trigger_checkpoint()
    triggers = h.gateway.of("trigger")
    assert [(c[1], c[2], c[3]) for c in triggers] == [("src-0", 1, 1_000), ("src-1", 1, 1_000)]
    assert triggers[0][4].alignment is AlignmentType.ALIGNED
    pending = h.coordinator.get_pending_checkpoints()[1]
    assert pending.not_yet_acknowledged_tasks() == frozenset(ALL_TASKS)


def test_the_gateway_learns_a_savepoints_target_before_any_barrier_is_injected():
    """A source snapshots, and its upload starts, inside ``trigger_checkpoint``: a runtime that learnt the
    savepoint's target only after the trigger returned wrote task state to the checkpoint location (or kept it
    in memory when the job has no checkpoint storage), and the savepoint could not be finalized."""
    h = Harness()
    h.coordinator.trigger_savepoint("file:///savepoints")
    h.coordinator.trigger_checkpoint(force=True)
    kinds = [c[:3] if c[0] == "starting" else c[:3] for c in h.gateway.calls]
    assert kinds == [("starting", 1, "file:///savepoints"), ("trigger", "src-0", 1), ("trigger", "src-1", 1),
                     ("starting", 2, None), ("trigger", "src-0", 2), ("trigger", "src-1", 2)]


def test_a_shut_down_coordinator_refuses_to_trigger():
    h = Harness()
    h.coordinator.shutdown(JobStatus.CANCELED)
    promise = h.coordinator.trigger_checkpoint()
    assert reason_of(promise) is CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN
    assert h.gateway.of("trigger") == []


def test_too_many_concurrent_checkpoints_refuses_a_periodic_request_but_not_a_savepoint():
    h = Harness()  # max concurrent 1
    h.coordinator.trigger_checkpoint()
    refused = h.coordinator.trigger_checkpoint(is_periodic=True)
    assert reason_of(refused) is CheckpointFailureReason.TOO_MANY_CONCURRENT_CHECKPOINTS
    assert reason_of(refused).is_pre_flight()
    savepoint = h.coordinator.trigger_savepoint("file:///sp")
    assert not savepoint.is_done()
    assert h.gateway.triggered_ids() == [1, 2]
    assert h.coordinator.get_failure_manager().continuous_failure_count == 0


def test_a_user_checkpoint_request_waits_in_the_queue_until_a_checkpoint_ends():
    h = Harness()
    h.coordinator.trigger_checkpoint()
    queued = h.coordinator.trigger_checkpoint()
    assert not queued.is_done() and h.gateway.triggered_ids() == [1]
    h.ack_all(1)
    assert h.gateway.triggered_ids() == [1, 2]
    h.ack_all(2)
    assert queued.result().checkpoint_id == 2


def test_the_min_pause_since_the_last_completion_refuses_a_periodic_trigger_and_reschedules_it_after_the_delay():
    h = Harness(config(min_pause_between_checkpoints=300))
    h.coordinator.start_checkpoint_scheduler()
    h.scheduler.advance(100)                       # t=1100: periodic trigger of 1
    assert h.gateway.triggered_ids() == [1]
    h.clock.advance(10)
    h.ack_all(1)                                   # completed at t=1110
    h.scheduler.advance(90)                        # t=1200: periodic fires, min pause until 1410
    assert h.gateway.triggered_ids() == [1]
    assert h.scheduler.pending_delays_ms()[0] == 210  # rescheduled after the remaining pause
    h.scheduler.advance(209)
    assert h.gateway.triggered_ids() == [1]
    h.scheduler.advance(1)                         # t=1410
    assert h.gateway.triggered_ids() == [1, 2]
    assert h.gateway.of("trigger")[-1][3] == 1_410


def test_a_forced_checkpoint_ignores_the_min_pause():
    h = Harness(config(min_pause_between_checkpoints=10_000))
    h.coordinator.trigger_checkpoint()
    h.ack_all(1)
    assert reason_of(h.coordinator.trigger_checkpoint(is_periodic=True)) is \
        CheckpointFailureReason.MINIMUM_TIME_BETWEEN_CHECKPOINTS
    h.coordinator.trigger_checkpoint(force=True)
    assert h.gateway.triggered_ids() == [1, 2]


def test_a_task_that_is_not_running_refuses_the_trigger_without_using_an_id():
    h = Harness()
    h.gateway.not_running.add("win-0")
    promise = h.coordinator.trigger_checkpoint()
    assert reason_of(promise) is CheckpointFailureReason.NOT_ALL_REQUIRED_TASKS_RUNNING
    assert h.gateway.of("trigger") == []
    h.gateway.not_running.clear()
    h.coordinator.trigger_checkpoint()
    assert h.gateway.triggered_ids() == [1]


def test_a_trigger_that_cannot_reach_a_task_aborts_the_checkpoint():
    h = Harness(config(tolerable_checkpoint_failure_number=5))
    h.gateway.fail_trigger = True
    promise = h.coordinator.trigger_checkpoint()
    assert reason_of(promise) is CheckpointFailureReason.TRIGGER_CHECKPOINT_FAILURE
    assert h.coordinator.get_number_of_pending_checkpoints() == 0
    assert [c[2] for c in h.gateway.of("aborted")] == [1, 1, 1]


def test_the_periodic_scheduler_triggers_every_interval():
    h = Harness(config(max_concurrent_checkpoints=5))
    h.coordinator.start_checkpoint_scheduler()
    h.scheduler.advance(350)
    assert [c[3] for c in h.gateway.of("trigger") if c[1] == "src-0"] == [1_100, 1_200, 1_300]
    h.coordinator.stop_checkpoint_scheduler()
    assert h.coordinator.get_number_of_pending_checkpoints() == 0
    h.scheduler.advance(500)
    assert h.gateway.triggered_ids() == [1, 2, 3]


# -- acknowledgements ---------------------------------------------------------------------------

def test_each_ack_outcome_success_duplicate_unknown_and_discarded():
    h = Harness(config(tolerable_checkpoint_failure_number=5))
    h.coordinator.trigger_checkpoint()
    state = TaskStateSnapshot({"op": "h-src-0"})
    assert h.coordinator.receive_acknowledge_message(JOB, "src-0", 1, state) is R.SUCCESS
    assert h.coordinator.receive_acknowledge_message(JOB, "src-0", 1, state) is R.DUPLICATE
    assert h.discarder.task_states == []  # a duplicate is ignored, its handles are the ones already kept
    stranger = TaskStateSnapshot({"op": "h-stranger"})
    assert h.coordinator.receive_acknowledge_message(JOB, "stranger", 1, stranger) is R.UNKNOWN
    assert h.discarder.task_states == [(JOB, 1, "stranger", stranger)]
    assert h.coordinator.receive_decline_message(JOB, "win-0", 1)
    late = TaskStateSnapshot({"op": "h-src-1"})
    assert h.coordinator.receive_acknowledge_message(JOB, "src-1", 1, late) is R.DISCARDED
    assert (JOB, 1, "src-1", late) in h.discarder.task_states
    never = TaskStateSnapshot({"op": "h-never"})
    assert h.coordinator.receive_acknowledge_message(JOB, "src-1", 99, never) is R.UNKNOWN
    assert h.discarder.task_states[-1] == (JOB, 99, "src-1", never)


def test_aborting_a_pending_checkpoint_discards_the_state_already_acknowledged():
    h = Harness(config(tolerable_checkpoint_failure_number=5))
    promise = h.coordinator.trigger_checkpoint()
    h.ack_all(1, tasks=("src-0",))
    h.coordinator.receive_decline_message(JOB, "win-0", 1, CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION)
    assert reason_of(promise) is CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION
    assert [(c, t) for _, c, t, _ in h.discarder.task_states] == [(1, "src-0")]
    assert sorted(c[1] for c in h.gateway.of("aborted")) == sorted(ALL_TASKS)


def test_an_ack_for_another_job_is_a_loud_routing_bug():
    h = Harness()
    h.coordinator.trigger_checkpoint()
    with pytest.raises(IllegalStateError):
        h.coordinator.receive_acknowledge_message("other-job", "src-0", 1, None)


# -- completion -------------------------------------------------------------------------------

def test_completion_stores_the_checkpoint_with_source_positions_and_notifies_every_task():
    h = Harness()
    promise = h.coordinator.trigger_checkpoint()
    results = h.ack_all(1)
    assert results == [R.SUCCESS] * 3
    completed = promise.result()
    assert completed.checkpoint_id == 1 and completed.timestamp_ms == 1_000
    assert dict(completed.source_positions) == {"split-src-0": 10, "split-src-1": 10}
    assert completed.operator_states()["op-win-0"] == {"win-0": "handle-win-0-1"}
    assert h.store.get_latest_checkpoint() is completed
    assert [c[1] for c in h.gateway.of("complete")] == list(ALL_TASKS)
    assert h.gateway.of("aborted") == []
    assert h.coordinator.get_number_of_pending_checkpoints() == 0


def test_no_task_is_notified_of_completion_before_the_last_ack():
    h = Harness()
    h.coordinator.trigger_checkpoint()
    h.ack_all(1, tasks=ALL_TASKS[:-1])
    assert h.gateway.of("complete") == []


def test_a_completed_checkpoint_subsumes_older_pending_checkpoints_but_not_a_pending_savepoint():
    h = Harness(config(max_concurrent_checkpoints=5))
    first = h.coordinator.trigger_checkpoint()
    savepoint = h.coordinator.trigger_savepoint("file:///sp")
    h.coordinator.trigger_checkpoint()
    h.ack_all(3)
    assert reason_of(first) is CheckpointFailureReason.CHECKPOINT_SUBSUMED
    assert not savepoint.is_done()
    assert sorted(h.coordinator.get_pending_checkpoints()) == [2]
    assert {c[2] for c in h.gateway.of("aborted")} == {1}
    assert h.coordinator.get_failure_manager().continuous_failure_count == 0
    h.ack_all(2)
    assert savepoint.result().is_savepoint()


def test_the_store_keeps_the_n_most_recent_checkpoints_and_discards_the_oldest():
    h = Harness(num_retained=2)
    for checkpoint_id in (1, 2, 3, 4):
        h.coordinator.trigger_checkpoint()
        h.ack_all(checkpoint_id)
    assert [c.checkpoint_id for c in h.store.get_all_checkpoints()] == [3, 4]
    assert h.discarder.discarded_checkpoint_ids() == [1, 2]


def test_a_savepoint_is_never_subsumed_and_not_counted_in_retention():
    h = Harness(num_retained=2)
    for kind in ("cp", "cp", "sp", "cp"):
        promise = h.coordinator.trigger_savepoint("file:///sp") if kind == "sp" else h.coordinator.trigger_checkpoint()
        h.ack_all(h.gateway.triggered_ids()[-1])
        assert promise.result()
    ids_after_savepoint = [c.checkpoint_id for c in h.store.get_all_checkpoints()]
    assert ids_after_savepoint == [2, 4]          # savepoint 3 left the store once 4 arrived
    assert h.discarder.discarded_checkpoint_ids() == [1]   # 1 fell out of N=2; 3 was never discarded
    h.coordinator.trigger_checkpoint()
    h.ack_all(5)
    assert h.discarder.discarded_checkpoint_ids() == [1, 2]
    assert 3 not in h.discarder.discarded_checkpoint_ids()


def test_a_savepoint_counts_as_latest_while_it_is_the_newest_entry():
    h = Harness(num_retained=1)
    h.coordinator.trigger_checkpoint()
    h.ack_all(1)
    h.coordinator.trigger_savepoint("file:///sp")
    h.ack_all(2)
    assert [c.checkpoint_id for c in h.store.get_all_checkpoints()] == [1, 2]
    assert h.store.get_latest_checkpoint().is_savepoint()
    assert h.discarder.checkpoints == []


def test_savepoints_are_always_aligned_even_with_unaligned_checkpoints():
    c = config()
    c.enable_unaligned_checkpoints()
    h = Harness(c)
    h.coordinator.trigger_checkpoint()
    h.ack_all(1)
    h.coordinator.trigger_savepoint()
    options = {c[2]: c[4] for c in h.gateway.of("trigger")}
    assert options[1].alignment is AlignmentType.UNALIGNED
    assert options[2].alignment is AlignmentType.FORCED_ALIGNED
    assert options[2].checkpoint_type is CheckpointType.SAVEPOINT


def test_stop_with_savepoint_stops_periodic_checkpoints_and_resumes_them_if_the_savepoint_fails():
    h = Harness(config(tolerable_checkpoint_failure_number=5))
    h.coordinator.start_checkpoint_scheduler()
    promise = h.coordinator.trigger_synchronous_savepoint(terminate=True)
    assert not h.coordinator.is_periodic_checkpointing_started()
    options = h.gateway.of("trigger")[-1][4]
    assert options.checkpoint_type is CheckpointType.SAVEPOINT_TERMINATE
    h.coordinator.receive_decline_message(JOB, "win-0", 1)
    assert promise.is_failed()
    assert h.coordinator.is_periodic_checkpointing_started()


# -- timeout and failures -----------------------------------------------------------------------

def test_a_checkpoint_that_outlives_the_timeout_is_aborted_and_its_state_discarded():
    h = Harness(config(timeout=500, tolerable_checkpoint_failure_number=3))
    promise = h.coordinator.trigger_checkpoint()
    h.ack_all(1, tasks=("src-0", "src-1"))
    h.scheduler.advance(499)
    assert not promise.is_done()
    h.scheduler.advance(1)
    assert reason_of(promise) is CheckpointFailureReason.CHECKPOINT_EXPIRED
    assert sorted(t for _, _, t, _ in h.discarder.task_states) == ["src-0", "src-1"]
    assert {c[1] for c in h.gateway.of("aborted")} == set(ALL_TASKS)
    assert h.coordinator.receive_acknowledge_message(JOB, "win-0", 1, None) is R.DISCARDED


def test_a_completed_checkpoint_cancels_its_timeout():
    h = Harness(config(timeout=500))
    promise = h.coordinator.trigger_checkpoint()
    h.ack_all(1)
    h.scheduler.advance(1_000)
    assert promise.result().checkpoint_id == 1
    assert h.failures == []


def test_more_consecutive_failures_than_tolerable_fail_the_job_and_a_success_resets_the_count():
    h = Harness(config(timeout=100, tolerable_checkpoint_failure_number=2))
    for _ in range(2):
        h.coordinator.trigger_checkpoint()
        h.scheduler.advance(100)
    assert h.failures == []
    h.coordinator.trigger_checkpoint()
    h.ack_all(3)
    assert h.coordinator.get_failure_manager().continuous_failure_count == 0
    for _ in range(3):
        h.coordinator.trigger_checkpoint()
        h.scheduler.advance(100)
    assert len(h.failures) == 1 and isinstance(h.failures[0], JobFailedError)
    assert "CHECKPOINT_EXPIRED" in str(h.failures[0])


def test_declines_caused_by_cancellation_barriers_and_savepoint_failures_do_not_count():
    h = Harness(config(tolerable_checkpoint_failure_number=0))
    h.coordinator.trigger_checkpoint()
    h.coordinator.receive_decline_message(JOB, "win-0", 1, CheckpointFailureReason.CHECKPOINT_DECLINED_ON_CANCELLATION_BARRIER)
    h.coordinator.trigger_savepoint()
    h.coordinator.receive_decline_message(JOB, "win-0", 2, CheckpointFailureReason.CHECKPOINT_DECLINED)
    assert h.failures == []
    h.coordinator.trigger_checkpoint()
    h.coordinator.receive_decline_message(JOB, "win-0", 3, CheckpointFailureReason.CHECKPOINT_DECLINED)
    assert len(h.failures) == 1


# -- ids across restarts ------------------------------------------------------------------------

def test_checkpoint_ids_strictly_increase_and_continue_after_a_restart_from_storage():
    first = Harness()
    for checkpoint_id in (1, 2, 3):
        first.coordinator.trigger_checkpoint()
        first.ack_all(checkpoint_id)
    first.coordinator.trigger_checkpoint()          # 4 never completes: the job dies
    retained = first.store.get_all_checkpoints()
    # restart: a new coordinator over the storage's retained checkpoints, counter seeded from its max id
    restarted_store = StandaloneCompletedCheckpointStore(2, first.discarder, initial=retained)
    counter = StandaloneCheckpointIDCounter.continue_after(4)
    second = Harness(store=restarted_store, counter=counter)
    assert second.coordinator.get_latest_completed_checkpoint().checkpoint_id == 3
    second.coordinator.trigger_checkpoint()
    assert second.gateway.triggered_ids() == [5]
    # even a fresh counter never reuses an id the store holds
    third = Harness(store=StandaloneCompletedCheckpointStore(2, first.discarder, initial=retained))
    third.coordinator.trigger_checkpoint()
    assert third.gateway.triggered_ids() == [4]


def test_ids_continue_after_a_restored_snapshot_and_never_move_back():
    """Restoring savepoint 7 into a fresh job: its next checkpoint is 8 (Flink's restoreSavepoint sets the
    CheckpointIDCounter); restoring an older snapshot after ids moved on leaves the counter where it is."""
    h = Harness()
    assert h.coordinator.next_checkpoint_id() == 1
    h.coordinator.restore_checkpoint_id_counter(7)
    assert h.coordinator.next_checkpoint_id() == 8
    h.coordinator.trigger_checkpoint()
    assert h.gateway.triggered_ids() == [8]
    h.coordinator.restore_checkpoint_id_counter(3)
    assert h.coordinator.next_checkpoint_id() == 9
    with pytest.raises(IllegalStateError, match="restored_checkpoint_id"):
        h.coordinator.restore_checkpoint_id_counter(-1)


def test_shutdown_discards_checkpoints_per_retention_and_fails_pending_ones():
    c = config()
    from engine.checkpointing.config import ExternalizedCheckpointRetention as E
    c.set_externalized_checkpoint_retention(E.RETAIN_ON_CANCELLATION)
    h = Harness(c)
    h.coordinator.trigger_checkpoint()
    h.ack_all(1)
    pending = h.coordinator.trigger_checkpoint()
    h.coordinator.shutdown(JobStatus.CANCELED)
    assert reason_of(pending) is CheckpointFailureReason.CHECKPOINT_COORDINATOR_SHUTDOWN
    assert h.discarder.checkpoints == []          # retained on cancellation

    h2 = Harness()                                 # NO_EXTERNALIZED_CHECKPOINTS
    h2.coordinator.trigger_checkpoint()
    h2.ack_all(1)
    h2.coordinator.shutdown(JobStatus.CANCELED)
    assert h2.discarder.discarded_checkpoint_ids() == [1]


def test_at_least_once_checkpoints_carry_at_least_once_barriers():
    c = config()
    c.set_checkpointing_mode(CheckpointingMode.AT_LEAST_ONCE)
    h = Harness(c)
    h.coordinator.trigger_checkpoint()
    assert h.gateway.of("trigger")[0][4].alignment is AlignmentType.AT_LEAST_ONCE
    assert SOURCES == tuple(c[1] for c in h.gateway.of("trigger"))


def test_failed_checkpoints_are_counted_and_subsumed_ones_are_not():
    """Issue 18: sluice_checkpoints_total{status="failed"} needs the count the job status never had."""
    h = Harness(config(tolerable_checkpoint_failure_number=5, max_concurrent_checkpoints=2, min_pause_between_checkpoints=0))
    h.coordinator.trigger_checkpoint()
    h.coordinator.receive_decline_message(JOB, "win-0", 1, CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION)
    assert h.coordinator.num_failed_checkpoints == 1
    h.coordinator.trigger_checkpoint()  # 2 stays pending ...
    h.coordinator.trigger_checkpoint()  # ... and 3 completes: 2 is subsumed, not failed
    h.ack_all(3)
    assert h.coordinator.get_number_of_pending_checkpoints() == 0
    assert h.coordinator.num_failed_checkpoints == 1


def test_a_checkpoint_aborted_because_the_job_stops_is_info_and_still_counted_while_real_failures_warn(caplog):
    """Every `sluice stop --savepoint` logged WARNING "checkpoint N failed: Checkpoint coordinator is suspending."
    for the periodic checkpoint it cut short: nothing for the user to act on."""
    import logging

    h = Harness(config(tolerable_checkpoint_failure_number=5, max_concurrent_checkpoints=2))
    caplog.set_level(logging.DEBUG, logger="engine.checkpointing.coordinator")
    h.coordinator.trigger_checkpoint()
    h.coordinator.receive_decline_message(JOB, "win-0", 1, CheckpointFailureReason.CHECKPOINT_ASYNC_EXCEPTION)
    h.coordinator.trigger_checkpoint()  # 2 is pending when the job stops
    h.coordinator.stop_checkpoint_scheduler()

    failed = {r.checkpoint_id: (r.levelname, r.reason) for r in caplog.records if r.getMessage().startswith(
        f"job {JOB}: checkpoint") and "failed" in r.getMessage()}
    assert failed == {1: ("WARNING", "CHECKPOINT_ASYNC_EXCEPTION"), 2: ("INFO", "CHECKPOINT_COORDINATOR_SUSPEND")}
    assert h.coordinator.num_failed_checkpoints == 2  # counted, as Flink's checkpoint statistics count it
