"""Where Sluice keeps local files nobody named a place for: under the user's cache dir, never the cwd.

A new user found Great Expectations Data Docs written into whatever directory ``sluice validate`` ran in
(``./.sluice/data_docs``), and the dead letters of ``sluice run`` without ``--output`` kept nowhere.  Both now
have a documented default under :func:`sluice_cache_dir`, and the commands print the path they used:

* Data Docs: ``<cache>/data_docs`` (``sluice validate --data-docs DIR`` or ``$SLUICE_DATA_DOCS_DIR`` win);
* dead letters of a run without ``--output``: ``<cache>/dead_letters/<job id>/<run start, UTC>``
  (``--output``'s ``_dead_letters/`` or ``--option dead_letter_dir=URI`` win).

The cache dir is ``platformdirs.user_cache_dir("sluice")`` (``$XDG_CACHE_HOME`` or ``~/.cache`` on Linux,
``~/Library/Caches`` on macOS, ``%LOCALAPPDATA%`` on Windows); ``$SLUICE_CACHE_DIR`` replaces it outright.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


def sluice_cache_dir() -> Path:
    """``$SLUICE_CACHE_DIR``, else the ``sluice`` folder in the user's cache dir (module docstring); absolute."""
    import platformdirs

    own = os.environ.get("SLUICE_CACHE_DIR")
    if own:
        return Path(own).expanduser().absolute()
    return Path(platformdirs.user_cache_dir("sluice", appauthor=False)).absolute()


def default_data_docs_dir() -> Path:
    """Where Great Expectations Data Docs go when no ``--data-docs`` is given: ``$SLUICE_DATA_DOCS_DIR``, else
    ``<cache>/data_docs``."""
    own = os.environ.get("SLUICE_DATA_DOCS_DIR")
    return Path(own).expanduser().absolute() if own else sluice_cache_dir() / "data_docs"


def default_dead_letter_dir(job_id: str, started_ms: int | None = None) -> str:
    """The local folder of a run's dead letters when neither ``--output`` nor ``dead_letter_dir`` names one:
    ``<cache>/dead_letters/<job id>/<run start, UTC>``, one folder per run so a later run of the same job id never
    writes over an earlier run's parts."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime((time.time() * 1000 if started_ms is None
                                                         else started_ms) / 1000))
    return str(sluice_cache_dir() / "dead_letters" / job_id / f"{stamp}-{os.getpid()}")
