"""The bucket as code, applied to a moto S3 server over HTTP: settings, idempotence, refusals."""

from __future__ import annotations

import json

import pytest

from engine.errors import JobDefinitionError
from infra import s3_bucket
from infra.s3_bucket import BucketSpec, ExpiryRule


def spec_for(bucket: str, **overrides) -> BucketSpec:
    base = BucketSpec.from_file(s3_bucket.DEFAULT_CONFIG)
    fields = {f: getattr(base, f) for f in BucketSpec.__dataclass_fields__}
    return BucketSpec(**{**fields, "bucket": bucket, **overrides})


def test_apply_creates_the_bucket_with_every_setting(client, bucket_name):
    spec = spec_for(bucket_name, abort_incomplete_multipart_days=3)
    changes = s3_bucket.apply(client, spec)

    assert [c.setting for c in changes] == ["bucket", "public-access-block", "encryption", "lifecycle", "policy"]
    assert "Status" not in client.get_bucket_versioning(Bucket=bucket_name)  # never enabled
    assert client.get_public_access_block(Bucket=bucket_name)["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True, "RestrictPublicBuckets": True}
    sse = client.get_bucket_encryption(Bucket=bucket_name)["ServerSideEncryptionConfiguration"]["Rules"]
    assert sse[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
    rules = client.get_bucket_lifecycle_configuration(Bucket=bucket_name)["Rules"]
    assert len(rules) == 1
    assert rules[0]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 3}
    assert "Expiration" not in rules[0], "checkpoint data must never expire by age"
    policy = json.loads(client.get_bucket_policy(Bucket=bucket_name)["Policy"])
    assert {s["Sid"] for s in policy["Statement"]} == {"DenyInsecureTransport", "RetainedIndexOnlyByConditionalWrite"}
    assert f"arn:aws:s3:::{bucket_name}/checkpoints/*/_retained.json" in json.dumps(policy)


def test_a_second_apply_is_a_no_op_and_plan_shows_nothing(client, bucket_name):
    spec = spec_for(bucket_name)
    assert s3_bucket.apply(client, spec)
    assert s3_bucket.plan(client, spec) == []
    assert s3_bucket.apply(client, spec) == []


def test_plan_reads_only_and_reports_drift_which_apply_repairs(client, bucket_name):
    spec = spec_for(bucket_name)
    assert [c.setting for c in s3_bucket.plan(client, spec)][0] == "bucket"
    assert bucket_name not in [b["Name"] for b in client.list_buckets()["Buckets"]], "plan must not create"

    s3_bucket.apply(client, spec)
    client.put_bucket_versioning(Bucket=bucket_name, VersioningConfiguration={"Status": "Enabled"})
    client.delete_public_access_block(Bucket=bucket_name)
    client.put_bucket_lifecycle_configuration(Bucket=bucket_name, LifecycleConfiguration={"Rules": [
        {"ID": "someone-else", "Status": "Enabled", "Filter": {"Prefix": ""}, "Expiration": {"Days": 1}}]})

    drift = {c.setting: c for c in s3_bucket.plan(client, spec)}
    assert set(drift) == {"versioning", "public-access-block", "lifecycle"}
    assert drift["versioning"].current == "Enabled" and drift["versioning"].desired == "Suspended"
    assert drift["public-access-block"].current is None

    s3_bucket.apply(client, spec)
    assert client.get_bucket_versioning(Bucket=bucket_name)["Status"] == "Suspended"
    rules = client.get_bucket_lifecycle_configuration(Bucket=bucket_name)["Rules"]
    assert [r["ID"] for r in rules] == [s3_bucket.ABORT_RULE_ID], "an expiry over checkpoint data was removed"
    assert s3_bucket.plan(client, spec) == []


def test_skipped_settings_are_neither_planned_nor_applied(client, bucket_name):
    spec = spec_for(bucket_name)
    changes = s3_bucket.apply(client, spec, skip=["public-access-block", "encryption", "lifecycle", "policy"])
    assert [c.setting for c in changes] == ["bucket"]
    with pytest.raises(client.exceptions.ClientError):
        client.get_bucket_policy(Bucket=bucket_name)
    assert [c.setting for c in s3_bucket.plan(client, spec)] == ["public-access-block", "encryption", "lifecycle",
                                                                  "policy"]


def test_kms_encryption_and_a_scratch_expiry_are_applied_and_stable(client, bucket_name):
    spec = spec_for(bucket_name, sse_algorithm="aws:kms", kms_key_id="alias/sluice",
                    expire=(ExpiryRule("scratch", 7),))
    s3_bucket.apply(client, spec)
    rule = client.get_bucket_encryption(Bucket=bucket_name)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": "alias/sluice"}
    rules = {r["ID"]: r for r in client.get_bucket_lifecycle_configuration(Bucket=bucket_name)["Rules"]}
    assert rules["sluice-expire-scratch"]["Filter"] == {"Prefix": "scratch/"}
    assert rules["sluice-expire-scratch"]["Expiration"]["Days"] == 7
    assert s3_bucket.plan(client, spec) == []


@pytest.mark.parametrize("prefix", ["checkpoints", "checkpoints/purchases/shared", "savepoints/", "", "/"])
def test_an_expiry_over_checkpoint_or_savepoint_data_is_refused(prefix):
    with pytest.raises(JobDefinitionError) as refused:
        spec_for("sluice-state", expire=(ExpiryRule(prefix, 30),))
    assert refused.value.parameter == "expire.prefix"
    assert "shared/" in str(refused.value), "the refusal explains why (incremental files stay live)"


def test_overlapping_prefixes_and_unknown_skips_are_refused():
    with pytest.raises(JobDefinitionError, match="savepoint_prefix"):
        spec_for("sluice-state", checkpoint_prefix="state", savepoint_prefix="state/savepoints")
    with pytest.raises(JobDefinitionError, match="skip"):
        s3_bucket.plan(None, spec_for("sluice-state"), skip=["bucket"])


def test_the_command_line_plans_applies_and_exits_2_on_pending_changes(moto_endpoint, bucket_name, capsys):
    argv = ["--bucket", bucket_name, "--endpoint-url", moto_endpoint]
    assert s3_bucket.main(["plan", "--detailed-exitcode", *argv]) == 2
    assert s3_bucket.main(["apply", *argv]) == 0
    assert "5 change(s) applied" in capsys.readouterr().out
    assert s3_bucket.main(["plan", "--detailed-exitcode", *argv]) == 0
    assert "0 change(s) planned" in capsys.readouterr().out
