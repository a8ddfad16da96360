"""The Airflow plugin: the Sluice UI as a FastAPI app in the API server, linked from the navigation.

Airflow 3 has no Flask AppBuilder views; plugins add FastAPI apps (``fastapi_apps``,
mounted under ``url_prefix``) and navigation entries (``external_views``).
Operators, sensors, hook and triggers need no registration: DAGs import them
from the ``sluice`` package.

Airflow authenticates none of a plugin's FastAPI routes; the Sluice app does it
itself with Airflow's own ``get_user`` (:mod:`sluice.views.app`), so the page
needs the same login as the rest of the UI.
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from sluice.links import URL_PREFIX, SluiceDataDocsLink, SluiceJobPageLink


class SluicePlugin(AirflowPlugin):
    name = "sluice"

    @property
    def fastapi_apps(self) -> list[dict]:  # built lazily: importing the plugin must stay cheap
        from sluice.views.app import app

        return [{"app": app, "url_prefix": URL_PREFIX, "name": "Sluice jobs"}]

    operator_extra_links = [SluiceJobPageLink(), SluiceDataDocsLink()]

    external_views = [
        {
            "name": "Sluice jobs",
            "href": URL_PREFIX + "/",
            "destination": "nav",
            "category": "browse",
            "url_route": "sluice",
        }
    ]
