"""Window scenarios written as data (Beam's YAML trigger transcripts, STYLE section 6), run through the operator harness.

Each ``*.yaml`` here has a ``window`` definition and ``steps``:

* ``input: [[key, value, ts], ...]`` — elements ``(key, value)`` (ts omitted for processing time);
* ``watermark: n | max`` and ``processing_time: n``;
* ``expect: [[key, value, ts], ...]`` — exactly the records emitted since the previous ``expect``
  (``ts: max`` is MAX_WATERMARK, the timestamp of GlobalWindow results); ``expect_late`` likewise for
  the late-data side output;
* ``expect_timers: {event_time: n, processing_time: n}``, ``expect_state_entries: n``.

Every transcript runs as written element by element, as written in batches (``process_batch``), and
restored into a fresh operator midway.  When ``order_matters: false`` each input bundle is also fed
reversed and shuffled (three seeds) and re-bundled at random, and outputs are compared as multisets.
A transcript with ``must_fail: true`` is deliberately wrong: the runner must reject it.

The same transcripts also run as jobs on the local and Spark runtimes (test_window_scenarios_on_runtimes.py);
reading them is shared in transcripts.py.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import pytest
import yaml

from engine.elements import StreamRecord
from engine.testing.operator_harness import KeyedOneInputStreamOperatorTestHarness
from engine.windowing.aggregations import builtin_aggregation
from engine.operators.keyed_restore import KEYED_TABLE_PREFIX, TIMERS_TABLE
from engine.windowing.slicing import create_window_operator, window_operator_variant
from engine.windowing.window_operator import WindowOperator
from transcripts import LATE, SCENARIOS, TranscriptMismatch
from transcripts import make_assigner as _assigner
from transcripts import make_evictor as _evictor
from transcripts import make_trigger as _trigger
from transcripts import timestamp as _ts

#: how a transcript's operator is built: the general WindowOperator, or the variant the runtimes get
#: (engine/windowing/slicing/: the one predicate picks slicing, columnar or session operators)
BUILDERS: dict[str, Callable[..., WindowOperator]] = {
    "general": WindowOperator,
    "picked": lambda *args, **kwargs: create_window_operator(*args, specialized=True, **kwargs),
}


def make_operator(window: dict[str, Any], builder: str = "general") -> WindowOperator:
    function = window["function"]
    return BUILDERS[builder](
        _assigner(window["assigner"]),
        trigger=_trigger(window.get("trigger")),
        evictor=_evictor(window.get("evictor")),
        incremental_aggregate=builtin_aggregation(function["type"], function["field"]),
        allowed_lateness_ms=window.get("allowed_lateness_ms", 0),
        late_data_output_tag=LATE if window.get("late_tag") else None,
        key_selector=lambda value: value[0],
    )


def _counts(h: KeyedOneInputStreamOperatorTestHarness) -> tuple[dict[str, int], int]:
    """Timers per domain and keyed state entries, read from a snapshot: every variant writes the general
    operator's snapshot format, while a variant's own layout keeps them outside the keyed backend."""
    snapshot = h.snapshot()
    kinds = snapshot.tables[TIMERS_TABLE].column("kind").to_pylist()
    entries = sum(t.num_rows for name, t in snapshot.tables.items() if name.startswith(KEYED_TABLE_PREFIX))
    return {"event_time": kinds.count("event_time"), "processing_time": kinds.count("processing_time")}, entries


def _records(rows: list[list[Any]]) -> list[StreamRecord]:
    return [StreamRecord((row[0], row[1]), _ts(row[2]) if len(row) > 2 else None) for row in rows]


def _expected(rows: list[list[Any]]) -> list[tuple[Any, int]]:
    return [((row[0], row[1]), _ts(row[2])) for row in rows]


class TranscriptRun:
    """Plays one transcript; ``feed`` decides how each input bundle reaches the operator."""

    def __init__(self, scenario: dict[str, Any], mode: str, seed: int = 0, builder: str = "general") -> None:
        self.scenario = scenario
        self.mode = mode
        self.builder = builder
        self.rnd = random.Random(seed)
        self.order_matters = scenario.get("order_matters", True)

    def play(self) -> None:
        window = self.scenario["window"]
        h = KeyedOneInputStreamOperatorTestHarness(make_operator(window, self.builder), max_parallelism=16)
        h.open()
        emitted: list[tuple[Any, int]] = []
        late: list[tuple[Any, int]] = []
        steps = self.scenario["steps"]
        restore_at = len(steps) // 2 if self.mode == "restored-midway" else None
        for index, step in enumerate(steps):
            if index == restore_at:
                emitted += [(r.value, r.timestamp) for r in h.get_output_records()]
                late += [(r.value, r.timestamp) for r in h.side_output(LATE)]
                h = h.restored(make_operator(window, self.builder))
            (kind, arg), = step.items()
            if kind == "input":
                self._feed(h, _records(arg))
            elif kind == "watermark":
                h.process_watermark(_ts(arg))
            elif kind == "processing_time":
                h.set_processing_time(int(arg))
            elif kind in ("expect", "expect_late"):
                emitted += [(r.value, r.timestamp) for r in h.get_output_records()]
                late += [(r.value, r.timestamp) for r in h.side_output(LATE)]
                h.clear_output()
                actual = emitted if kind == "expect" else late
                self._check(index, kind, _expected(arg), actual)
                actual.clear()
            elif kind == "expect_timers":
                counts = _counts(h)[0]
                for domain, n in arg.items():
                    if counts[domain] != n:
                        raise TranscriptMismatch(f"step {index}: {domain} timers {counts[domain]}, transcript says {n}")
            elif kind == "expect_state_entries":
                entries = _counts(h)[1]
                if entries != arg:
                    raise TranscriptMismatch(f"step {index}: {entries} keyed state entries, transcript says {arg}")
            else:
                raise ValueError(f"unknown step {kind!r}")
        leftover = [(r.value, r.timestamp) for r in h.get_output_records()] + emitted
        if leftover:
            raise TranscriptMismatch(f"records emitted after the last expect: {leftover}")

    def _feed(self, h: KeyedOneInputStreamOperatorTestHarness, records: list[StreamRecord]) -> None:
        if self.mode in ("as-written", "restored-midway"):
            for record in records:
                h.process_element(record)
            return
        if self.mode == "batched":
            h.process_elements(records)
            return
        records = list(reversed(records)) if self.mode == "reversed" else self.rnd.sample(records, len(records))
        while records:  # random re-bundling
            cut = self.rnd.randint(1, len(records))
            h.process_elements(records[:cut])
            records = records[cut:]

    def _check(self, index: int, kind: str, expected: list, actual: list) -> None:
        if self.order_matters:
            ok = actual == expected
        else:
            ok = sorted(actual, key=repr) == sorted(expected, key=repr)
        if not ok:
            raise TranscriptMismatch(f"step {index} ({kind}): emitted {actual}, transcript expects {expected}")


def _modes(scenario: dict[str, Any]) -> list[tuple[str, int]]:
    modes = [("as-written", 0), ("batched", 0), ("restored-midway", 0)]
    if not scenario.get("order_matters", True):
        modes += [("reversed", 0)] + [("shuffled", seed) for seed in range(3)]
    return modes


def _cases() -> list[Any]:
    cases = []
    for path in SCENARIOS:
        scenario = yaml.safe_load(path.read_text())
        for builder in BUILDERS:
            for mode, seed in _modes(scenario):
                cases.append(pytest.param(scenario, mode, seed, builder,
                                          id=f"{path.stem}-{builder}-{mode}{seed if mode == 'shuffled' else ''}"))
    return cases


def test_the_transcripts_cover_the_seed_example_and_include_deliberately_wrong_ones():
    names = {p.stem for p in SCENARIOS}
    assert "seed_sliding_count_window" in names
    assert sum(1 for p in SCENARIOS if yaml.safe_load(p.read_text()).get("must_fail")) >= 2


@pytest.mark.parametrize(("scenario", "mode", "seed", "builder"), _cases())
def test_the_operator_behaves_as_the_transcript_says(scenario: dict[str, Any], mode: str, seed: int, builder: str):
    run = TranscriptRun(scenario, mode, seed, builder)
    if scenario.get("must_fail"):
        with pytest.raises(TranscriptMismatch):
            run.play()
    else:
        run.play()


def test_the_picked_operators_cover_every_variant():
    """Guards the "picked" cases above: the transcripts reach each operator variant at least once."""
    variants = set()
    for path in SCENARIOS:
        window = yaml.safe_load(path.read_text())["window"]
        function = window["function"]
        variants.add(window_operator_variant(
            _assigner(window["assigner"]), _trigger(window.get("trigger")), _evictor(window.get("evictor")),
            None, window.get("allowed_lateness_ms", 0), builtin_aggregation(function["type"], function["field"]),
            specialized=True).value)
    assert variants == {"general", "slicing", "slicing-columnar", "session"}
