"""File sources and the committing file sink on S3, through the checkpoint package's backend (moto, in process)."""

from __future__ import annotations

import io
import json

import boto3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from moto import mock_aws

from engine.io import FileSink, FileSource, committed_files, read_committed

BUCKET = "sluice-io-test"


@pytest.fixture
def s3(monkeypatch):
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        client = boto3.client("s3", region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client


def _parquet_bytes(rows) -> bytes:
    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), out, row_group_size=3)
    return out.getvalue()


def test_a_folder_on_s3_reads_one_split_per_object_and_replays_from_a_row(s3):
    s3.put_object(Bucket=BUCKET, Key="events/b.jsonl", Body=b'{"n": 3}\n{bad\n{"n": 4}\n')
    s3.put_object(Bucket=BUCKET, Key="events/a.jsonl", Body=b'{"n": 1}\n{"n": 2}\n')
    s3.put_object(Bucket=BUCKET, Key="events/_SUCCESS", Body=b"")
    s3.put_object(Bucket=BUCKET, Key="events/nested/c.jsonl", Body=b'{"n": 9}\n')
    s3.put_object(Bucket=BUCKET, Key="eventsother/x.jsonl", Body=b'{"n": 9}\n')
    source = FileSource(f"s3://{BUCKET}/events", "jsonl")
    splits = source.discover_splits()
    assert [s.split_id for s in splits] == ["a.jsonl", "b.jsonl"]
    batch = source.create_reader(splits[1]).read(10)
    assert batch.values == [{"n": 3}, {"n": 4}] and [d.offset for d in batch.dead_letters] == [1]
    assert source.create_reader(splits[1], 2).read(10).values == [{"n": 4}]


def test_new_objects_landing_on_s3_are_discovered_by_a_continuous_source(s3):
    source = FileSource(f"s3://{BUCKET}/landing", "parquet", continuous=True)
    assert source.discover_splits() == []
    s3.put_object(Bucket=BUCKET, Key="landing/001.parquet", Body=_parquet_bytes([{"n": i} for i in range(5)]))
    first = source.discover_splits()
    s3.put_object(Bucket=BUCKET, Key="landing/002.parquet", Body=_parquet_bytes([{"n": 5}]))
    later = source.discover_splits()
    assert [s.split_id for s in first] == ["001.parquet"]
    assert [s.split_id for s in later] == ["001.parquet", "002.parquet"]
    reader = source.create_reader(later[0], 2)
    assert reader.read_arrow(10).records.to_pylist() == [{"n": 2}, {"n": 3}, {"n": 4}]


def test_the_file_sink_commits_exactly_once_on_s3_and_recommits_as_a_no_op(s3):
    path = f"s3://{BUCKET}/out"
    sink = FileSink(path, "jsonl")
    sink.open(0, 1)
    txn = sink.begin_transaction()
    sink.write(txn, [{"w": 1}, {"w": 2}])
    handle = json.loads(json.dumps(sink.pre_commit(txn, 12)))
    assert read_committed(path) == []
    fresh = FileSink(path, "jsonl")
    fresh.recover_and_commit([handle])
    fresh.recover_and_commit([handle])
    assert read_committed(path) == [{"w": 1}, {"w": 2}]
    assert committed_files(path) == ["part-0000000012-00000-00000.jsonl"]
    keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET, Prefix="out/")["Contents"])
    assert keys == ["out/part-0000000012-00000-00000.jsonl"]  # staging is gone


def test_a_file_source_shipped_to_an_executor_carries_the_endpoint_its_driver_resolved(monkeypatch):
    """Spark's Python workers keep the environment they started with: a monitored ``s3://`` folder read by a task
    must reach the store the driver reached, whatever the executor's environment says (issue 17's rule for
    checkpoint stores and sink parts, here for sources)."""
    import pickle  # only to emulate Spark shipping the source to an executor; nothing is persisted

    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "eu-west-3", "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}.items():
        monkeypatch.setenv(name, value)
    source = FileSource(f"s3://{BUCKET}/landing", "jsonl", continuous=True)
    shipped_bytes = pickle.dumps(source)
    monkeypatch.delenv("AWS_ENDPOINT_URL")  # the executor's environment names no endpoint
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    shipped = pickle.loads(shipped_bytes)
    store = shipped._folder()
    assert (store.endpoint_url, store.region) == ("http://127.0.0.1:9", "eu-west-3")
    assert source.storage_options == {}  # the driver's own source is unchanged
