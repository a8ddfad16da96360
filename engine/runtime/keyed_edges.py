"""A keyed edge keys every record, as Flink's keyBy does, whatever the parallelism and whatever consumes it.

A record whose key selector raises is bad data, not a bug in the job: it becomes a dead letter (stage
``key_selector``, the exception as the reason) and the job goes on.  A record of a connected stream travels as
``(input, value)`` (engine/operators/co_functions.py); its selectors say so (``dead_letter_of``), and the dead
letter is the user's record with its input in the stage: ``key_selector:input1`` or ``key_selector:input2``
(engine/operators/base.py ``key_failure``).  Both runtimes route through here: the local runtime's
RecordWriter (engine/runtime/local/writers.py) and the Spark runtime's Router (engine/runtime/spark/chains.py).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from engine.operators.base import key_failure

#: what :func:`key_or_dead_letter` returns for a record that has no key
NO_KEY = object()

DeadLetter = Callable[[Any, BaseException, str], None]


def key_or_dead_letter(selector: Callable[[Any], Any], value: Any, dead_letter: DeadLetter) -> Any:
    """``selector(value)``, or :data:`NO_KEY` after sending ``value`` to ``dead_letter`` when it raises."""
    try:
        return selector(value)
    except Exception as exc:  # noqa: BLE001 - a key the selector cannot give is a dead letter
        key_failure(selector, value, exc, dead_letter)
        return NO_KEY


def keyable(records: Iterable[Any], selector: Callable[[Any], Any], dead_letter: DeadLetter) -> list[Any]:
    """The StreamRecords ``selector`` gives a key, in order; the others become dead letters."""
    return [r for r in records if key_or_dead_letter(selector, r.value, dead_letter) is not NO_KEY]
