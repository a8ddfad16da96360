"""DeadLetterOutput's delivery rules (engine/io/dead_letter_output.py), on a real local folder and with a
storage that refuses writes: exactly the dead letters before a mark go with a checkpoint, a restart takes
back what followed the restored mark, a failed write keeps them pending, the end writes the rest."""

from __future__ import annotations

import json
from pathlib import Path

from engine.io.dead_letter_output import DeadLetterOutput, dead_letter_history
from engine.histories import BoundedHistory
from engine.runtime.recovery import persist_dead_letters


def _letter(n: int) -> dict:
    return {"value": f"line {n}", "error": "ValueError: bad", "stage": f"source:s@{n}"}


def _written(folder: Path) -> list[dict]:
    return [json.loads(line) for part in sorted(folder.glob("part-*.jsonl")) for line in part.read_text().splitlines()]


def test_marks_restarts_and_the_end(tmp_path: Path) -> None:
    out = DeadLetterOutput(2, str(tmp_path / "dl"), "job")
    for n in range(5):
        out.append(_letter(n))
    assert out.persist(1, up_to=3) == 3  # checkpoint 1's barrier came after the third
    assert [d["seq"] for d in _written(tmp_path / "dl")] == [0, 1, 2]
    out.take_back_to(4)  # a restart restored a checkpoint whose mark was 4: the fifth is replayed
    out.append(_letter(4))
    out.append(_letter(5))
    assert out.persist("end") == 3
    letters = _written(tmp_path / "dl")
    assert [d["seq"] for d in letters] == list(range(6))
    assert [d["value"] for d in letters] == [f"line {n}" for n in range(6)]
    assert letters[0]["checkpoint_id"] == 1 and letters[-1]["checkpoint_id"] == "end"
    assert len(out) == 2 and out.total == 6  # memory stays bounded, the total exact


def test_a_write_the_storage_refuses_stays_pending_and_never_fails_the_checkpoint(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the folder should be")
    out = DeadLetterOutput(10, str(blocker / "dl"), "job")
    out.append(_letter(0))
    persist_dead_letters(out, 7)  # logs, does not raise
    assert out.num_pending == 1
    blocker.unlink()
    persist_dead_letters(out, 8)
    assert out.num_pending == 0 and [d["checkpoint_id"] for d in _written(blocker / "dl")] == [8]


def test_without_a_folder_the_history_is_memory_only() -> None:
    assert type(dead_letter_history({}, 5, "job")) is BoundedHistory
    assert isinstance(dead_letter_history({"dead_letter_dir": "/tmp/x"}, 5, "job"), DeadLetterOutput)


def test_a_row_a_key_selector_rejects_is_written_as_its_repr(tmp_path: Path) -> None:
    """A PyFlink program's Row records (issue 19) reach the dead-letter folder readable, names and all."""
    from engine import Row, StreamExecutionEnvironment, Types

    def reject_b(row):
        if row.info == "b":
            raise ValueError("no b")
        return row.id

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime_option("dead_letter_dir", str(tmp_path / "dl"))
    row_type = Types.ROW_NAMED(["id", "info"], [Types.INT(), Types.STRING()])
    rows = env.from_collection([(1, "a"), (2, "b")], type_info=row_type)
    assert rows.key_by(reject_b).map(lambda r: r.id).execute_and_collect() == [1]
    assert env.get_last_result().dead_letters[0]["value"] == Row(id=2, info="b")
    [letter] = _written(tmp_path / "dl")
    assert letter["value"] == "Row(id=2, info='b')" and letter["error"] == "ValueError: no b"
