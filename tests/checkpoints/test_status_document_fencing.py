"""The status document is written only by the lease holder: a master paused past its lease cannot publish over
the master that took the job over (the fencing the index and the lease already had; issue 17)."""

from __future__ import annotations

import pytest

from checkpoints.errors import LeaseLost
from checkpoints.status import StatusDocument, read_status, write_status


def _doc(token: int, heartbeat_ms: int) -> StatusDocument:
    return StatusDocument(job_id="job-s", heartbeat_ms=heartbeat_ms, state="RUNNING",
                          extra={"fencing_token": token, "control_url": f"http://127.0.0.1:{9000 + token}"})


def test_a_master_with_an_older_token_cannot_publish_over_the_holder(backend):
    store = backend.store
    write_status(store, _doc(1, 100), fencing_token=1)
    write_status(store, _doc(2, 200), fencing_token=2)  # the new holder replaces the old master's document
    with pytest.raises(LeaseLost) as err:
        write_status(store, _doc(1, 300), fencing_token=1)
    assert "fencing token 2" in str(err.value)
    assert read_status(store, "job-s").heartbeat_ms == 200
    write_status(store, _doc(2, 400), fencing_token=2)  # its own next write goes on
    assert read_status(store, "job-s").heartbeat_ms == 400


def test_a_master_paused_between_its_read_and_its_write_loses_to_the_new_holder(backend):
    """The old master read its own document, then paused; the new holder published meanwhile."""
    store = backend.store
    write_status(store, _doc(1, 100), fencing_token=1)

    class PausedBeforeWriting:
        def __init__(self, inner) -> None:
            self.inner, self.paused = inner, False

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def put_if_match(self, key, data, etag):
            if not self.paused:  # the new master's write lands while this one is paused
                self.paused = True
                write_status(self.inner, _doc(2, 200), fencing_token=2)
            return self.inner.put_if_match(key, data, etag)

    with pytest.raises(LeaseLost):
        write_status(PausedBeforeWriting(store), _doc(1, 300), fencing_token=1)
    assert read_status(store, "job-s").heartbeat_ms == 200


def test_a_broken_document_is_replaced_by_the_holder(backend):
    store = backend.store
    store.put_bytes("job-s/_status.json", b"not json")
    write_status(store, _doc(3, 500), fencing_token=3)
    assert read_status(store, "job-s").heartbeat_ms == 500
