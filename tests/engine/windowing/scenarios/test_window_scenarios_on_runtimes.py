"""The window transcripts (``*.yaml`` here) run as jobs: on the local runtime and on the Spark runtime.

test_window_scenarios.py plays each transcript through the operator harness, step by step.  Here each
transcript becomes one job instead:

* **Source.**  One split (``CollectionSource``) carrying the transcript's ``input`` records as
  ``("record", key, value, ts)`` and, where the transcript has a ``watermark`` step, a marker
  ``("watermark", None, None, ts)``.  A punctuated generator (:class:`TranscriptWatermarks`, engine/watermarks/
  generators.py) emits the marker's watermark from ``on_event``, so it follows the records before it; a
  filter then drops markers (and fillers, below) before ``key_by``.
* **Window.**  The transcript's window on ``key_by(0)``, ``.sum(field)`` etc.; ``allowed_lateness`` and
  ``side_output_late_data`` as the transcript says.  Every window runs twice in the same job: on the variant
  the one predicate picks (engine/windowing/variant.py) and on the general operator, reached through
  :class:`GeneralEventTimeTrigger`, an exact copy of EventTimeTrigger under another type, which the predicate
  gives the general operator by design.  A transcript whose picked variant is already the general one runs
  once.  All outputs, tagged with their stream's name, pass through one keyed process function that
  attaches each record's timestamp (one vertex rather than one per output: on Spark every keyed vertex
  costs work in every epoch).
* **Runtimes.**  ``local`` (the pipelined default: the watermark follows its marker record through every
  channel), ``local-epochs`` (the local runtime with ``epoch_records``, Spark's cadence) and ``spark`` (the
  session ``spark`` fixture, one Spark job run per transcript).

**Epochs.**  On Spark, and on the local runtime with ``epoch_records``, the records of epoch n are judged
against W(n-1), the watermark at the end of epoch n-1, and W(n) fires timers after them (engine/runtime/spark/
runtime.py).  So each *segment* of the transcript — the inputs since the previous ``watermark`` step, then
that step's marker — is made exactly one epoch: segments are padded with ``filler`` records to the same
length ``L`` (inputs, fillers, then the marker last) and the job runs with ``epoch_records = L``.  Records of
a segment are then judged against the previous watermark step, as in the transcript, and two watermark steps
in a row become an epoch of fillers and a marker.

**What is compared.**  A runtime cannot show when in the run a record was emitted, nor its timers or state.
Compared: the concatenation of all ``expect`` steps with the main output, and of all ``expect_late`` steps
with the late side output (collected only with ``late_tag``; without it late records are dropped and nothing
may be expected there), as multisets of ``(key, value, timestamp)``; where ``order_matters`` is true, also
each key's records in order.  Not compared: which ``expect`` step a record belongs to, ``expect_timers``,
``expect_state_entries``.  A bounded job ends with MAX_WATERMARK, which the transcripts here do not write:
their event-time windows are all fired and cleaned up by their last step, so nothing more may come out.

**Skipped by name** (never dropped): transcripts with processing time (a runtime's processing time is its own
clock, per element locally and per epoch on Spark, not the transcript's ``processing_time`` steps); deliberately
wrong ones (``must_fail``: a transcript wrong only about *when* a window fires, as
wrong_tumbling_fires_before_watermark.yaml, has the right multiset, so a runtime run cannot reject it);
and transcripts that check only timers or state entries.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from engine.api.environment import StreamExecutionEnvironment
from engine.api.functions import KeyedProcessFunction
from engine.elements import Watermark
from engine.graph.operator_factory import window_variant_of
from engine.io.collection_source import CollectionSource
from engine.watermarks.generators import WatermarkGenerator
from engine.watermarks.strategy import WatermarkStrategy
from engine.windowing.aggregations import builtin_aggregation
from engine.windowing.triggers import EventTimeTrigger
from engine.windowing.variant import WindowOperatorVariant, window_operator_variant
from transcripts import LATE, SCENARIOS, TranscriptMismatch, load, make_assigner, make_evictor, make_trigger, timestamp

RUNTIMES = ("local", "local-epochs", "spark")

RECORD, WATERMARK, FILLER = "record", "watermark", "filler"


class TranscriptWatermarks(WatermarkGenerator):
    """Punctuated: a ``watermark`` marker of the source emits its timestamp as the split's watermark."""

    def on_event(self, event: Any, event_timestamp: int, output: Any) -> None:
        if event[0] == WATERMARK:
            output.emit_watermark(Watermark(event[3]))

    def on_periodic_emit(self, output: Any) -> None:
        pass


class GeneralEventTimeTrigger(EventTimeTrigger):
    """EventTimeTrigger, unchanged, under another type: the variant predicate runs any trigger that is not
    exactly a built-in one on the general operator (engine/windowing/variant.py), so a window given this
    trigger runs there with the default trigger's behaviour."""


class WithTimestamp(KeyedProcessFunction):
    """``(stream, (key, value))`` -> ``(stream, key, value, timestamp)``: what a transcript's ``expect`` rows hold,
    and which collected stream the row belongs to."""

    def process_element(self, value: Any, ctx: Any) -> Any:
        yield (value[0], value[1][0], value[1][1], ctx.timestamp())


class Tagged:
    """``value`` -> ``(stream, value)``: the outputs of a job's windows travel to one WithTimestamp vertex."""

    def __init__(self, stream: str) -> None:
        self.stream = stream

    def __call__(self, value: Any) -> tuple[str, Any]:
        return (self.stream, value)


def _event_timestamp(event: Any, record_timestamp: Any) -> int:
    return event[3]


def _is_record(event: Any) -> bool:
    return event[0] == RECORD


def _key_value(event: Any) -> tuple[Any, Any]:
    return (event[1], event[2])


def _first(value: Any) -> Any:
    return value[0]


def _stream_and_key(value: Any) -> tuple[str, Any]:
    return (value[0], value[1][0])


# ---- which transcripts a runtime can run ------------------------------------------------------------------


def skip_reason(scenario: dict[str, Any]) -> str | None:
    """Why a runtime cannot run ``scenario`` (module docstring), or None."""
    kinds = [kind for step in scenario["steps"] for kind in step]
    if scenario.get("must_fail"):
        return ("deliberately wrong transcript: it may be wrong only about when a window fires, which a runtime "
                "run (all outputs compared as multisets) cannot see")
    if "processing_time" in kinds or scenario["window"]["assigner"]["type"].endswith("processing_time"):
        return ("processing time: a runtime's processing time is its own clock (per element locally, per epoch "
                "on Spark), not the transcript's processing_time steps")
    if "expect" not in kinds and "expect_late" not in kinds:
        return "checks only expect_timers / expect_state_entries, which a runtime does not expose"
    return None


# ---- the job ----------------------------------------------------------------------------------------------


def segments(scenario: dict[str, Any]) -> list[tuple[list[list[Any]], int | None]]:
    """The transcript's inputs cut at its watermark steps: ``[(inputs, watermark), ...]``; the last
    segment's watermark is None when inputs follow the last watermark step."""
    out: list[tuple[list[list[Any]], int | None]] = []
    pending: list[list[Any]] = []
    for step in scenario["steps"]:
        (kind, arg), = step.items()
        if kind == "input":
            pending += arg
        elif kind == "watermark":
            out.append((pending, timestamp(arg)))
            pending = []
    if pending:
        out.append((pending, None))
    return out


def source_events(scenario: dict[str, Any]) -> tuple[list[tuple], int]:
    """The source's events, every segment padded to one epoch of ``epoch_records`` offsets; and that number."""
    cuts = segments(scenario)
    epoch_records = max(len(inputs) + (watermark is not None) for inputs, watermark in cuts)
    events: list[tuple] = []
    for inputs, watermark in cuts:
        events += [(RECORD, row[0], row[1], timestamp(row[2])) for row in inputs]
        if watermark is not None:
            events += [(FILLER, None, None, 0)] * (epoch_records - len(inputs) - 1)
            events.append((WATERMARK, None, None, watermark))
    return events, epoch_records


def variants(window: dict[str, Any]) -> dict[str, WindowOperatorVariant]:
    """The variants a transcript's window runs on in the job: ``picked`` and, unless that is the general
    operator already, ``general`` (by :class:`GeneralEventTimeTrigger`)."""
    function = window["function"]
    picked = window_operator_variant(
        make_assigner(window["assigner"]), make_trigger(window.get("trigger")), make_evictor(window.get("evictor")),
        None, window.get("allowed_lateness_ms", 0), builtin_aggregation(function["type"], function["field"]),
        specialized=True)
    out = {"picked": picked}
    if picked is not WindowOperatorVariant.GENERAL:
        out["general"] = WindowOperatorVariant.GENERAL
    return out


def build_job(env: StreamExecutionEnvironment, scenario: dict[str, Any]) -> dict[str, Any]:
    """The window outputs: per variant, its main output and (with ``late_tag``) its late side output."""
    events, _ = source_events(scenario)
    strategy = WatermarkStrategy.for_generator(TranscriptWatermarks).with_timestamp_assigner(_event_timestamp)
    keyed = (env.from_source(CollectionSource(events), strategy, "transcript")
             .filter(_is_record).map(_key_value).key_by(_first))
    window = scenario["window"]
    streams: dict[str, Any] = {}
    for name in variants(window):
        windowed = keyed.window(make_assigner(window["assigner"]))
        trigger = make_trigger(window.get("trigger"))
        if name == "general" and trigger is None:
            trigger = GeneralEventTimeTrigger()
        if trigger is not None:
            windowed = windowed.trigger(trigger)
        evictor = make_evictor(window.get("evictor"))
        if evictor is not None:
            windowed = windowed.evictor(evictor)
        windowed = windowed.allowed_lateness(window.get("allowed_lateness_ms", 0))
        if window.get("late_tag"):
            windowed = windowed.side_output_late_data(LATE)
        function = window["function"]
        result = getattr(windowed, function["type"])(function["field"])
        streams[name] = result
        if window.get("late_tag"):
            streams[f"{name}-late"] = result.get_side_output(LATE)
    return streams


def run_on(runtime: str, scenario: dict[str, Any]) -> tuple[dict[str, list[tuple]], dict[str, Any], Any]:
    """Run ``scenario`` as one job on ``runtime``: collected rows by stream name, the window nodes' variants
    as the runtime's operator factory sees them, and the JobExecutionResult."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_runtime("spark" if runtime == "spark" else "local")
    env.set_parallelism(2)
    env.set_max_parallelism(16)
    _, epoch_records = source_events(scenario)
    if runtime != "local":
        env.set_runtime_option("epoch_records", epoch_records)
    streams = build_job(env, scenario)
    ran = {name: window_variant_of(s._node) for name, s in streams.items() if not name.endswith("-late")}
    # one timestamping vertex for all outputs: on Spark each keyed vertex costs work in every epoch
    tagged = [s.map(Tagged(name)) for name, s in streams.items()]
    stamped = tagged[0].union(*tagged[1:]).key_by(_stream_and_key).process(WithTimestamp())
    rows = stamped.execute_and_collect("transcript")
    collected: dict[str, list[tuple]] = {name: [] for name in streams}
    for row in rows:
        collected[row[0]].append(tuple(row[1:]))
    return collected, ran, env.get_last_result()


# ---- comparison -------------------------------------------------------------------------------------------


def expected_rows(scenario: dict[str, Any], kind: str) -> list[tuple]:
    return [(row[0], row[1], timestamp(row[2]))
            for step in scenario["steps"] for k, rows in step.items() if k == kind for row in rows]


def _per_key(rows: list[tuple]) -> dict[Any, list[tuple]]:
    out: dict[Any, list[tuple]] = {}
    for row in rows:
        out.setdefault(row[0], []).append(row)
    return out


def compare(scenario: dict[str, Any], stream: str, kind: str, actual: list[tuple]) -> None:
    expected = expected_rows(scenario, kind)
    actual = [tuple(row) for row in actual]
    if Counter(actual) != Counter(expected):
        raise TranscriptMismatch(f"{stream}: emitted {sorted(actual, key=repr)}, the transcript's {kind} steps "
                                 f"together say {sorted(expected, key=repr)}")
    if scenario.get("order_matters", True) and _per_key(actual) != _per_key(expected):
        raise TranscriptMismatch(f"{stream}: per key, emitted in the order {_per_key(actual)}, the transcript's "
                                 f"{kind} steps say {_per_key(expected)}")


# ---- tests ------------------------------------------------------------------------------------------------


def _cases() -> list[Any]:
    cases = []
    for path in SCENARIOS:
        scenario = load(path)
        reason = skip_reason(scenario)
        for runtime in RUNTIMES:
            marks = [pytest.mark.spark] if runtime == "spark" else []
            if reason is not None:
                marks.append(pytest.mark.skip(reason=f"{path.stem} on {runtime}: {reason}"))
            cases.append(pytest.param(path.stem, runtime, marks=marks, id=f"{path.stem}-{runtime}"))
    return cases


@pytest.mark.parametrize(("stem", "runtime"), _cases())
def test_the_runtime_gives_the_transcripts_outputs(stem: str, runtime: str, request: pytest.FixtureRequest):
    if runtime == "spark":
        request.getfixturevalue("spark")
    scenario = load(next(p for p in SCENARIOS if p.stem == stem))
    collected, ran, result = run_on(runtime, scenario)
    assert ran == variants(scenario["window"]), "the job's windows must run on the variants meant for them"
    for name in ran:
        compare(scenario, name, "expect", collected[name])
        # without late_tag the transcript has no expect_late steps: late records are dropped
        compare(scenario, f"{name}-late", "expect_late", collected.get(f"{name}-late", []))
    if runtime == "spark":
        # one epoch per segment, plus possibly one that only finds the split finished
        assert len(segments(scenario)) <= result.metrics["num_epochs"] <= len(segments(scenario)) + 1, \
            result.metrics


def test_the_runtime_transcripts_cover_every_variant_and_skip_only_by_name():
    runnable = [load(p) for p in SCENARIOS if skip_reason(load(p)) is None]
    ran = {v for scenario in runnable for v in variants(scenario["window"]).values()}
    assert ran == set(WindowOperatorVariant)
    assert any(scenario["window"].get("late_tag") for scenario in runnable), \
        "a runnable transcript must check the late side output"


def test_a_segment_is_one_epoch_with_its_marker_last():
    scenario = {"steps": [{"input": [["a", 1, 1], ["a", 2, 2]]}, {"watermark": 5}, {"watermark": 9},
                          {"input": [["a", 3, 12]]}]}
    events, epoch_records = source_events(scenario)
    assert epoch_records == 3
    assert events == [(RECORD, "a", 1, 1), (RECORD, "a", 2, 2), (WATERMARK, None, None, 5),
                      (FILLER, None, None, 0), (FILLER, None, None, 0), (WATERMARK, None, None, 9),
                      (RECORD, "a", 3, 12)]
