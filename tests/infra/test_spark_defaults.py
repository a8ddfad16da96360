"""infra/spark-defaults.conf says what the embedded runtime sets (engine/runtime/spark/session.py)."""

from __future__ import annotations

from compose_helpers import ROOT
from engine.runtime.spark.session import default_conf

CONF = ROOT / "infra" / "spark-defaults.conf"
# settings whose value Sluice relies on; the rest (sizes, paths) are per machine
SEMANTIC = ("spark.sql.execution.arrow.pyspark.enabled", "spark.sql.execution.arrow.pyspark.fallback.enabled",
            "spark.sql.adaptive.enabled", "spark.sql.streaming.forceDeleteTempCheckpointLocation",
            "spark.ui.showConsoleProgress")
INTERPRETER = ("spark.pyspark.python", "spark.pyspark.driver.python", "spark.executorEnv.PYSPARK_PYTHON")


def read_conf() -> dict[str, str]:
    pairs = {}
    for line in CONF.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, value = line.split(None, 1)
            assert key not in pairs, f"{key} set twice"
            pairs[key] = value.strip()
    return pairs


def test_the_settings_sluice_relies_on_match_the_embedded_runtime():
    conf, embedded = read_conf(), default_conf("local[2]")
    for key in SEMANTIC:
        assert conf[key] == embedded[key], key
    assert conf["spark.sql.adaptive.enabled"] == "false", "AQE would coalesce key-group partitions"


def test_every_worker_runs_one_named_interpreter_and_spills_to_the_local_dir():
    conf = read_conf()
    assert set(INTERPRETER) <= set(default_conf("local[2]")), "the embedded runtime pins the same three"
    assert {conf[k] for k in INTERPRETER} == {"/usr/local/bin/python"}
    assert conf["spark.local.dir"] == "/var/lib/sluice/spark-local"
    assert "/var/lib/sluice/spark-local" in (ROOT / "docker" / "Dockerfile").read_text()


def test_every_key_is_one_the_embedded_runtime_knows_or_a_local_dir():
    unknown = set(read_conf()) - set(default_conf("local[2]", local_dir="/x"))
    assert not unknown, f"keys Sluice does not set itself: {sorted(unknown)}; check they are real Spark settings"
