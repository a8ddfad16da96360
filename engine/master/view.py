"""The job view: one HTML page with server-rendered inline SVG charts, served by the job master.

``GET /jobs/{job_id}/view`` (engine/master/api.py) renders :func:`render_view` from the master's
:class:`~engine.master.timeline.JobTimeline`: the operators with their parallelism, records in and out and
rates per operator chain, and each operator subtask's input watermark; the watermark of every source split over time with its idle periods shaded
(seed 004); the checkpoint history (completed and failed, duration against the checkpoint interval, full
and incremental size); epoch duration (Spark) and late-record and dead-letter counts over time.

No script and no external request: the charts are SVG drawn here (geometry in Python, numbers only) and
written by a Jinja2 template with autoescape on, so every string that comes from the job (its name, split
ids, failure reasons) is escaped.  The page carries a Content-Security-Policy that forbids scripts and any
load (``default-src 'none'``), so it stays inert where it is embedded (the Airflow plugin's job page puts
it in a sandboxed ``<iframe srcdoc>``).

Each plotted point is a ``<circle class="point">`` with ``data-series``, ``data-time-ms`` and ``data-value``
and a ``<title>``, so a test (or a curious operator) can read the numbers behind a chart.  A series with
more than :data:`MAX_POINTS` samples is thinned evenly, its newest point always kept.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Hashable, Sequence

from engine.master.timeline import CheckpointRow, TimelineSample

#: points drawn per series at most (the timeline may hold many more samples) ...
MAX_POINTS = 240
#: ... and per chart: a chart of many splits thins each line further (the page stays well under a megabyte)
CHART_POINT_BUDGET = 2_400
#: distinct series colours, cycled; idle periods are grey
PALETTE = ("#4b77be", "#d9822b", "#2e9e6a", "#b84fa3", "#c23b3b", "#5b6fd6", "#8a8f2c", "#2c8a8f")
WIDTH = 760
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 84, 28, 22, 30
#: lane labels longer than this are cut (the full split id is the lane's tooltip and in the legend)
LANE_LABEL_CHARS = 13
LANE_HEIGHT = 16

#: the page's own policy: no script, no load of any kind, inline styles only
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"


@dataclass(frozen=True, slots=True)
class Point:
    x: float
    y: float
    time_ms: int
    value: float
    title: str


@dataclass(slots=True)
class Series:
    name: str
    color: str
    points: list[Point] = field(default_factory=list)
    #: polylines: runs of consecutive points without a gap (a missing value breaks the line)
    paths: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Box:
    """A rectangle: a bar, or an idle period on a split's lane."""

    x: float
    y: float
    w: float
    h: float
    css: str
    title: str
    color: str = ""


@dataclass(slots=True)
class Chart:
    chart_id: str
    title: str
    caption: str
    height: int
    y_label: str = ""
    width: int = WIDTH
    x_ticks: list[tuple[float, str]] = field(default_factory=list)
    y_ticks: list[tuple[float, str]] = field(default_factory=list)
    series: list[Series] = field(default_factory=list)
    boxes: list[Box] = field(default_factory=list)
    #: horizontal reference lines: (y, label), e.g. the checkpoint interval
    rules: list[tuple[float, str]] = field(default_factory=list)
    #: lane labels at the left: (y, text)
    lanes: list[tuple[float, str]] = field(default_factory=list)
    empty: str | None = None

    @property
    def plot_bottom(self) -> float:
        return self.height - MARGIN_BOTTOM


# -- formatting --------------------------------------------------------------------------------


def _clock(ms: int | float) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%H:%M:%S")


def _when(ms: int | None) -> str:
    if not ms:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _watermark(ms: int | None) -> str:
    """A watermark: MAX_WATERMARK (every input ended) has no date."""
    if ms is None:
        return "-"
    if ms >= 2 ** 62:
        return "end of input"
    when = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return when.strftime("%Y-%m-%d %H:%M:%S") + f".{ms % 1000:03d} UTC"


def _number(value: float) -> str:
    if abs(value) >= 1e6:
        return f"{value / 1e6:.1f}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.0f}k"
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def _bytes(value: int | None) -> str:
    if value is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024  # type: ignore[assignment]
    return f"{value} B"


def _ticks(low: float, high: float, count: int = 4) -> list[float]:
    if high <= low:
        return [low]
    step = (high - low) / count
    return [low + i * step for i in range(count + 1)]


# -- scales ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Scale:
    low: float
    high: float
    start: float  # pixel of low
    end: float  # pixel of high

    def __call__(self, value: float) -> float:
        if self.high == self.low:
            return (self.start + self.end) / 2
        return self.start + (value - self.low) * (self.end - self.start) / (self.high - self.low)


def _y_range(values: Sequence[float], from_zero: bool) -> tuple[float, float]:
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    if from_zero:
        low = min(0.0, low)
    if high == low:
        high = low + (abs(low) * 0.1 or 1.0)
    return low, high


def _thin(indexes: Sequence[int], at_most: int = MAX_POINTS) -> list[int]:
    """At most about ``at_most`` of ``indexes``, evenly spread, the newest kept."""
    if len(indexes) <= at_most:
        return list(indexes)
    step = math.ceil(len(indexes) / at_most)
    kept = list(indexes[::step])
    if kept[-1] != indexes[-1]:
        kept.append(indexes[-1])
    return kept


def _time_chart(chart: Chart, samples: list[TimelineSample], lines: list[tuple[str, Callable[[TimelineSample], Any]]],
                fmt: Callable[[float], str] = _number, from_zero: bool = True, plot_height: int = 170) -> Chart:
    """Lines over the samples' times: one Series per ``(name, value of a sample)``; None values leave gaps."""
    if not samples:
        chart.empty = "no samples yet"
        return chart
    t0, t1 = samples[0].time_ms, samples[-1].time_ms
    x = _Scale(t0, t1 if t1 > t0 else t0 + 1, MARGIN_LEFT, chart.width - MARGIN_RIGHT)
    values = [v for _, get in lines for s in samples if (v := get(s)) is not None]
    if not values:
        chart.empty = chart.empty or "nothing reported yet"
        return chart
    low, high = _y_range(values, from_zero)
    y = _Scale(low, high, MARGIN_TOP + plot_height, MARGIN_TOP)
    chart.y_ticks = [(y(v), fmt(v)) for v in _ticks(low, high)]
    chart.x_ticks = [(x(t), _clock(t)) for t in _ticks(t0, max(t1, t0 + 1), 4)]
    drawn = _thin(range(len(samples)), max(24, min(MAX_POINTS, CHART_POINT_BUDGET // len(lines))))
    for n, (name, get) in enumerate(lines):
        series = Series(name, PALETTE[n % len(PALETTE)])
        run: list[str] = []
        for i in drawn:
            value = get(samples[i])
            if value is None:
                if run:
                    series.paths.append(" ".join(run))
                run = []
                continue
            px, py = x(samples[i].time_ms), y(value)
            series.points.append(Point(px, py, samples[i].time_ms, float(value),
                                       f"{name} at {_clock(samples[i].time_ms)}: {fmt(value)}"))
            run.append(f"{px:.1f},{py:.1f}")
        if run:
            series.paths.append(" ".join(run))
        chart.series.append(series)
    return chart


# -- the charts --------------------------------------------------------------------------------


def throughput_chart(samples: list[TimelineSample]) -> Chart:
    chart = Chart("throughput", "Records per second",
                  "in: read from sources (over the runtime's rate window); out: written by sinks, between samples",
                  height=MARGIN_TOP + 170 + MARGIN_BOTTOM, y_label="records/s")
    return _time_chart(chart, samples, [("in", lambda s: s.records_per_second),
                                        ("out", lambda s: s.records_out_per_second)])


def split_ids(samples: list[TimelineSample]) -> list[str]:
    seen: dict[str, None] = {}
    for s in samples:
        for r in s.splits:
            seen.setdefault(r.split_id, None)
    return sorted(seen)


def watermark_chart(samples: list[TimelineSample]) -> Chart:
    """Each split's watermark over time, and below, one lane per split with its idle periods shaded."""
    splits = split_ids(samples)
    plot = 170
    lanes_top = MARGIN_TOP + plot + 28
    chart = Chart("watermarks", "Watermarks per split",
                  "each source split's watermark (event time) over time; below, one lane per split: "
                  "grey while the split is idle (it holds no watermark back)",
                  height=lanes_top + LANE_HEIGHT * max(1, len(splits)) + MARGIN_BOTTOM, y_label="event time")
    if not splits:
        chart.caption = ("the job reports no source splits (finished, or a source without per-split watermarks): "
                         "the job's watermark is shown")
        return _time_chart(chart, samples, [("job", lambda s: s.watermark_ms)], fmt=_clock, from_zero=False)
    by_split = {id(s): {r.split_id: r for r in s.splits} for s in samples}  # one lookup per point, not a scan
    lines = [(sid, functools.partial(_split_watermark, by_split, sid)) for sid in splits]
    _time_chart(chart, samples, lines, fmt=_clock, from_zero=False, plot_height=plot)
    if not samples:
        return chart
    t0, t1 = samples[0].time_ms, samples[-1].time_ms
    x = _Scale(t0, t1 if t1 > t0 else t0 + 1, MARGIN_LEFT, chart.width - MARGIN_RIGHT)
    for lane, sid in enumerate(splits):
        top = lanes_top + lane * LANE_HEIGHT
        label = sid if len(sid) <= LANE_LABEL_CHARS else sid[:LANE_LABEL_CHARS - 1] + "\u2026"
        chart.lanes.append((top + LANE_HEIGHT * 0.7, label))
        chart.boxes.append(Box(MARGIN_LEFT, top + 2, chart.width - MARGIN_RIGHT - MARGIN_LEFT, LANE_HEIGHT - 4,
                               "lane", sid))
        for start, end in _idle_periods(samples, by_split, sid):
            left = x(start)
            right = x(end) if end > start else left + 3
            chart.boxes.append(Box(left, top + 2, max(3.0, right - left), LANE_HEIGHT - 4, "idle",
                                   f"{sid} idle {_clock(start)}-{_clock(end)}"))
    return chart


def _split_watermark(by_split: dict[int, dict[str, Any]], split_id: str, sample: TimelineSample) -> int | None:
    r = by_split[id(sample)].get(split_id)
    if r is None or r.watermark_ms is None or not 0 < r.watermark_ms < 2 ** 62:  # none yet, or MIN/MAX_WATERMARK
        return None
    return r.watermark_ms


def _idle_periods(samples: list[TimelineSample], by_split: dict[int, dict[str, Any]],
                  split_id: str) -> list[tuple[int, int]]:
    """``(from, to)`` times of each run of samples in which the split was idle (to: the next sample's time)."""
    periods: list[tuple[int, int]] = []
    start: int | None = None
    for i, s in enumerate(samples):
        reading = by_split[id(s)].get(split_id)
        idle = reading is not None and reading.idle
        if idle and start is None:
            start = s.time_ms
        if not idle and start is not None:
            periods.append((start, s.time_ms))
            start = None
        if idle and i == len(samples) - 1:
            periods.append((start, s.time_ms))  # type: ignore[arg-type]
    return periods


def checkpoint_duration_chart(rows: list[CheckpointRow], interval_ms: int | None) -> Chart:
    plot = 170
    chart = Chart("checkpoint-durations", "Checkpoint duration",
                  "one bar per checkpoint or savepoint, from trigger to completion; failed ones in red "
                  "(full height); the dashed line is the checkpoint interval",
                  height=MARGIN_TOP + plot + MARGIN_BOTTOM + 14, y_label="ms")
    if not rows:
        chart.empty = "no checkpoint completed or failed yet"
        return chart
    durations = [r.duration_ms for r in rows if r.duration_ms is not None]
    high = max(durations + ([interval_ms] if interval_ms else []) + [1])
    y = _Scale(0, high * 1.1, MARGIN_TOP + plot, MARGIN_TOP)
    chart.y_ticks = [(y(v), _number(v)) for v in _ticks(0, high * 1.1)]
    if interval_ms:
        chart.rules.append((y(interval_ms), f"interval {interval_ms} ms"))
    _bars(chart, rows, y, plot, lambda r: r.duration_ms,
          lambda r: f"{r.duration_ms} ms" if r.duration_ms is not None else "duration unknown")
    return chart


def checkpoint_size_chart(rows: list[CheckpointRow]) -> Chart:
    plot = 170
    chart = Chart("checkpoint-sizes", "Checkpoint size",
                  "per completed checkpoint: full size (every state file it references) and incremental size "
                  "(the files it added)", height=MARGIN_TOP + plot + MARGIN_BOTTOM + 14, y_label="bytes")
    completed = [r for r in rows if r.status == "completed"]
    sizes = [v for r in completed for v in (r.full_bytes, r.incremental_bytes) if v is not None]
    if not sizes:
        chart.empty = "no size known yet (the runtime did not report one)"
        return chart
    y = _Scale(0, max(sizes) * 1.1, MARGIN_TOP + plot, MARGIN_TOP)
    chart.y_ticks = [(y(v), _bytes(int(v))) for v in _ticks(0, max(sizes) * 1.1)]
    slot = (chart.width - MARGIN_LEFT - MARGIN_RIGHT) / len(completed)
    bar = max(2.0, min(18.0, slot * 0.38))
    for i, r in enumerate(completed):
        left = MARGIN_LEFT + i * slot + (slot - 2 * bar) / 2
        for n, (css, value, color) in enumerate((("full", r.full_bytes, PALETTE[0]),
                                                 ("incremental", r.incremental_bytes, PALETTE[1]))):
            if value is None:
                continue
            chart.boxes.append(Box(left + n * bar, y(value), bar, y(0) - y(value), f"bar {css}",
                                   f"{r.kind} {r.checkpoint_id}: {css} {_bytes(value)}", color))
        chart.x_ticks.append((left + bar, str(r.checkpoint_id)))
    chart.series = [Series("full", PALETTE[0]), Series("incremental", PALETTE[1])]  # the legend
    return chart


def _bars(chart: Chart, rows: list[CheckpointRow], y: _Scale, plot: int, value: Callable[[CheckpointRow], Any],
          label: Callable[[CheckpointRow], str]) -> None:
    slot = (chart.width - MARGIN_LEFT - MARGIN_RIGHT) / len(rows)
    bar = max(2.0, min(24.0, slot * 0.6))
    for i, r in enumerate(rows):
        left = MARGIN_LEFT + i * slot + (slot - bar) / 2
        if r.status == "failed":
            chart.boxes.append(Box(left, MARGIN_TOP, bar, plot, "bar failed",
                                   f"{r.kind} {r.checkpoint_id} failed: {r.reason}", "#c23b3b"))
        elif value(r) is not None:
            top = y(value(r))
            chart.boxes.append(Box(left, top, bar, y(0) - top, f"bar {r.kind}",
                                   f"{r.kind} {r.checkpoint_id}: {label(r)}",
                                   PALETTE[2] if r.kind == "savepoint" else PALETTE[0]))
        chart.x_ticks.append((left + bar / 2, str(r.checkpoint_id)))
    if len(rows) > 30:  # keep the axis readable: every n-th id
        step = math.ceil(len(rows) / 30)
        chart.x_ticks = chart.x_ticks[::step]


def epoch_chart(samples: list[TimelineSample]) -> Chart:
    chart = Chart("epochs", "Epoch duration",
                  "Spark runtime: mean time per epoch between two samples (the local runtime has no epochs)",
                  height=MARGIN_TOP + 140 + MARGIN_BOTTOM, y_label="ms")
    chart.empty = "no epochs: the local runtime processes records continuously" if not any(
        s.epoch for s in samples) else None
    return _time_chart(chart, samples, [("epoch", lambda s: s.epoch_ms)], plot_height=140)


def _operator_names(samples: list[TimelineSample]) -> dict[str, str]:
    seen: dict[str, str] = {}
    for s in samples:
        for r in s.operators:
            seen.setdefault(r.uid, r.name)
    return seen


def _keyed_lines_chart(chart: Chart, samples: list[TimelineSample], rows: Callable[[TimelineSample], Sequence[Any]],
                       key: Callable[[Any], Hashable], value: Callable[[Any], Any], label: Callable[[Any], str],
                       empty: str, sort_keys: bool = False, **kwargs: Any) -> Chart:
    """One line per key the samples' rows carry: ``rows(sample)`` lists a sample's rows, ``key(row)`` says which
    line a row belongs to, ``value(row)`` is its point and ``label(key)`` names the line.  Lines come in the order
    their keys first appear (sorted with ``sort_keys``); a sample without a row for a key leaves a gap in that
    line; without any row the chart says ``empty``.  ``kwargs`` go to the time chart."""
    keys: dict[Hashable, None] = {}
    for s in samples:
        for r in rows(s):
            keys.setdefault(key(r), None)
    if not keys:
        chart.empty = empty
        return chart

    def point(k: Hashable, sample: TimelineSample) -> Any:
        return next((value(r) for r in rows(sample) if key(r) == k), None)

    ordered = sorted(keys) if sort_keys else list(keys)
    return _time_chart(chart, samples, [(label(k), functools.partial(point, k)) for k in ordered], **kwargs)


def operator_rate_chart(samples: list[TimelineSample]) -> Chart:
    """Records each operator chain sent (or handed to its sinks) per second, one line per chain."""
    chart = Chart("operator-rates", "Records out per second, per operator",
                  "each operator chain's records sent downstream (or to its sinks) per second between two samples",
                  height=MARGIN_TOP + 170 + MARGIN_BOTTOM, y_label="records/s")
    names = _operator_names(samples)
    return _keyed_lines_chart(chart, samples, lambda s: s.operators, key=lambda r: r.uid,
                              value=lambda r: r.out_per_second, label=lambda uid: f"{names[uid]} [{uid}]",
                              empty="the runtime reports no per-operator counts")


def _event_time(ms: int | None) -> int | None:
    """A watermark worth drawing: none yet (MIN) and end of event time (MAX) leave gaps."""
    return ms if ms is not None and 0 < ms < 2 ** 62 else None


def subtask_watermark_chart(samples: list[TimelineSample]) -> Chart:
    """The input watermark of every listed operator subtask over time."""
    chart = Chart("subtask-watermarks", "Watermarks per operator subtask",
                  "each subtask's input watermark (a source subtask's: the one it generates from its splits)",
                  height=MARGIN_TOP + 170 + MARGIN_BOTTOM, y_label="event time")
    names = _operator_names(samples)
    return _keyed_lines_chart(chart, samples, lambda s: s.subtask_watermarks, key=lambda w: (w.uid, w.index),
                              value=lambda w: _event_time(w.watermark_ms), sort_keys=True,
                              label=lambda k: f"{names.get(k[0], k[0])} [{k[0]}] #{k[1]}",
                              empty="the runtime lists no operator subtasks", fmt=_clock, from_zero=False)


def late_and_dead_letter_chart(samples: list[TimelineSample]) -> Chart:
    chart = Chart("late-dead-letters", "Late records and dead letters",
                  "records dropped as late by windows, and records sent to the dead-letter output, since the "
                  "job (attempt) started", height=MARGIN_TOP + 140 + MARGIN_BOTTOM, y_label="records")
    return _time_chart(chart, samples, [("late dropped", lambda s: s.late_records_dropped),
                                        ("dead letters", lambda s: s.dead_letters)], plot_height=140)


# -- the page ----------------------------------------------------------------------------------


def operator_rows(operators: list[dict[str, Any]] | None, latest: TimelineSample | None) -> list[dict[str, str]]:
    """The operator table: each operator chain (vertex) with its parallelism, records in and out as the runtime
    counted them (engine/runtime/operator_metrics.py) and their rates since the previous sample.  Chains the
    master described are matched by uid; without a description, the chains the status reports are listed."""
    readings = {r.uid: r for r in latest.operators} if latest is not None else {}
    described = operators if operators is not None else [
        {"uid": r.uid, "name": r.name, "parallelism": r.parallelism} for r in readings.values()]
    rows = []
    for op in described:
        reading = readings.get(str(op.get("uid")))
        rows.append({"uid": str(op.get("uid", "")), "name": str(op.get("name")),
                     "parallelism": str(op.get("parallelism", "-")),
                     "inputs": ", ".join(str(i) for i in op.get("inputs", ())) or "-",
                     "records_in": _count(reading.records_in if reading else None),
                     "rate_in": _rate(reading.in_per_second if reading else None),
                     "records_out": _count(reading.records_out if reading else None),
                     "rate_out": _rate(reading.out_per_second if reading else None),
                     "watermark": _watermark(reading.watermark_ms if reading else None)})
    return rows


def subtask_watermark_rows(latest: TimelineSample | None) -> list[dict[str, str]]:
    """Each listed subtask's current input watermark (Flink's web UI "Watermarks" tab)."""
    if latest is None:
        return []
    names = {r.uid: r.name for r in latest.operators}
    return [{"operator": names.get(w.uid, w.uid), "uid": w.uid, "subtask": str(w.index),
             "watermark": _watermark(w.watermark_ms), "watermark_ms": "" if w.watermark_ms is None else str(w.watermark_ms)}
            for w in latest.subtask_watermarks]


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}/s"


def checkpoint_table(rows: list[CheckpointRow], interval_ms: int | None) -> list[dict[str, str]]:
    out = []
    for r in reversed(rows):  # newest first
        over = r.duration_ms is not None and bool(interval_ms) and r.duration_ms > interval_ms  # type: ignore[operator]
        out.append({"id": str(r.checkpoint_id), "kind": r.kind, "status": r.status,
                    "time": _when(r.time_ms), "duration": "-" if r.duration_ms is None else f"{r.duration_ms} ms",
                    "over_interval": "yes" if over else "", "full": _bytes(r.full_bytes),
                    "incremental": _bytes(r.incremental_bytes), "reason": r.reason or ""})
    return out


@functools.lru_cache(maxsize=1)
def _template() -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
                             autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    return env.get_template("job_view.html")


def render_view(job_id: str, status: dict[str, Any], samples: list[TimelineSample], rows: list[CheckpointRow],
                operators: list[dict[str, Any]] | None = None, interval_ms: int | None = None,
                sample_interval_ms: int | None = None, capacity: int | None = None) -> str:
    """The page, from the job's current ``status`` and its timeline; ``interval_ms`` 0: checkpointing is off,
    None: not known."""
    latest = samples[-1] if samples else None
    failed_rows = sum(1 for r in rows if r.status == "failed")
    failed_count = status.get("num_failed_checkpoints")
    unitemised = failed_count - failed_rows if isinstance(failed_count, int) and failed_count > failed_rows else 0
    facts = [
        ("job", str(status.get("job_name") or job_id)), ("job id", job_id), ("state", str(status.get("state"))),
        ("parallelism", str(status.get("parallelism", "-"))),
        ("records in / out", f"{_count(_int(status.get('records_in')))} / {_count(_int(status.get('records_out')))}"),
        ("watermark", _when(_int(status.get("watermark_ms")))),
        ("last completed checkpoint", str(status.get("last_completed_checkpoint"))),
        ("checkpoints completed / failed", f"{status.get('num_completed_checkpoints', '-')} / {failed_count or 0}"),
        ("checkpoint interval", f"{interval_ms} ms" if interval_ms else "checkpointing off" if interval_ms == 0
         else "not known to this master"),
        ("restarts", str(status.get("restarts", "-"))),
    ]
    span = (f"{len(samples)} samples" + (f", one every {sample_interval_ms / 1000:g} s" if sample_interval_ms else "")
            + (f"; the newest {capacity} are kept" if capacity else ""))
    failures = [str(f.get("message", f)) if isinstance(f, dict) else str(f) for f in status.get("failures") or ()]
    charts = [throughput_chart(samples), operator_rate_chart(samples), watermark_chart(samples),
              subtask_watermark_chart(samples), checkpoint_duration_chart(rows, interval_ms),
              checkpoint_size_chart(rows), epoch_chart(samples), late_and_dead_letter_chart(samples)]
    return _template().render(
        title=f"Sluice job {status.get('job_name') or job_id}", job_id=job_id, facts=facts, span=span,
        operators=operator_rows(operators, latest), operators_known=operators is not None,
        subtask_watermarks=subtask_watermark_rows(latest),
        charts=charts, checkpoints=checkpoint_table(rows, interval_ms), unitemised_failures=unitemised,
        failures=failures, splits=split_ids(samples), csp=CONTENT_SECURITY_POLICY,
        generated=_when(latest.time_ms if latest else None), margin_left=MARGIN_LEFT, margin_right=MARGIN_RIGHT,
        margin_top=MARGIN_TOP)


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


class JobView:
    """The view of one job: its timeline, fed by :meth:`sample` (the master's status publication), and the
    page, rendered by :meth:`render` from the job's current status and the timeline.

    ``sample_on_render``: a master that publishes no status (e.g. the plugin tests' stand-in master) samples
    once per page request instead, so its view still shows the job's current figures."""

    def __init__(self, job: Any, timeline: Any, operators: list[dict[str, Any]] | None = None,
                 interval_ms: int | None = None, sample_interval_ms: int | None = None,
                 sample_on_render: bool = False) -> None:
        self.job = job
        self.timeline = timeline
        self.operators = operators
        self.interval_ms = interval_ms
        self.sample_interval_ms = sample_interval_ms
        self.sample_on_render = sample_on_render

    def sample(self) -> TimelineSample:
        return self.timeline.sample(self.job.status(), self.job.checkpoint_history())

    def render(self) -> str:
        if self.sample_on_render:
            self.sample()
        status = self.job.status()
        samples, rows = self.timeline.snapshot()
        return render_view(self.job.job_id, status, samples, rows, self.operators, self.interval_ms,
                           self.sample_interval_ms, self.timeline.capacity)


def describe_operators(plan: Any) -> list[dict[str, Any]]:
    """The job's operator chains as the runtimes plan them (engine/graph/plan.py): name, parallelism, inputs,
    and whether the chain reads a source or holds a sink."""
    from engine.graph.transformations import SinkTransformation

    return [{"uid": v.head.operator_uid(), "name": v.name, "parallelism": v.parallelism, "is_source": v.is_source(),
             "is_sink": any(isinstance(n, SinkTransformation) for n in v.nodes),
             "inputs": [f"{e.source_vertex.name} ({e.partitioning.value})" for e in v.inputs]}
            for v in plan.vertices]
