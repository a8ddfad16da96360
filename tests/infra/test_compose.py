"""docker/compose.yaml, checked statically: builds, pins, dependencies, ports, env names, connections.

No Docker engine runs here (ARCHITECTURE section 8), so nothing is started; the bucket-init
job's command is run for real against a moto S3 server, with the environment Compose gives it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from urllib.parse import urlparse

import pytest
import yaml

from compose_helpers import COMPOSE, DOCKER, ROOT, environment, env_names_read_by_code, interpolate, load_compose
from infra.s3_bucket import BucketSpec

SPEC = BucketSpec.from_file()
SERVICES = load_compose()["services"]
AIRFLOW_SERVICES = [n for n, s in SERVICES.items() if s.get("image", "").startswith("sluice-airflow:")]
# what botocore reads from the environment (botocore.configprovider / credentials)
BOTOCORE_ENV = {"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION"}


def test_the_stack_has_airflow_the_store_the_bucket_job_and_a_sluice_job():
    commands = {tuple(s.get("command", ()))[:1]: n for n, s in SERVICES.items() if s.get("command")}
    for airflow_command in ("api-server", "scheduler", "dag-processor", "triggerer"):
        assert (airflow_command,) in commands, airflow_command
    assert {"postgres", "minio", "bucket-init", "sluice-job"} <= set(SERVICES)
    assert SERVICES["bucket-init"]["entrypoint"] == ["python", "-m", "infra.s3_bucket"]
    assert SERVICES["sluice-job"]["command"][0] == "run"


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_build_context_and_dockerfile_exists(name):
    build = SERVICES[name].get("build")
    if build is None:
        return
    context = (DOCKER / build["context"]).resolve()
    assert context == ROOT, "images build from the repository root"
    assert (context / build["dockerfile"]).is_file(), build["dockerfile"]


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_image_is_pinned(name):
    image = SERVICES[name]["image"]
    repository, _, tag = image.rpartition(":")
    assert repository and tag and tag != "latest" and "/" not in tag, f"{name}: {image!r} is not pinned"
    if "build" not in SERVICES[name]:
        assert re.search(r"\d", tag), f"{name}: a pulled image needs a versioned tag, got {tag!r}"


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_dependencies_exist_and_their_conditions_can_be_met(name):
    for target, rule in SERVICES[name].get("depends_on", {}).items():
        assert target in SERVICES, f"{name} depends on unknown {target}"
        assert target != name
        assert "profiles" not in SERVICES[target] or "profiles" in SERVICES[name], \
            f"{name} (always started) depends on {target}, which only a profile starts"
        if rule["condition"] == "service_healthy":
            assert "healthcheck" in SERVICES[target], f"{target} has no healthcheck for {name} to wait on"
        elif rule["condition"] == "service_completed_successfully":
            assert SERVICES[target].get("restart") == "no", f"{target} must be a one-shot job"
        else:
            pytest.fail(f"{name} -> {target}: unexpected condition {rule['condition']!r}")


def test_long_running_services_have_healthchecks_and_one_shot_jobs_do_not_restart():
    for name, service in SERVICES.items():
        if service.get("restart") == "no":
            continue
        assert "healthcheck" in service, name
        assert service["restart"] == "unless-stopped", name


def _published(service: dict) -> dict[int, int]:
    return {int(p.split(":")[1]): int(p.split(":")[0]) for p in service.get("ports", ())}


def _healthcheck_port(service: dict) -> int | None:
    m = re.search(r"localhost:(\d+)", " ".join(service["healthcheck"]["test"]))
    return int(m.group(1)) if m else None


def test_ports_healthchecks_and_urls_agree():
    api = SERVICES["airflow-apiserver"]
    assert _healthcheck_port(api) in _published(api) == {8080: 8080}
    execution = urlparse(environment(api)["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
    assert (execution.hostname, execution.port, execution.path) == ("airflow-apiserver", 8080, "/execution/")

    scheduler = SERVICES["airflow-scheduler"]
    assert environment(scheduler)["AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK"] == "true"
    assert _healthcheck_port(scheduler) == 8974  # Airflow's default scheduler health check port

    job = SERVICES["sluice-job"]
    args = job["command"]
    port = int(args[args.index("--port") + 1])
    assert _healthcheck_port(job) == port and port in _published(job)
    assert args[args.index("--host") + 1] == "0.0.0.0"
    assert environment(job)["SLUICE_CONTROL_TOKEN"], "a control API bound beyond loopback needs a token"

    minio_ports = _published(SERVICES["minio"])
    for name, service in SERVICES.items():
        endpoint = environment(service).get("AWS_ENDPOINT_URL")
        if endpoint:
            url = urlparse(endpoint)
            assert url.hostname == "minio" and url.port in minio_ports, (name, endpoint)
            assert "minio" in service["depends_on"] or "bucket-init" in service["depends_on"], name

    db = urlparse(environment(api)["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    postgres = environment(SERVICES["postgres"])
    assert (db.hostname, db.port, db.username, db.password, db.path) == (
        "postgres", 5432, postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"], "/" + postgres["POSTGRES_DB"])


def test_env_names_are_ones_the_code_or_botocore_reads():
    read = env_names_read_by_code()
    assert {"SLUICE_DEPLOYMENTS_FILE", "SLUICE_STATE_DIR", "SLUICE_CONTROL_TOKEN"} <= read, "the grep finds reads"
    for name, service in SERVICES.items():
        for var in environment(service):
            if var.startswith("SLUICE_"):
                assert var in read, f"{name}: {var} is read nowhere in engine/, checkpoints/, plugins/"
            elif var.startswith("AWS_"):
                assert var in BOTOCORE_ENV, f"{name}: {var} is not an AWS SDK variable"
    for name in AIRFLOW_SERVICES:
        env = environment(SERVICES[name])
        plugin_reads = {v for v in read if v.startswith("SLUICE_") and v != "SLUICE_CONTROL_TOKEN"}
        assert plugin_reads <= set(env), f"{name} lacks {sorted(plugin_reads - set(env))}"
        assert env["SLUICE_DEPLOYMENTS_FILE"].startswith(env["AIRFLOW__CORE__DAGS_FOLDER"] + "/")
        assert "AIRFLOW__CORE__PLUGINS_FOLDER" not in env, "the entry point registers the plugin (docs/airflow.md)"


def test_connections_match_the_deployments_file_and_the_bucket():
    deployments = yaml.safe_load((ROOT / "dags" / "sluice_deployments.yaml").read_text())
    for name in AIRFLOW_SERVICES:
        env = environment(SERVICES[name])
        connections = {k[len("AIRFLOW_CONN_"):].lower(): json.loads(v) for k, v in env.items()
                       if k.startswith("AIRFLOW_CONN_")}
        for deployment, spec in deployments.items():
            conn = connections.get(spec["conn_id"])
            assert conn is not None, f"{name}: no AIRFLOW_CONN_ for {deployment}'s {spec['conn_id']}"
            extra = conn["extra"]
            assert extra["storage_uri"] == f"s3://{SPEC.bucket}/{SPEC.checkpoint_prefix}"
            assert extra["savepoint_dir"] == f"s3://{SPEC.bucket}/{SPEC.savepoint_prefix}"
            aws = connections[extra["aws_conn_id"]]
            assert aws["conn_type"] == "aws"
            assert aws["extra"]["endpoint_url"] == "http://minio:9000"
            assert aws["extra"]["region_name"] == SPEC.region
            minio = environment(SERVICES["minio"])
            assert (aws["login"], aws["password"]) == (minio["MINIO_ROOT_USER"], minio["MINIO_ROOT_PASSWORD"])


def test_the_standalone_job_uses_the_bucket_and_never_a_deployments_job_id():
    args = SERVICES["sluice-job"]["command"]
    deployments = yaml.safe_load((ROOT / "dags" / "sluice_deployments.yaml").read_text())
    assert args[args.index("--job-id") + 1] not in {d["job_id"] for d in deployments.values()}
    assert args[args.index("--storage") + 1] == f"s3://{SPEC.bucket}/{SPEC.checkpoint_prefix}"
    assert args[args.index("--savepoint-dir") + 1] == f"s3://{SPEC.bucket}/{SPEC.savepoint_prefix}"
    module, _, function = args[1].partition(":")
    assert (ROOT / (module.replace(".", "/") + ".py")).is_file()
    assert f"def {function}(" in (ROOT / (module.replace(".", "/") + ".py")).read_text()


def test_the_bucket_init_command_creates_the_bucket_with_the_compose_environment(moto_endpoint):
    service = SERVICES["bucket-init"]
    env = {**os.environ, **environment(service), "AWS_ENDPOINT_URL": moto_endpoint}
    command = [sys.executable, *service["entrypoint"][1:], *service["command"]]
    for attempt in ("creates", "no-op"):
        result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr
    assert f"s3://{SPEC.bucket}: 0 change(s) applied" in result.stdout, "the second run changes nothing"

    import boto3

    client = boto3.session.Session().client("s3", region_name=SPEC.region, endpoint_url=moto_endpoint,
                                            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
                                            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"])
    client.head_bucket(Bucket=SPEC.bucket)


def test_docker_compose_config_accepts_the_file():
    docker = shutil.which("docker")
    if docker is None:
        pytest.skip("no docker client on PATH")
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.skip(f"the docker client has no compose plugin: {probe.stderr.strip()[:120]}")
    result = subprocess.run([docker, "compose", "-f", str(COMPOSE), "--profile", "standalone", "config", "--quiet"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def test_interpolation_takes_the_environment_before_the_default():
    assert interpolate("${X:-a}-${Y:-b}", {"X": "set"}) == "set-b"
