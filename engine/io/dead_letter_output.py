"""Dead letters that outlive the process: written to a folder as JSON lines, checkpoint by checkpoint.

Before, a record that could not be processed (a malformed line, a raising timestamp assigner or key
selector) was kept only in the driver's memory (engine/histories.py): its reason was lost with the
process and only a count survived.  With the runtime option ``dead_letter_dir`` (``sluice run --output``
sets ``<output>/_dead_letters``; ``sluice run`` without it, ``<user cache dir>/sluice/dead_letters/<job id>/<run
start>``, engine/local_dirs.py; a job run through the API without it keeps them in memory only), the run's dead letters are a :class:`DeadLetterOutput`: still the bounded
in-memory history the results and the control API read, and every dead letter is also written, once the
checkpoint after it completes, to ``part-<checkpoint id>-<first seq>.jsonl`` under the folder, one JSON
object per line::

    {"seq": 17, "job": "purchases", "stage": "source:gen-2@4711", "error": "ValueError: ...",
     "value": "the raw text or the record", "checkpoint_id": 12, "written_ms": 1764150000000}

Delivery:

- On the Spark runtime a checkpoint's file holds exactly the dead letters before its barrier (the driver's
  output marks); an in-process restart takes the ones after the restored checkpoint back, and the replay
  produces them again: **exactly once** across restarts.
- On the local runtime a checkpoint writes every dead letter produced so far (its tasks pass the barrier
  at different moments, so there is no single mark): a restore replays the ones after the checkpoint and
  they are written again, **at least once**.  ``seq`` and the stage (split and offset for a source) tell
  the copies apart.
- When the run ends, finished, stopped or failed, what is left is written as ``part-end-<first seq>``:
  nothing is lost with the process.  A master killed outright loses what followed its last checkpoint in
  memory, and its restore replays it.

Values are written with ``json.dumps(..., default=repr)``: a value JSON cannot hold is shown as its repr.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

from engine.io.storage import check_folder_uri, open_folder
from engine.histories import BoundedHistory


class DeadLetterOutput(BoundedHistory[dict]):
    """The run's dead letters: the newest ``capacity`` in memory, every one written to ``folder``."""

    def __init__(self, capacity: int, folder: str, job_name: str, storage_options: dict[str, Any] | None = None
                 ) -> None:
        super().__init__(capacity)
        self.folder = check_folder_uri("dead_letter_dir", folder)
        self._storage_options = storage_options
        self._job_name = job_name
        self._lock = threading.Lock()
        #: (seq, dead letter) appended and not written yet, oldest first
        self._pending: list[tuple[int, dict]] = []
        self._store: Any = None

    def append(self, item: dict) -> None:
        with self._lock:
            self._pending.append((self.total, item))
            super().append(item)

    def take_back_to(self, total: int) -> None:
        """A restart restores a checkpoint: dead letters after its mark are produced again by the replay."""
        with self._lock:
            super().take_back_to(total)
            self._pending = [(seq, item) for seq, item in self._pending if seq < total]

    def persist(self, checkpoint_id: int | str, up_to: int | None = None) -> int:
        """Write the pending dead letters with ``seq < up_to`` (all when None) as checkpoint ``checkpoint_id``'s
        part; returns how many.  A storage error leaves them pending for the next call and is raised."""
        with self._lock:
            limit = self.total if up_to is None else up_to
            batch = [(seq, item) for seq, item in self._pending if seq < limit]
            if not batch:
                return 0
            now = int(time.time() * 1000)
            lines = [json.dumps({"seq": seq, "job": self._job_name, "stage": item.get("stage"),
                                 "error": item.get("error"), "value": item.get("value"),
                                 "checkpoint_id": checkpoint_id, "written_ms": now}, default=repr)
                     for seq, item in batch]
            name = (f"part-{checkpoint_id:010d}" if isinstance(checkpoint_id, int) else f"part-{checkpoint_id}") \
                + f"-{batch[0][0]:012d}.jsonl"
            self._folder().put_bytes(name, ("\n".join(lines) + "\n").encode("utf-8"))
            del self._pending[:len(batch)]  # pending is in seq order, so the batch is its head
            return len(batch)

    @property
    def num_pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def _folder(self) -> Any:
        if self._store is None:
            self._store = open_folder(self.folder, self._storage_options)
        return self._store


def dead_letter_history(options: dict[str, Any], capacity: int, job_name: str) -> BoundedHistory[dict]:
    """The run's dead letters: a :class:`DeadLetterOutput` when the runtime option ``dead_letter_dir`` names a
    folder, else the in-memory history alone."""
    folder = options.get("dead_letter_dir")
    if folder is None:
        return BoundedHistory(capacity)
    return DeadLetterOutput(capacity, folder, job_name)
