"""The checkpoint/savepoint bucket as code: an idempotent ``plan`` / ``apply`` over boto3.

    python -m infra.s3_bucket plan  [--config infra/bucket.json] [--skip SETTING]... [--detailed-exitcode]
    python -m infra.s3_bucket apply [--config infra/bucket.json] [--skip SETTING]...

The endpoint and credentials come from boto3's usual chain (``AWS_ENDPOINT_URL`` /
``AWS_ENDPOINT_URL_S3`` for MinIO or moto, ``AWS_ACCESS_KEY_ID``..., a profile, a role).
``plan`` reads the bucket and lists what differs; ``apply`` changes exactly that, so a
second ``apply`` changes nothing and ``plan`` then shows nothing (Terraform's contract).

What the bucket gets, and why (ARCHITECTURE section 6):

- **versioning never enabled.** Retention is Sluice's job: adding checkpoint N+1 deletes
  the oldest retained checkpoint's files, and orphan clean-up deletes the rest.  With
  versioning on, those deletes would only add delete markers and every superseded state
  file would stay billed.  S3 cannot return a bucket to "never versioned", so a bucket
  found ``Enabled`` is set to ``Suspended``, the closest state.
- **public access blocked**, all four switches.
- **default encryption**: SSE-S3 (``AES256``), or SSE-KMS with a bucket key when
  ``kms_key_id`` is set.
- **lifecycle**: one rule aborts incomplete multipart uploads after N days.  The S3
  backend aborts a failed upload itself (``checkpoints/backends/s3.py``), but a killed
  process cannot, and its parts stay billed and invisible.  Nothing else expires by
  default; see :data:`WHY_NO_EXPIRY`.
- **bucket policy** ``infra/policies/bucket-policy.json``: TLS only, and the
  retained-handles index may only be written conditionally (``If-None-Match`` /
  ``If-Match``), which is what keeps two job masters from clobbering it.

Settings an S3-compatible store does not implement the AWS way can be left out with
``--skip`` (``docker/compose.yaml`` does so for MinIO; see ``docs/deployment.md``).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from engine.errors import JobDefinitionError
from infra import iam

DEFAULT_CONFIG = Path(__file__).parent / "bucket.json"
SETTINGS = ("bucket", "versioning", "public-access-block", "encryption", "lifecycle", "policy")
ABORT_RULE_ID = "sluice-abort-incomplete-multipart-uploads"

WHY_NO_EXPIRY = """\
No age-based expiration covers checkpoint or savepoint data, and none can be configured
over those prefixes (BucketSpec refuses it):
- Files under <job>/shared/ are referenced by every retained checkpoint that reuses them
  (incremental checkpoints), so an old file can be live state.  Only reading _retained.json
  and each _metadata tells an orphan from a live file; the housekeeping DAG does that, with
  a grace period.  An S3 rule sees only key prefixes, tags and sizes.
- Validation results live inside the snapshot folder (<job>/savepoint-<id>-<sfx>/_validation/,
  <job>/chk-<id>/_validation/).  Lifecycle filters match key prefixes, so no rule can
  select "every _validation/ folder" without selecting the snapshots; and they are the
  savepoint's evidence, deleted with it by the savepoint history policy.
- Savepoints are never subsumed and the newest validated one must always stay.
Expiration is allowed only under other prefixes of the bucket (scratch data, exports)."""


@dataclass(frozen=True, slots=True)
class ExpiryRule:
    """Expire objects under ``prefix`` after ``days``; only outside the checkpoint and savepoint prefixes."""

    prefix: str
    days: int


@dataclass(frozen=True, slots=True)
class BucketSpec:
    """The desired bucket (``infra/bucket.json``)."""

    bucket: str
    region: str = "us-east-1"
    checkpoint_prefix: str = "checkpoints"
    savepoint_prefix: str = "savepoints"
    abort_incomplete_multipart_days: int = 2
    expire: tuple[ExpiryRule, ...] = ()
    sse_algorithm: str = "AES256"
    kms_key_id: str | None = None

    def __post_init__(self) -> None:
        if not self.bucket or not all(c.islower() or c.isdigit() or c in ".-" for c in self.bucket):
            raise JobDefinitionError("bucket", self.bucket, "must be an S3 bucket name: lowercase letters, digits, '.', '-'")
        for name in ("checkpoint_prefix", "savepoint_prefix"):
            value = getattr(self, name)
            if not value or value != value.strip("/"):
                raise JobDefinitionError(name, value, "must be a non-empty prefix without leading or trailing '/'")
        if _overlaps(self.checkpoint_prefix, self.savepoint_prefix):
            raise JobDefinitionError("savepoint_prefix", self.savepoint_prefix,
                                     f"must not overlap checkpoint_prefix {self.checkpoint_prefix!r}",
                                     "savepoints are never subsumed; keep them apart from checkpoints")
        if type(self.abort_incomplete_multipart_days) is not int or self.abort_incomplete_multipart_days < 1:
            raise JobDefinitionError("abort_incomplete_multipart_days", self.abort_incomplete_multipart_days,
                                     "must be a positive int (S3 counts whole days)")
        if self.sse_algorithm not in ("AES256", "aws:kms"):
            raise JobDefinitionError("sse_algorithm", self.sse_algorithm, "must be 'AES256' or 'aws:kms'")
        if (self.sse_algorithm == "aws:kms") != (self.kms_key_id is not None):
            raise JobDefinitionError("kms_key_id", self.kms_key_id, "is required with 'aws:kms' and only with it")
        for rule in self.expire:
            if type(rule.days) is not int or rule.days < 1:
                raise JobDefinitionError("expire.days", rule.days, "must be a positive int")
            protected = [p for p in (self.checkpoint_prefix, self.savepoint_prefix) if _overlaps(rule.prefix, p)]
            if not rule.prefix.strip("/") or protected:
                raise JobDefinitionError("expire.prefix", rule.prefix,
                                         f"must not cover checkpoint or savepoint data ({protected or 'the whole bucket'})",
                                         WHY_NO_EXPIRY)

    @staticmethod
    def from_file(path: str | Path = DEFAULT_CONFIG) -> BucketSpec:
        doc = json.loads(Path(path).read_text())
        known = set(BucketSpec.__dataclass_fields__)
        unknown = sorted(set(doc) - known)
        if unknown:
            raise JobDefinitionError("config", str(path), f"has unknown keys {unknown}", f"known: {sorted(known)}")
        doc["expire"] = tuple(ExpiryRule(str(r["prefix"]), r["days"]) for r in doc.get("expire", ()))
        return BucketSpec(**doc)

    def policy_variables(self) -> dict[str, str]:
        return {"bucket": self.bucket, "checkpoint_prefix": self.checkpoint_prefix,
                "savepoint_prefix": self.savepoint_prefix}

    # -- desired documents, in the shape S3's Get* calls return them ------------------------------

    def public_access_block(self) -> dict[str, bool]:
        return {"BlockPublicAcls": True, "IgnorePublicAcls": True, "BlockPublicPolicy": True,
                "RestrictPublicBuckets": True}

    def encryption(self) -> dict[str, Any]:
        default: dict[str, Any] = {"SSEAlgorithm": self.sse_algorithm}
        rule: dict[str, Any] = {"ApplyServerSideEncryptionByDefault": default}
        if self.kms_key_id is not None:
            default["KMSMasterKeyID"] = self.kms_key_id
            rule["BucketKeyEnabled"] = True
        return {"Rules": [rule]}

    def lifecycle(self) -> dict[str, Any]:
        rules: list[dict[str, Any]] = [{
            "ID": ABORT_RULE_ID, "Status": "Enabled", "Filter": {"Prefix": ""},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": self.abort_incomplete_multipart_days},
        }]
        for rule in self.expire:
            prefix = rule.prefix.strip("/") + "/"
            rules.append({"ID": f"sluice-expire-{prefix.rstrip('/').replace('/', '-')}", "Status": "Enabled",
                          "Filter": {"Prefix": prefix}, "Expiration": {"Days": rule.days}})
        return {"Rules": rules}

    def policy(self) -> dict[str, Any]:
        return iam.render("bucket", self.policy_variables())


def _overlaps(a: str, b: str) -> bool:
    a, b = a.strip("/") + "/", b.strip("/") + "/"
    return a.startswith(b) or b.startswith(a)


@dataclass(frozen=True, slots=True)
class Change:
    """One setting that differs: ``current`` is None when the setting (or the bucket) is absent."""

    setting: str
    current: Any
    desired: Any

    def describe(self) -> str:
        verb = "create" if self.current is None else "update"
        if self.current is None:
            return f"+ {self.setting}: {verb} {json.dumps(self.desired, sort_keys=True)}"
        return (f"~ {self.setting}: {verb} {json.dumps(self.current, sort_keys=True, default=str)} -> "
                f"{json.dumps(self.desired, sort_keys=True)}")


# -- reading the bucket --------------------------------------------------------------------------

def _error_code(exc: Exception) -> str:
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


def _absent_on(client: Any, call: Callable[[], Any], *codes: str) -> Any:
    try:
        return call()
    except client.exceptions.ClientError as exc:
        if _error_code(exc) in codes:
            return None
        raise


def _bucket_exists(client: Any, spec: BucketSpec) -> bool:
    return _absent_on(client, lambda: client.head_bucket(Bucket=spec.bucket), "404", "NoSuchBucket") is not None


def _current_versioning(client: Any, spec: BucketSpec) -> str | None:
    return client.get_bucket_versioning(Bucket=spec.bucket).get("Status")


def _current_public_access_block(client: Any, spec: BucketSpec) -> dict[str, bool] | None:
    r = _absent_on(client, lambda: client.get_public_access_block(Bucket=spec.bucket),
                   "NoSuchPublicAccessBlockConfiguration")
    return dict(r["PublicAccessBlockConfiguration"]) if r else None


def _current_encryption(client: Any, spec: BucketSpec) -> dict[str, Any] | None:
    r = _absent_on(client, lambda: client.get_bucket_encryption(Bucket=spec.bucket),
                   "ServerSideEncryptionConfigurationNotFoundError")
    if not r:
        return None
    rules = []
    for rule in r["ServerSideEncryptionConfiguration"]["Rules"]:
        default = dict(rule["ApplyServerSideEncryptionByDefault"])
        normal: dict[str, Any] = {"ApplyServerSideEncryptionByDefault": default}
        if rule.get("BucketKeyEnabled"):
            normal["BucketKeyEnabled"] = True
        rules.append(normal)
    return {"Rules": rules}


def _current_lifecycle(client: Any, spec: BucketSpec) -> dict[str, Any] | None:
    r = _absent_on(client, lambda: client.get_bucket_lifecycle_configuration(Bucket=spec.bucket),
                   "NoSuchLifecycleConfiguration")
    if not r:
        return None
    keep = ("ID", "Status", "Filter", "AbortIncompleteMultipartUpload", "Expiration")
    rules = []
    for rule in r["Rules"]:
        normal = {k: rule[k] for k in keep if k in rule}
        if "Filter" not in normal and "Prefix" in rule:  # the legacy top-level Prefix form
            normal["Filter"] = {"Prefix": rule["Prefix"]}
        if "Expiration" in normal:
            normal["Expiration"] = {k: v for k, v in normal["Expiration"].items() if k == "Days"}
        rules.append(normal)
    return {"Rules": rules}


def _current_policy(client: Any, spec: BucketSpec) -> dict[str, Any] | None:
    r = _absent_on(client, lambda: client.get_bucket_policy(Bucket=spec.bucket), "NoSuchBucketPolicy")
    return json.loads(r["Policy"]) if r else None


# -- plan and apply ------------------------------------------------------------------------------

def _checks(spec: BucketSpec) -> list[tuple[str, Callable[[Any, BucketSpec], Any], Any]]:
    """(setting, read current, desired) for every setting after the bucket itself."""
    return [
        ("versioning", _current_versioning, "Suspended or never enabled"),
        ("public-access-block", _current_public_access_block, spec.public_access_block()),
        ("encryption", _current_encryption, spec.encryption()),
        ("lifecycle", _current_lifecycle, spec.lifecycle()),
        ("policy", _current_policy, spec.policy()),
    ]


def _check_skip(skip: Iterable[str]) -> frozenset[str]:
    skip = frozenset(skip)
    unknown = sorted(skip - set(SETTINGS) | (skip & {"bucket"}))
    if unknown:
        raise JobDefinitionError("skip", unknown, f"must name settings among {list(SETTINGS[1:])}")
    return skip


def plan(client: Any, spec: BucketSpec, skip: Iterable[str] = ()) -> list[Change]:
    """What ``apply`` would change, read from the bucket; empty when it matches ``spec``."""
    skip = _check_skip(skip)
    exists = _bucket_exists(client, spec)
    changes = [] if exists else [Change("bucket", None, {"Bucket": spec.bucket, "Region": spec.region})]
    for setting, read, desired in _checks(spec):
        if setting in skip:
            continue
        current = read(client, spec) if exists else None
        if setting == "versioning":
            if current == "Enabled":
                changes.append(Change(setting, current, "Suspended"))
        elif current != desired:
            changes.append(Change(setting, current, desired))
    return changes


def apply(client: Any, spec: BucketSpec, skip: Iterable[str] = ()) -> list[Change]:
    """Make the bucket match ``spec``; returns the changes made (none when it already matched)."""
    changes = plan(client, spec, skip)
    for change in changes:
        _APPLY[change.setting](client, spec, change)
    return changes


def _create_bucket(client: Any, spec: BucketSpec, change: Change) -> None:
    kwargs: dict[str, Any] = {"Bucket": spec.bucket}
    if spec.region != "us-east-1":  # us-east-1 refuses a LocationConstraint naming itself
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": spec.region}
    client.create_bucket(**kwargs)


_APPLY: dict[str, Callable[[Any, BucketSpec, Change], None]] = {
    "bucket": _create_bucket,
    "versioning": lambda c, s, ch: c.put_bucket_versioning(
        Bucket=s.bucket, VersioningConfiguration={"Status": "Suspended"}),
    "public-access-block": lambda c, s, ch: c.put_public_access_block(
        Bucket=s.bucket, PublicAccessBlockConfiguration=s.public_access_block()),
    "encryption": lambda c, s, ch: c.put_bucket_encryption(
        Bucket=s.bucket, ServerSideEncryptionConfiguration=s.encryption()),
    "lifecycle": lambda c, s, ch: c.put_bucket_lifecycle_configuration(
        Bucket=s.bucket, LifecycleConfiguration=s.lifecycle()),
    "policy": lambda c, s, ch: c.put_bucket_policy(Bucket=s.bucket, Policy=json.dumps(s.policy())),
}


# -- command line --------------------------------------------------------------------------------

def s3_client(spec: BucketSpec, endpoint_url: str | None = None) -> Any:
    """A boto3 client for the bucket's region; the endpoint defaults to boto3's (``AWS_ENDPOINT_URL``)."""
    import boto3

    return boto3.session.Session().client("s3", region_name=spec.region, endpoint_url=endpoint_url)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.s3_bucket", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("plan", "apply"))
    parser.add_argument("--config", default=str(DEFAULT_CONFIG), help="bucket spec JSON (default: infra/bucket.json)")
    parser.add_argument("--bucket", default=None, help="override the spec's bucket name")
    parser.add_argument("--endpoint-url", default=None, help="S3 endpoint (default: boto3's, e.g. $AWS_ENDPOINT_URL)")
    parser.add_argument("--skip", action="append", default=[], choices=SETTINGS[1:],
                        help="leave a setting alone (for stores that do not implement it)")
    parser.add_argument("--detailed-exitcode", action="store_true", help="plan: exit 2 when there are changes")
    args = parser.parse_args(argv)

    spec = BucketSpec.from_file(args.config)
    if args.bucket:
        spec = BucketSpec(**{**{f: getattr(spec, f) for f in BucketSpec.__dataclass_fields__}, "bucket": args.bucket})
    client = s3_client(spec, args.endpoint_url)
    changes = (apply if args.command == "apply" else plan)(client, spec, args.skip)
    done = "applied" if args.command == "apply" else "planned"
    for change in changes:
        print(change.describe())
    print(f"s3://{spec.bucket}: {len(changes)} change(s) {done}" + (f", skipped {sorted(args.skip)}" if args.skip else ""))
    return 2 if (args.command == "plan" and args.detailed_exitcode and changes) else 0


if __name__ == "__main__":
    sys.exit(main())
