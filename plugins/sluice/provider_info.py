"""Sluice as an Airflow provider: registers the ``sluice`` connection type and its form fields.

Airflow finds it through the ``apache_airflow_provider`` entry point (pyproject.toml),
so *Admin → Connections → Add* offers "Sluice job" with a field for every setting
:class:`sluice.hook.SluiceHook` reads.  The fields are declared here, not with
wtforms on the hook (Airflow 3 reads ``conn-fields`` without importing the hook).
"""

from __future__ import annotations

from typing import Any

CONN_TYPE = "sluice"

#: extra fields of a Sluice connection: name -> (label, description, JSON schema)
CONN_FIELDS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "storage_uri": ("Checkpoint storage", "Checkpoint root of the job: s3://bucket/prefix or file:///path",
                    {"type": ["string", "null"]}),
    "savepoint_dir": ("Savepoint directory", "Savepoint root: s3://bucket/prefix or file:///path",
                      {"type": ["string", "null"]}),
    "data_docs_dir": ("Data Docs location", "Where Great Expectations writes the Data Docs of validated snapshots",
                      {"type": ["string", "null"]}),
    "aws_conn_id": ("AWS connection", "An Airflow AWS connection (region, endpoint, credentials) for s3:// storage",
                    {"type": ["string", "null"]}),
    "control_url": ("Control URL", "The job master's control API, e.g. http://10.0.0.5:8081; empty: the URL "
                                   "the master publishes in its status document", {"type": ["string", "null"]}),
    "control_hosts": ("Trusted control hosts", "Comma-separated hosts besides loopback (names, .domain suffixes, "
                                               "CIDR networks) the token may be sent to when the control URL comes "
                                               "from the status document in storage", {"type": ["string", "null"]}),
    "job_id": ("Job id", "Default job of calls that name none (the job's folder in storage)",
               {"type": ["string", "null"]}),
}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "sluice",
        "name": "Sluice",
        "description": "Flink's window, watermark and checkpoint semantics for PySpark jobs, operated with Airflow",
        "connection-types": [{
            "hook-class-name": "sluice.hook.SluiceHook",
            "hook-name": "Sluice job",
            "connection-type": CONN_TYPE,
            "ui-field-behaviour": {
                "hidden-fields": ["schema", "login", "port", "host", "extra"],
                "relabeling": {"password": "Control API token"},
                "placeholders": {"password": "bearer token of the job master (sluice run --token)"},
            },
            "conn-fields": {name: {"label": label, "description": description, "schema": schema}
                            for name, (label, description, schema) in CONN_FIELDS.items()},
        }],
    }
