"""The access policies allow what the code does, and little else.

The job policy cannot drift from the S3 backend: every boto3 call in
``checkpoints/backends/s3.py`` is found by parsing it, mapped to the IAM actions S3
authorises it with, and evaluated against the rendered policy for keys the storage
layout (``checkpoints/layout.py``) produces.  A new call without a mapping fails here.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from checkpoints import layout
from checkpoints.validation.records import RESULTS_DIR
from infra import iam
from infra.iam import Request
from infra.s3_bucket import BucketSpec

ROOT = Path(__file__).resolve().parents[2]
S3_BACKEND = ROOT / "checkpoints" / "backends" / "s3.py"
SPEC = BucketSpec.from_file()
BUCKET_ARN = f"arn:aws:s3:::{SPEC.bucket}"
JOB = "purchases"

# boto3 client method -> (IAM action, which resource) as S3 authorises it.  "source" is the copy's
# source object; the managed copy (s3transfer) is HeadObject + CopyObject, or a multipart
# UploadPartCopy (create / upload_part_copy / complete, abort on failure) above 8 MB.
CALL_TO_IAM: dict[str, list[tuple[str, str]]] = {
    "get_object": [("s3:GetObject", "object")],
    "head_object": [("s3:GetObject", "object")],  # HeadObject is authorised as GetObject
    "list_objects_v2": [("s3:ListBucket", "bucket")],
    "put_object": [("s3:PutObject", "object")],
    "create_multipart_upload": [("s3:PutObject", "object")],
    "upload_part": [("s3:PutObject", "object")],
    "complete_multipart_upload": [("s3:PutObject", "object")],
    "abort_multipart_upload": [("s3:AbortMultipartUpload", "object")],
    "delete_object": [("s3:DeleteObject", "object")],
    "delete_objects": [("s3:DeleteObject", "object")],  # authorised per key
    "copy": [("s3:GetObject", "source"), ("s3:PutObject", "object"), ("s3:AbortMultipartUpload", "object")],
}


def client_calls_in_s3_backend() -> set[str]:
    """Method names called on ``self.client`` (and paginated operations) in the S3 backend."""
    calls = set()
    for node in ast.walk(ast.parse(S3_BACKEND.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        if isinstance(owner, ast.Attribute) and owner.attr == "client":
            if node.func.attr == "get_paginator":
                calls.add(node.args[0].value)
            else:
                calls.add(node.func.attr)
    return calls


def policy(name: str) -> dict:
    return iam.render(name, SPEC.policy_variables())


def obj(key: str, prefix: str = SPEC.checkpoint_prefix) -> str:
    return f"{BUCKET_ARN}/{prefix}/{key}"


def listing(under: str) -> Request:
    return Request("s3:ListBucket", BUCKET_ARN, {"s3:prefix": under})


def keys_the_job_writes() -> list[str]:
    chk = layout.checkpoint_dir(JOB, 3)
    savepoint = layout.savepoint_dir(JOB, 4, "a1b2")
    return [
        obj(chk + layout.state_file_path("window-op", 0, "window_state", "parquet", 7)),
        obj(chk + layout.METADATA_FILE),
        obj(layout.shared_dir(JOB) + "0f3a.parquet"),
        obj(layout.status_key(JOB)),
        obj(layout.index_key(JOB)),
        obj(savepoint + layout.METADATA_FILE, SPEC.savepoint_prefix),
        obj(savepoint + "window-op/0/window_state.parquet", SPEC.savepoint_prefix),
    ]


def test_the_s3_backend_makes_only_calls_the_map_knows():
    calls = client_calls_in_s3_backend()
    assert {"get_object", "put_object", "list_objects_v2", "delete_objects"} <= calls, "the parser finds the calls"
    unmapped = calls - set(CALL_TO_IAM)
    assert not unmapped, f"map {sorted(unmapped)} to IAM actions here and grant them in infra/policies/job-role.json"


@pytest.mark.parametrize("call", sorted(client_calls_in_s3_backend()))
def test_the_job_policy_allows_every_call_of_the_s3_backend(call):
    job = policy("job")
    for action, kind in CALL_TO_IAM[call]:
        if kind == "bucket":
            for root in (SPEC.checkpoint_prefix, SPEC.savepoint_prefix):
                for under in (f"{root}/", f"{root}/{layout.job_dir(JOB)}", f"{root}/{layout.checkpoint_dir(JOB, 3)}"):
                    assert iam.is_allowed(job, listing(under)), f"{call}: {action} with prefix {under}"
            continue
        for key in keys_the_job_writes():
            request = Request(action, key, {"s3:if-none-match": "*"})  # the index is written conditionally
            assert iam.is_allowed(job, request), f"{call}: {action} on {key}"


def test_the_job_policy_reaches_nothing_outside_its_prefixes():
    job = policy("job")
    assert not iam.is_allowed(job, Request("s3:GetObject", f"{BUCKET_ARN}/other/{JOB}/_status.json"))
    assert not iam.is_allowed(job, Request("s3:PutObject", f"{BUCKET_ARN}/checkpoints-old/x"))
    assert not iam.is_allowed(job, listing("other/"))
    assert not iam.is_allowed(job, listing(""))
    assert not iam.is_allowed(job, Request("s3:PutObject", f"arn:aws:s3:::another-bucket/{SPEC.checkpoint_prefix}/x"))
    for admin in ("s3:DeleteBucket", "s3:PutBucketPolicy", "s3:PutLifecycleConfiguration", "s3:PutBucketVersioning"):
        assert not iam.is_allowed(job, Request(admin, BUCKET_ARN))


def test_the_bucket_policy_lets_the_index_change_only_by_conditional_write():
    bucket = policy("bucket")
    index = obj(layout.index_key(JOB))
    secure = {"aws:SecureTransport": "true"}
    assert iam.is_denied(bucket, Request("s3:PutObject", index, secure))
    assert not iam.is_denied(bucket, Request("s3:PutObject", index, {**secure, "s3:if-none-match": "*"}))
    assert not iam.is_denied(bucket, Request("s3:PutObject", index, {**secure, "s3:if-match": '"etag"'}))
    for key in keys_the_job_writes():
        if key != index:
            assert not iam.is_denied(bucket, Request("s3:PutObject", key, secure)), key
    assert iam.is_denied(bucket, Request("s3:GetObject", index, {"aws:SecureTransport": "false"}))


def test_the_airflow_policy_reads_everything_and_writes_only_validation_savepoints_and_orphan_deletes():
    airflow = policy("airflow")
    chk = layout.checkpoint_dir(JOB, 3)
    savepoint = layout.savepoint_dir(JOB, 4, "a1b2")
    for key in keys_the_job_writes():
        assert iam.is_allowed(airflow, Request("s3:GetObject", key)), key
    for root in (SPEC.checkpoint_prefix, SPEC.savepoint_prefix):
        assert iam.is_allowed(airflow, listing(f"{root}/{layout.job_dir(JOB)}"))
    # validation records (checkpoints.validation.records) and the outcome in _metadata
    assert iam.is_allowed(airflow, Request("s3:PutObject", obj(f"{chk}{RESULTS_DIR}/run-1.json")))
    assert iam.is_allowed(airflow, Request("s3:PutObject", obj(chk + layout.METADATA_FILE)))
    assert iam.is_allowed(airflow, Request("s3:PutObject", obj(f"{savepoint}{RESULTS_DIR}/run-1.json",
                                                                 SPEC.savepoint_prefix)))
    # savepoint history policy and orphan clean-up delete
    assert iam.is_allowed(airflow, Request("s3:DeleteObject", obj(savepoint + "x", SPEC.savepoint_prefix)))
    assert iam.is_allowed(airflow, Request("s3:DeleteObject", obj(layout.shared_dir(JOB) + "orphan.parquet")))
    # but never the job's state, the shared files or the index
    assert not iam.is_allowed(airflow, Request("s3:PutObject", keys_the_job_writes()[0]))
    assert not iam.is_allowed(airflow, Request("s3:PutObject", obj(layout.shared_dir(JOB) + "0f3a.parquet")))
    assert not iam.is_allowed(airflow, Request("s3:PutObject", obj(layout.index_key(JOB)), {"s3:if-match": "*"}))
    assert not iam.is_allowed(airflow, Request("s3:PutObject", obj(layout.status_key(JOB))))


def test_the_operator_policy_only_reads():
    operator = policy("operator")
    for key in keys_the_job_writes():
        assert iam.is_allowed(operator, Request("s3:GetObject", key)), key
        for write in ("s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"):
            assert not iam.is_allowed(operator, Request(write, key)), (write, key)
    assert iam.is_allowed(operator, listing(f"{SPEC.savepoint_prefix}/{layout.job_dir(JOB)}"))


@pytest.mark.parametrize("name", sorted(iam.POLICY_FILES))
def test_every_policy_is_valid_json_with_s3_actions_and_no_wildcard_allow(name):
    raw = json.loads((iam.POLICY_DIR / iam.POLICY_FILES[name]).read_text())
    assert raw["Version"] == "2012-10-17"
    rendered = policy(name)
    assert "${" not in json.dumps(rendered), "every placeholder is filled"
    sids = [s["Sid"] for s in rendered["Statement"]]
    assert len(sids) == len(set(sids))
    for statement in rendered["Statement"]:
        actions = iam._as_list(statement["Action"])
        assert all(a.startswith("s3:") for a in actions)
        if statement["Effect"] == "Allow":
            assert "s3:*" not in actions and "*" not in actions, statement["Sid"]
            assert all(r.startswith(BUCKET_ARN) for r in iam._as_list(statement["Resource"]))


def test_the_evaluator_refuses_constructs_it_does_not_model():
    with pytest.raises(iam.UnsupportedPolicy):
        iam.is_allowed({"Statement": [{"Effect": "Allow", "NotAction": "s3:GetObject", "Resource": "*"}]},
                       Request("s3:PutObject", BUCKET_ARN))
    with pytest.raises(iam.UnsupportedPolicy):
        iam.is_allowed({"Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*",
                                       "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}}]},
                       Request("s3:GetObject", BUCKET_ARN))
