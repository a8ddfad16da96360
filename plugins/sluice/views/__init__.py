"""The plugin's UI: a FastAPI app mounted in Airflow 3's API server, rendered server-side (no CDN, no JS)."""
