"""Issue 16's grid: Sluice-on-Spark against native Structured Streaming over key counts, skews and sizes.

Each cell is one ``bench.bench_spark`` process (its own JVM with a 4 GB heap, native and both Sluice forms
taking turns on the same files, medians of ``--repeat`` runs); its last line is read back.  A cell that
fails (an OutOfMemoryError, say) is recorded with its exit code and the tail of its output, and the grid
goes on.  Prints one line per cell and window, then one JSON object with every cell.

    .venv/bin/python -m bench.bench_grid --keys 1000,100000,1000000 --skews 0,1.1 --events 2000000,10000000

The full grid (3 x 2 x 2 cells, 3 sides, 3 repeats, two windows) takes hours on a 2-core host; run it on
a quiet machine.  ``--repeat 1`` and fewer cells give a first look.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_cell(events: int, keys: int, skew: float, args: argparse.Namespace) -> dict:
    command = [sys.executable, "-m", "bench.bench_spark", "--events", str(events), "--keys", str(keys),
               "--skew", str(skew), "--files", str(args.files), "--repeat", str(args.repeat),
               "--windows", args.windows, "--sides", args.sides, "--driver-memory", args.driver_memory]
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=args.cell_timeout_s)
    cell = {"events": events, "keys": keys, "skew": skew, "wall_s": round(time.monotonic() - started, 1),
            "exit_code": done.returncode}
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        cell["result"] = json.loads(lines[-1])
    else:
        cell["output_tail"] = (done.stdout + done.stderr)[-3000:]
        cell["out_of_memory"] = "OutOfMemoryError" in done.stdout + done.stderr
    return cell


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="1000,100000,1000000")
    parser.add_argument("--skews", default="0,1.1")
    parser.add_argument("--events", default="2000000,10000000")
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--windows", default="tumbling,sliding")
    parser.add_argument("--sides", default="native,lambda,column")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--cell-timeout-s", type=float, default=4 * 3600)
    args = parser.parse_args(argv)
    cells = []
    for events, keys, skew in itertools.product([int(e) for e in args.events.split(",")],
                                                [int(k) for k in args.keys.split(",")],
                                                [float(s) for s in args.skews.split(",")]):
        cell = run_cell(events, keys, skew, args)
        cells.append(cell)
        for window in args.windows.split(","):
            figures = cell.get("result", {}).get(window)
            if figures is None:
                print(f"{events:>10,} events {keys:>9,} keys skew {skew}: {window} FAILED (exit {cell['exit_code']}"
                      f"{', OutOfMemoryError' if cell.get('out_of_memory') else ''})", flush=True)
                continue
            print(f"{events:>10,} events {keys:>9,} keys skew {skew}: {window} " + "; ".join(
                f"{side} {f['events_per_s']:,.0f} ev/s" + (f" x{f['ratio_to_native']}" if "ratio_to_native" in f else "")
                for side, f in figures.items()), flush=True)
    print(json.dumps({"benchmark": "bench_grid", "cells": cells}))


if __name__ == "__main__":
    main()
