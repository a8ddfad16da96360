"""How a restore hands a snapshot's pending sink transactions to the job's sinks (snapshot_metadata.match_sink_states).

The runtimes' portability tests (tests/runtime/spark/test_snapshot_portability.py) run it with real jobs; a Spark
checkpoint taken with a sink class the restored program names differently found no sink by uid, and its pending
transactions were silently not committed.
"""

from __future__ import annotations

import pytest

from engine.errors import CorruptSnapshotError
from engine.runtime.snapshot_metadata import match_sink_states

A, B = {"pending": [[3, {"txn": "a"}]]}, {"pending": [[3, {"txn": "b"}]]}


def test_states_go_to_sinks_by_uid_and_the_unclaimed_ones_by_plan_order():
    sinks = [("v3.n0.Sink(FileSink)", "renamed"), ("out", "by-uid")]
    saved = {"out": B, "v3.n0.Sink(CommitFailsOnce)": A}
    assert match_sink_states(saved, sinks, "chk-3") == [("by-uid", B), ("renamed", A)]


def test_an_older_spark_snapshot_names_its_writers_by_task_id_and_is_matched_by_plan_order():
    assert match_sink_states({"sink-9": A, "sink-12": B}, [("x", 1), ("y", 2)], "chk-3") == [(1, A), (2, B)]


def test_pending_transactions_no_sink_would_commit_are_refused_not_dropped():
    with pytest.raises(CorruptSnapshotError, match=r"chk-3 holds pending sink transactions of \['sink-9', 'sink-12'\]"):
        match_sink_states({"sink-9": A, "sink-12": B}, [("x", 1)], "chk-3")
    assert match_sink_states({}, [("x", 1)], "chk-3") == []
