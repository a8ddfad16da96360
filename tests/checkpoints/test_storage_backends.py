"""The ObjectStore contract, written once and run against the filesystem, moto in-process and moto's server."""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
HELPERS = Path(__file__).resolve().parent  # ckpt_helpers, for the child processes

from ckpt_helpers import increment_once

from checkpoints import (
    InvalidStorageUri,
    LocalFileSystemStore,
    ObjectNotFound,
    PreconditionFailed,
    S3Store,
    open_store,
)


def test_put_then_get_returns_the_same_bytes_and_head_reports_size(backend):
    store = backend.store
    etag = store.put_bytes("job/a/b.bin", b"hello world")
    assert store.get_bytes("job/a/b.bin") == b"hello world"
    info = store.head("job/a/b.bin")
    assert (info.size, info.etag) == (11, etag)
    assert store.get_range("job/a/b.bin", 6, 5) == b"world"
    assert b"".join(store.iter_chunks("job/a/b.bin", chunk_size=4)) == b"hello world"


def test_missing_objects_raise_object_not_found_which_is_a_file_not_found_error(backend):
    with pytest.raises(ObjectNotFound) as err:
        backend.store.get_bytes("job/nothing")
    assert isinstance(err.value, FileNotFoundError)
    assert "job/nothing" in str(err.value)
    with pytest.raises(FileNotFoundError):
        backend.store.head("job/nothing")
    assert backend.store.exists("job/nothing") is False


def test_put_if_absent_creates_once_and_then_refuses(backend):
    store = backend.store
    store.put_if_absent("job/_retained.json", b"v1")
    with pytest.raises(PreconditionFailed, match="already exists|PreconditionFailed"):
        store.put_if_absent("job/_retained.json", b"v2")
    assert store.get_bytes("job/_retained.json") == b"v1"


def test_put_if_match_replaces_only_the_version_that_was_read(backend):
    store = backend.store
    first = store.put_bytes("job/idx", b"v1")
    second = store.put_if_match("job/idx", b"v2", first)
    assert second != first
    with pytest.raises(PreconditionFailed):
        store.put_if_match("job/idx", b"v3", first)  # stale view
    assert store.get_bytes("job/idx") == b"v2"
    with pytest.raises(PreconditionFailed):
        store.put_if_match("job/gone", b"v1", first)  # deleted or never there


def test_list_is_recursive_ordered_and_respects_the_prefix_boundary(backend):
    store = backend.store
    for key in ["j/chk-1/a", "j/chk-1/b/c", "j/chk-10/a", "j/shared/x", "other/y"]:
        store.put_bytes(key, b"1")
    assert [i.key for i in store.list("j/chk-1/")] == ["j/chk-1/a", "j/chk-1/b/c"]
    assert [i.key for i in store.list("j/chk-1")] == ["j/chk-1/a", "j/chk-1/b/c", "j/chk-10/a"]
    assert len(list(store.list(""))) == 5
    assert list(store.list("nothing/")) == []


def test_list_paginates_beyond_one_page(s3_backend):
    store = S3Store(s3_backend.store.bucket, "pages", endpoint_url=s3_backend.endpoint_url, list_page_size=7)
    pages = []
    store.client.meta.events.register("before-call.s3.ListObjectsV2", lambda **kw: pages.append(1))
    keys = [f"j/many/{i:05d}" for i in range(30)]
    for key in keys:
        store.put_bytes(key, b"")
    assert [i.key for i in store.list("j/many/")] == keys
    assert len(pages) == 5
    assert store.delete_many(keys) == 30
    assert list(store.list("j/many/")) == []


def test_delete_and_delete_many_ignore_missing_keys_and_leave_nothing(backend):
    store = backend.store
    store.put_bytes("j/a/1", b"1")
    store.put_bytes("j/a/2", b"2")
    store.delete("j/a/1")
    store.delete("j/a/1")
    store.delete_many(["j/a/2", "j/a/3"])
    assert list(store.list("j/")) == []


def test_copy_within_a_store_and_across_stores(backend):
    store = backend.store
    other = backend.make("elsewhere")
    store.put_bytes("j/src", b"payload")
    store.copy("j/src", "j/dst")
    other.copy("j/src", "k/dst", source_store=store)
    assert store.get_bytes("j/dst") == b"payload"
    assert other.get_bytes("k/dst") == b"payload"
    with pytest.raises(ObjectNotFound):
        store.copy("j/missing", "j/x")


def test_stores_pickle_as_configuration_without_a_live_client(backend):
    store = backend.store
    store.put_bytes("j/p", b"1")  # creates the client in this process
    clone = pickle.loads(pickle.dumps(store))
    assert clone == store
    if isinstance(clone, S3Store):
        assert clone._client is None
    assert clone.get_bytes("j/p") == b"1"


def test_large_objects_go_up_in_multipart_and_read_back_whole(s3_backend):
    store = S3Store(s3_backend.store.bucket, "mp", endpoint_url=s3_backend.endpoint_url,
                    multipart_threshold=6 << 20, multipart_part_size=5 << 20)
    data = bytes(range(256)) * (45_000)  # ~11.5 MB: three parts
    calls = []
    store.client.meta.events.register("before-call.s3.UploadPart", lambda **kw: calls.append(1))
    store.put_bytes("j/big", data)
    assert len(calls) == 3
    assert store.get_bytes("j/big") == data
    with pytest.raises(PreconditionFailed):
        store.put_if_absent("j/big", data)  # conditional CompleteMultipartUpload


@pytest.mark.parametrize(
    "uri, kind, root",
    [
        ("s3://bucket-a/some/prefix/", S3Store, "s3://bucket-a/some/prefix"),
        ("s3://bucket-a", S3Store, "s3://bucket-a"),
        ("file:///tmp/sluice-x", LocalFileSystemStore, "file:///tmp/sluice-x"),
        ("/tmp/sluice-y", LocalFileSystemStore, "file:///tmp/sluice-y"),
    ],
)
def test_open_store_accepts_s3_file_and_plain_paths(uri, kind, root):
    store = open_store(uri)
    assert isinstance(store, kind)
    assert store.uri == root


@pytest.mark.parametrize("uri", ["gs://bucket/x", "s3:///no-bucket", "", "http://host/x", "file://remotehost/x"])
def test_open_store_refuses_other_forms_listing_the_accepted_ones_and_quoting_the_input(uri):
    with pytest.raises(InvalidStorageUri) as err:
        open_store(uri)
    assert repr(uri) in str(err.value)
    assert "s3://" in str(err.value) or "file:///" in str(err.value)


def test_filesystem_conditional_writes_are_safe_across_processes(tmp_path):
    """Four processes increment one counter with read / put_if_match: no update is lost."""
    root = tmp_path / "race"
    LocalFileSystemStore(root).put_bytes("counter", b"0")
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(HELPERS)!r})
        from checkpoints.backends import LocalFileSystemStore
        from ckpt_helpers import increment_once
        store = LocalFileSystemStore({str(root)!r})
        print(sum(increment_once(store, "counter") for _ in range(40)))
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=str(REPO_ROOT)) for _ in range(4)]
    wins = sum(int(p.communicate(timeout=120)[0]) for p in procs)
    assert all(p.returncode == 0 for p in procs)
    assert int(LocalFileSystemStore(root).get_bytes("counter")) == wins
    assert wins >= 40  # at least one process made progress each round


def test_a_filesystem_writer_frozen_mid_write_never_blocks_another_and_cannot_win_when_it_wakes(tmp_path):
    """Issue 17's frozen master, at the storage layer: a process stopped (SIGSTOP: a GC pause, a VM migration)
    anywhere inside its conditional writes must not hold the others up, and its write must lose when it wakes.

    A child increments a counter with read / put_if_match in a tight loop; it is frozen at random moments and
    each time this process must complete its own conditional increment within the deadline.  No increment of
    either writer is lost or doubled."""
    import os
    import random
    import signal
    import threading
    import time

    root = tmp_path / "frozen"
    store = LocalFileSystemStore(root)
    store.put_bytes("counter", b"0")
    child = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(HELPERS)!r})
        from checkpoints.backends import LocalFileSystemStore
        from ckpt_helpers import increment_once
        store = LocalFileSystemStore({str(root)!r})
        wins = 0
        while not store.exists("stop"):
            wins += increment_once(store, "counter")
        print(wins)
        """)], stdout=subprocess.PIPE, cwd=str(REPO_ROOT))

    def increment_until_it_lands() -> None:
        while not increment_once(store, "counter"):
            pass

    rng = random.Random(17)
    mine, blocked = 0, 0
    try:
        time.sleep(0.5)  # the child is in its loop
        for _ in range(60):
            time.sleep(rng.uniform(0.001, 0.02))
            os.kill(child.pid, signal.SIGSTOP)
            writer = threading.Thread(target=increment_until_it_lands, daemon=True)
            writer.start()
            writer.join(timeout=10)
            if writer.is_alive():  # held up by the frozen child: let it go so the thread can finish
                blocked += 1
                os.kill(child.pid, signal.SIGCONT)
                writer.join(timeout=30)
            else:
                os.kill(child.pid, signal.SIGCONT)
            mine += 1
        store.put_bytes("stop", b"")
        theirs = int(child.communicate(timeout=120)[0])
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
    assert blocked == 0, f"{blocked} of 60 writes waited for a frozen writer"
    assert int(store.get_bytes("counter")) == mine + theirs


def test_a_filesystem_writer_paused_between_its_check_and_its_write_loses_even_after_pruning(tmp_path, monkeypatch):
    """The versions a conditional write was judged against may be pruned while the writer is paused (say 40
    writes later): its link then lands on a free name, and it must still lose rather than report a win."""
    store = LocalFileSystemStore(tmp_path / "paused")
    store.put_bytes("job/_lease.json", b"0")  # a plain file, as a store before versions wrote it: version 0
    etag = store.head("job/_lease.json").etag
    real_write_temp = store._write_temp
    paused = []

    def paused_write_temp(path, data):
        if not paused:  # while this writer is paused, another replaces the object 40 times
            paused.append(True)
            for n in range(1, 41):
                store.put_if_match("job/_lease.json", str(n).encode(), store.head("job/_lease.json").etag)
        return real_write_temp(path, data)

    monkeypatch.setattr(store, "_write_temp", paused_write_temp)
    with pytest.raises(PreconditionFailed):
        store.put_if_match("job/_lease.json", b"stale", etag)
    monkeypatch.undo()
    assert store.get_bytes("job/_lease.json") == b"40"
    assert [info.key for info in store.list("job/")] == ["job/_lease.json"]
    assert len(list((tmp_path / "paused" / "job" / "_lease.json.versions").iterdir())) <= 17  # pruned as it goes
    with pytest.raises(PreconditionFailed):
        store.put_if_absent("job/_lease.json", b"again")
    store.delete("job/_lease.json")
    assert not (tmp_path / "paused" / "job").exists()
    store.put_if_absent("job/_lease.json", b"new")  # created afresh after a delete
    assert store.get_bytes("job/_lease.json") == b"new"
