"""Imports each module named on stdin first, each in a forked child of one process (tests/test_import_order.py).

The process first loads every third-party module that importing all of Sluice's modules loads (found in a
throwaway child, then imported here in the order they were loaded), but none of Sluice's own; then it forks
once per module, and the child imports that module and reports.  So each child starts with no module of
Sluice's loaded, as a fresh interpreter does, and pays only for Sluice's own modules: a fresh interpreter per
module spent most of its time importing pyarrow, pandas, Great Expectations and FastAPI again, 177 times.
Which of Sluice's modules load first, and so any import cycle among them, is as in a fresh interpreter.

Protocol: module names on stdin, one per line; one JSON line per module on stdout,
``{"module": ..., "error": "" or the last line of the traceback}``.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import sys
import traceback

OURS = ("engine", "checkpoints", "sluice", "plugins", "dags")


def _ours(name: str) -> bool:
    return name.split(".")[0] in OURS or name == "__main__"


def _start_child(work) -> tuple[int, int]:
    """Fork a child that runs ``work()`` and writes its text result (or ``error: `` and the last line of what it
    raised) to a pipe; (its pid, the pipe's read end)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        os.close(read_end)
        try:
            text = work()
        except BaseException:  # noqa: BLE001 - reported to the parent, which decides
            text = "error: " + (traceback.format_exc().strip().splitlines() or ["?"])[-1]
        with os.fdopen(write_end, "w") as out:
            out.write(text)
        os._exit(0)
    os.close(write_end)
    return pid, read_end


def _result(pid: int, read_end: int) -> str:
    """What the child ``pid`` wrote, once it has ended (reading first: a child blocked on a full pipe never ends)."""
    with os.fdopen(read_end) as got:
        text = got.read()
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return text if code == 0 else f"error: the importing process ended with status {code}"


def main() -> None:
    sys.path[0] = os.getcwd()  # as ``python -c`` has it: the repository root, not tests/ (whose checkpoints/ would
    modules = [line.strip() for line in sys.stdin if line.strip()]  # shadow the package)
    before = set(sys.modules)

    def load_all() -> str:
        for module in modules:
            try:
                importlib.import_module(module)
            except BaseException:  # noqa: BLE001 - the per-module run reports it
                pass
        return json.dumps([n for n in sys.modules if n not in before and not _ours(n)])

    third_party = _result(*_start_child(load_all))
    if third_party.startswith("error: "):
        raise SystemExit(third_party)
    for name in json.loads(third_party):
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001 - left to the children, which import what they need
            pass
    preloaded_ours = sorted(n for n in sys.modules if _ours(n) and n != "__main__")
    if preloaded_ours:
        raise SystemExit(f"a third-party import loaded Sluice's modules first: {preloaded_ours}")
    gc.freeze()  # else each child's collections touch every preloaded object, copying the whole heap per fork
    in_flight: list[tuple[str, int, int]] = []  # two children at a time: the test's host has two cores

    def report(module: str, pid: int, read_end: int) -> None:
        text = _result(pid, read_end)
        print(json.dumps({"module": module, "error": text.removeprefix("error: ") if text else ""}), flush=True)

    for module in modules:
        if len(in_flight) == 2:
            report(*in_flight.pop(0))
        in_flight.append((module, *_start_child(lambda m=module: importlib.import_module(m) and "")))
    for child in in_flight:
        report(*child)


if __name__ == "__main__":
    main()
