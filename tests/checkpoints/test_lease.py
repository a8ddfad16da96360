"""The job lease (checkpoints/lease.py) on every backend: file store, in-process moto, moto server over HTTP.

Clocks are injected: the wall clock decides liveness across masters, the monotonic clock a holder's own
validity (a pause moves it on without any renewal)."""

from __future__ import annotations

import threading
import time

import pytest
from ckpt_helpers import complete_checkpoint, write_checkpoint

from checkpoints import CheckpointStorage, RetainedCheckpointStore
from checkpoints.errors import ConcurrentIndexUpdate, JobMasterFenced, LeaseExpired, LeaseHeld, LeaseLost
from checkpoints.index import fence_index, read_index
from checkpoints.lease import LeaseKeeper, read_lease
from engine.errors import JobDefinitionError


class Clocks:
    def __init__(self) -> None:
        self.wall = 1_700_000_000_000
        self.mono = 1000.0

    def advance(self, seconds: float) -> None:
        self.wall += int(seconds * 1000)
        self.mono += seconds


def keeper(backend, clocks: Clocks, name: str, ttl_ms: int = 10_000) -> LeaseKeeper:
    return LeaseKeeper(backend.store, "job-l", ttl_ms=ttl_ms, started_by=name, holder=name,
                       wall_ms=lambda: clocks.wall, monotonic=lambda: clocks.mono)


def test_a_second_master_is_refused_while_the_first_renews_and_takes_over_after_a_release(backend):
    clocks = Clocks()
    a, b = keeper(backend, clocks, "master-a"), keeper(backend, clocks, "master-b")
    assert a.acquire().fencing_token == 1
    clocks.advance(5)
    a.renew(control_url="http://127.0.0.1:1234")
    clocks.advance(8)  # 13 s after acquiring, 8 s after the renewal: still live
    with pytest.raises(LeaseHeld) as refused:
        b.acquire()
    message = str(refused.value)
    assert "master-a" in message and "http://127.0.0.1:1234" in message and "--lease-wait" in message
    a.release()
    assert b.acquire().fencing_token == 2  # released: no wait
    with pytest.raises(LeaseLost):
        a.check("retain a checkpoint")


def test_an_expired_lease_is_taken_over_and_the_former_holder_is_fenced_on_renew_and_on_check(backend):
    clocks = Clocks()
    a, b = keeper(backend, clocks, "master-a"), keeper(backend, clocks, "master-b")
    a.acquire()
    a.check("write")
    clocks.advance(11)  # a was frozen: no renewal for longer than the ttl
    with pytest.raises(LeaseExpired) as local:
        a.check("retain checkpoint 7")
    assert "paused" in str(local.value) and "retain checkpoint 7" in str(local.value)
    assert not isinstance(local.value, JobMasterFenced)  # expired is not yet lost
    assert b.acquire().fencing_token == 2
    with pytest.raises(LeaseLost) as lost:
        a.renew()
    assert isinstance(lost.value, JobMasterFenced)
    view = read_lease(backend.store, "job-l")
    assert view is not None and view.lease.holder == "master-b" and view.lease.fencing_token == 2


def test_the_holder_stops_trusting_its_lease_a_safety_margin_before_others_may_take_it(backend):
    clocks = Clocks()
    a = keeper(backend, clocks, "master-a", ttl_ms=10_000)  # margin: 2 s
    a.acquire()
    clocks.advance(7.9)
    a.check("write")
    clocks.advance(0.2)
    with pytest.raises(LeaseExpired):
        a.check("write")
    other = keeper(backend, clocks, "master-b")
    with pytest.raises(LeaseHeld):  # 8.1 s after the renewal the others still see it live
        other.acquire()


def test_after_an_outage_longer_than_the_ttl_the_holder_renews_and_writes_again_if_nobody_took_over(backend):
    clocks = Clocks()
    a = keeper(backend, clocks, "master-a")
    a.acquire()
    clocks.advance(40)  # storage was unreachable: no renewal for four ttls
    with pytest.raises(LeaseExpired):
        a.check("write")
    a.renew()  # the conditional write still matches: nobody acquired the lease meanwhile
    a.check("write")
    assert read_lease(backend.store, "job-l").lease.fencing_token == 1


def test_waiting_outlasts_a_crashed_holders_lease_and_says_what_it_waits_for(backend, monkeypatch, caplog):
    caplog.set_level("INFO", logger="checkpoints.lease")
    clocks = Clocks()
    keeper(backend, clocks, "crashed").acquire()
    # checkpoints.lease.time is the time module: only this thread's sleeps are the lease's waits; a thread left
    # by an earlier test in the same process (a renewal, a server) sleeping for real must not move the clock
    waiter, real_sleep = threading.get_ident(), time.sleep
    monkeypatch.setattr("checkpoints.lease.time.sleep",
                        lambda s: clocks.advance(s) if threading.get_ident() == waiter else real_sleep(s))
    assert keeper(backend, clocks, "next").acquire(wait_s=30).fencing_token == 2
    assert clocks.mono - 1000.0 == pytest.approx(10, abs=1.1)
    waits = [r.getMessage() for r in caplog.records if "waiting up to" in r.getMessage()]
    assert waits and "master crashed" in waits[0] and "expires in" in waits[0], caplog.text


def test_fencing_the_index_makes_a_former_writers_next_index_write_fail(backend):
    clocks = Clocks()
    storage = CheckpointStorage(backend.store, "job-l")
    a = keeper(backend, clocks, "master-a")
    a.acquire()
    old = RetainedCheckpointStore(storage, fence=a)
    old.recover()
    complete_checkpoint(storage, old, 1)
    unfenced = RetainedCheckpointStore(storage, writer_id="no-lease")  # a writer that never checks a lease
    unfenced.recover()
    assert read_index(backend.store, "job-l").index.fencing_token == 1
    clocks.advance(11)
    b = keeper(backend, clocks, "master-b")
    b.acquire()
    fence_index(backend.store, "job-l", b.holder, b.fencing_token, clocks.wall)
    index = read_index(backend.store, "job-l").index
    assert (index.ids(), index.writer_id, index.fencing_token) == ([1], "master-b", 2)

    m2, _ = write_checkpoint(storage, 2)
    with pytest.raises(LeaseExpired):  # the local check fires first: a's lease ran out
        old.add_checkpoint(m2)
    with pytest.raises(LeaseLost):  # and its next renewal finds b's lease: fenced for good
        a.renew()
    with pytest.raises(LeaseLost):
        old.add_checkpoint(m2)
    with pytest.raises(ConcurrentIndexUpdate):  # without a lease check, the index write fails its If-Match
        unfenced.add_checkpoint(m2)
    assert read_index(backend.store, "job-l").index.ids() == [1]
    new = RetainedCheckpointStore(storage, fence=b)
    new.recover()
    new.add_checkpoint(m2)
    assert read_index(backend.store, "job-l").index.ids() == [1, 2]


def test_a_lease_shorter_than_a_second_is_a_definition_error(backend):
    with pytest.raises(JobDefinitionError, match="lease_ttl_ms"):
        LeaseKeeper(backend.store, "job-l", ttl_ms=200)


class _AnswerLost:
    """The store lands the next conditional put, then answers 412 as a retried request would."""

    def __init__(self, store) -> None:
        self._store = store
        self.armed = False

    def __getattr__(self, name):
        return getattr(self._store, name)

    def _lost(self, put, *args):
        if self.armed:
            self.armed = False
            put(*args)
            from checkpoints.errors import PreconditionFailed

            raise PreconditionFailed("412 on the retry of a request that had landed")
        return put(*args)

    def put_if_match(self, key, data, etag):
        return self._lost(self._store.put_if_match, key, data, etag)

    def put_if_absent(self, key, data):
        return self._lost(self._store.put_if_absent, key, data)


def test_a_renewal_or_acquisition_whose_answer_was_lost_is_recognised_as_our_own(backend):
    clocks = Clocks()
    store = _AnswerLost(backend.store)
    a = LeaseKeeper(store, "job-l", ttl_ms=10_000, holder="master-a", wall_ms=lambda: clocks.wall,
                    monotonic=lambda: clocks.mono)
    store.armed = True
    assert a.acquire().fencing_token == 1  # landed, answer lost: adopted, not a second token
    clocks.advance(3)
    store.armed = True
    a.renew()  # landed, answer lost: still ours
    a.check("write")
    a.renew()
    assert read_lease(backend.store, "job-l").lease.fencing_token == 1


class _HeldRenewal:
    """The store holds the first conditional put (a renewal on a slow link) until ``go`` is set."""

    def __init__(self, store) -> None:
        self._store = store
        self.entered, self.go = threading.Event(), threading.Event()
        self._first = True

    def __getattr__(self, name):
        return getattr(self._store, name)

    def put_if_match(self, key, data, etag):
        if self._first:
            self._first = False
            self.entered.set()
            self.go.wait(10)
        return self._store.put_if_match(key, data, etag)


def test_a_release_during_a_renewal_in_flight_is_a_clean_end_not_a_take_over(backend):
    # seen under load: the master's release landed between its heartbeat's read of the entity tag and its
    # write; the renewal then failed, found the lease released and fenced the master, and `sluice demo` exited 1
    clocks = Clocks()
    a = keeper(backend, clocks, "master-a")
    a.acquire()
    store = _HeldRenewal(backend.store)
    a.store = store
    errors: list[BaseException] = []

    def renew() -> None:
        try:
            a.renew()
        except BaseException as exc:  # noqa: BLE001 - the assertion below names it
            errors.append(exc)

    renewing = threading.Thread(target=renew)
    renewing.start()
    assert store.entered.wait(10)
    releasing = threading.Thread(target=a.release)
    releasing.start()
    time.sleep(0.3)  # the release is issued while the renewal's write is still on its way
    store.go.set()
    renewing.join(10)
    releasing.join(10)
    assert errors == []
    assert read_lease(backend.store, "job-l").lease.released
    a.renew()  # a heartbeat after the end is a no-op, not a take-over
    with pytest.raises(LeaseLost, match="released"):
        a.check("write")


def test_a_keeper_that_released_its_lease_renews_again_once_it_acquires_it_again(backend):
    clocks = Clocks()
    a = keeper(backend, clocks, "master-a")
    a.acquire()
    a.release()
    assert a.acquire().fencing_token == 2
    clocks.advance(5)
    a.renew()
    assert read_lease(backend.store, "job-l").lease.renewed_ms == clocks.wall
    a.check("write")
