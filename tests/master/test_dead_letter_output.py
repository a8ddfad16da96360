"""Dead letters outlive the process (issue 18, "Dead letters kept"; the brief's standard: malformed records go
to a dead-letter output that outlives the process, with the reason).

Real client: an operator who runs ``sluice run --output DIR`` and, after the process is gone, reads
``DIR/_dead_letters/``.  The generator says which offsets it made malformed; every one of them must be
there, once, with its stage, its reason and the record.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).parent))

from test_run_logs import PARAMS, _run  # noqa: E402 - the same bounded purchases job under sluice run

from engine.examples.purchases import PurchaseJobConfig, purchase_source  # noqa: E402


def _malformed_by_the_generator() -> int:
    source = purchase_source(PurchaseJobConfig(**PARAMS))
    return sum(int(source.columns(split, 0, source.events_per_split)["bad"].sum())
               for split in range(source.num_splits))


def test_every_malformed_record_is_in_the_dead_letter_folder_once_with_its_reason(tmp_path: Path) -> None:
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    parts = sorted((tmp_path / "out" / "_dead_letters").glob("part-*.jsonl"))
    letters = [json.loads(line) for part in parts for line in part.read_text().splitlines()]
    expected = _malformed_by_the_generator()
    assert expected > 20
    assert len(letters) == expected == result["metrics"]["num_dead_letter_records"]
    # the run's last words say where they are
    assert f"{expected} dead letters: written to {tmp_path / 'out'}/_dead_letters" in done.stderr, done.stderr[-2000:]
    assert sorted(d["seq"] for d in letters) == list(range(expected))  # once each
    assert len(parts) > 1, "written checkpoint by checkpoint, not only at the end"
    for letter in letters:
        assert letter["job"] == "purchases" and letter["stage"].startswith("timestamp_assigner:generator-")
        assert letter["error"].startswith(("KeyError: 'ts'", "TypeError: timestamp assigner returned"))
        assert isinstance(letter["value"], dict) and letter["value"]["user_id"].startswith("user-")
        assert isinstance(letter["checkpoint_id"], int) or letter["checkpoint_id"] == "end"
