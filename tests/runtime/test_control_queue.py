"""The control-request queue both runtimes share (engine/runtime/control.py): requests from any thread, served
by the job's thread at a safe point, oldest first; answered (refused) once the job has ended."""

from __future__ import annotations

import threading

import pytest

from engine.errors import JobDefinitionError
from engine.runtime.control import ControlQueue, ControlRequest


def test_requests_from_other_threads_wait_for_the_job_thread_and_are_served_oldest_first() -> None:
    woken = threading.Semaphore(0)
    queue = ControlQueue(wake=woken.release)
    futures = []
    submitters = [threading.Thread(target=lambda k=kind: futures.append(queue.submit(k, "file:///sp")))
                  for kind in ("savepoint", "cancel")]
    for t in submitters:
        t.start()
        t.join()
    assert woken.acquire(timeout=1) and woken.acquire(timeout=1)  # one wake-up per request
    assert not any(f.done() for f in futures) and queue.pending()  # nothing runs on the submitting threads

    served: list[tuple[str, str]] = []

    def handler(request: ControlRequest) -> None:
        served.append((request.kind, threading.current_thread().name))
        request.future.set_result(f"done {request.kind}")

    assert queue.serve(handler) == 2
    me = threading.current_thread().name
    assert served == [("savepoint", me), ("cancel", me)]
    assert [f.result(timeout=1) for f in futures] == ["done savepoint", "done cancel"]
    assert queue.serve(handler) == 0 and not queue.pending()


def test_an_error_of_the_handler_fails_only_its_own_request() -> None:
    queue = ControlQueue()
    failing, fine = queue.submit("stop", drain=True), queue.submit("savepoint")

    def handler(request: ControlRequest) -> None:
        if request.kind == "stop":
            assert request.drain
            raise RuntimeError("storage is down")
        request.future.set_result("file:///sp/savepoint-2")

    queue.serve(handler)
    with pytest.raises(RuntimeError, match="storage is down"):
        failing.result(timeout=1)
    assert fine.result(timeout=1) == "file:///sp/savepoint-2"


def test_a_closed_queue_answers_what_was_queued_and_every_later_request_at_once() -> None:
    queue = ControlQueue()
    queued = queue.submit("savepoint")

    def refuse(request: ControlRequest) -> None:
        request.future.set_exception(RuntimeError(f"job ended; {request.kind} did not run"))

    queue.close(refuse)
    with pytest.raises(RuntimeError, match="savepoint did not run"):
        queued.result(timeout=1)
    later = queue.submit("cancel")
    assert later.done()
    with pytest.raises(RuntimeError, match="cancel did not run"):
        later.result()
    assert not queue.pending()


@pytest.mark.parametrize("kwargs, parameter", [({"kind": "restart"}, "kind"),
                                               ({"kind": "stop", "drain": "yes"}, "drain")])
def test_a_bad_request_is_refused_naming_the_parameter(kwargs, parameter) -> None:
    with pytest.raises(JobDefinitionError) as info:
        ControlQueue().submit(**kwargs)
    assert info.value.parameter == parameter
