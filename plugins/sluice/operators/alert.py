"""Alerting: log at ERROR and, when configured, POST a JSON message through the HTTP provider."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator


class SluiceAlertOperator(BaseOperator):
    """Send an alert about a job (what happened and what was done about it).

    :param message: the alert text (templated; may pull XCom of the supervision tasks).
    :param http_conn_id: an HTTP connection (e.g. a chat or incident webhook); without
        one the alert only goes to the task log at ERROR level, which Airflow's own
        log-based alerting can pick up.
    :param endpoint: path on the HTTP connection to POST ``{"text": message}`` to.
    """

    template_fields = ("message", "endpoint")
    ui_color = "#f4cccc"

    def __init__(self, *, message: str, http_conn_id: str | None = None, endpoint: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.message = message
        self.http_conn_id = http_conn_id
        self.endpoint = endpoint

    def execute(self, context: Any) -> str:
        self.log.error("SLUICE ALERT: %s", self.message)
        if self.http_conn_id:
            from airflow.providers.http.hooks.http import HttpHook

            HttpHook(method="POST", http_conn_id=self.http_conn_id).run(
                self.endpoint, json={"text": self.message}, headers={"Content-Type": "application/json"})
        return self.message
