"""The ``airflow_local_settings.py`` of every LiveAirflow deployment (``live_airflow.py`` copies it into
``AIRFLOW_HOME/config/``, which Airflow puts on ``sys.path``), as an operator of a SQLite-backed Airflow would.

Four services and their task processes share one SQLite file.  Airflow already opens it in WAL mode (readers
never wait for a writer), but writers still take turns, and Python's ``sqlite3`` waits only 5 s for the lock
before raising ``database is locked``.  On a loaded host one write transaction can hold the lock longer than
that, and the scheduler died of it in CI.  Airflow's ``[database] sql_alchemy_connect_args`` (and, since 3.1, the
``_async`` one for the aiosqlite engine) take the import path of a dict handed to the DBAPI's ``connect()``:
these set the busy timeout.
"""

#: seconds a connection waits for SQLite's write lock before it fails ("database is locked")
SQLITE_BUSY_TIMEOUT_S = 60.0

connect_args = {"timeout": SQLITE_BUSY_TIMEOUT_S}
connect_args_async = {"timeout": SQLITE_BUSY_TIMEOUT_S}
