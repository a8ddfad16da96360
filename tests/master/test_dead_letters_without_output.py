"""``sluice run`` without ``--output`` keeps its dead letters in a documented default folder (new-user trial).

Before, a job run without ``--output`` (one that adds its own sinks) kept its dead letters in memory only:
the run's last words said they were "gone with this process".  Now they go to
``<user cache dir>/sluice/dead_letters/<job id>/<run start>`` (engine/local_dirs.py; ``$XDG_CACHE_HOME`` or
``~/.cache``), never the current directory, and the run says where.  ``--output`` and ``--option
dead_letter_dir=URI`` still choose the folder (tests/master/test_dead_letter_output.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def test_a_run_without_output_writes_its_dead_letters_under_the_user_cache_dir_and_says_where(tmp_path: Path):
    cwd, cache = tmp_path / "cwd", tmp_path / "cache"
    cwd.mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(cache),
           "PYTHONPATH": os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)}
    env.pop("SLUICE_CACHE_DIR", None)
    env.pop("SLUICE_CONTROL_TOKEN", None)
    done = subprocess.run([sys.executable, "-m", "engine.cli", "run", "dead_letter_jobs:build", "--job-id", "dl",
                           "--checkpoint-interval", "0", "--log-level", "WARNING"],
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    folders = list((cache / "sluice" / "dead_letters" / "dl").iterdir())
    assert len(folders) == 1, folders  # one folder per run
    assert f"1 dead letter: written to {folders[0]}" in done.stderr, done.stderr[-2000:]
    letters = [json.loads(line) for part in sorted(folders[0].glob("part-*.jsonl"))
               for line in part.read_text().splitlines()]
    assert [(d["value"], d["error"], d["stage"]) for d in letters] == [({"v": 2}, "KeyError: 'k'", "key_selector")]
    assert list(cwd.iterdir()) == []
