"""A keyed edge keys every record, as Flink's keyBy does, whatever the parallelism and whatever consumes it.

A record whose key selector raises, or gives a key no keyed state can hold (a list or a dict, say a JSON field
holding one), is bad data, not a bug in the job: it becomes a dead letter (stage ``key_selector``, the exception
as the reason) and the job goes on.  A record of a connected stream travels as
``(input, value)`` (engine/operators/co_functions.py); its selectors say so (``dead_letter_of``), and the dead
letter is the user's record with its input in the stage: ``key_selector:input1`` or ``key_selector:input2``
(engine/operators/base.py ``key_failure``).  Both runtimes route through here: the local runtime's
RecordWriter (engine/runtime/local/writers.py) and the Spark runtime's Router (engine/runtime/spark/chains.py).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from engine.errors import MalformedRecordError
from engine.operators.base import key_failure

#: what :func:`key_or_dead_letter` returns for a record that has no key
NO_KEY = object()

DeadLetter = Callable[[Any, BaseException, str], None]


def check_key(key: Any) -> None:
    """Raise :class:`MalformedRecordError` for a key no keyed state can hold (a list or a dict: unhashable); a str
    or an int is not even looked at (the per-record cost of the common keys)."""
    t = type(key)
    if t is not str and t is not int:
        try:
            hash(key)
        except TypeError:
            raise MalformedRecordError(
                f"its key {key!r} ({t.__name__}) cannot be a key: it is not hashable (key by a str, a number or a "
                "tuple)", "key_selector") from None


def key_or_dead_letter(selector: Callable[[Any], Any], value: Any, dead_letter: DeadLetter) -> Any:
    """``selector(value)``, or :data:`NO_KEY` after sending ``value`` to ``dead_letter`` when it raises or gives a
    key that cannot be one (:func:`check_key`)."""
    try:
        key = selector(value)
        check_key(key)
        return key
    except Exception as exc:  # noqa: BLE001 - a key the selector cannot give is a dead letter
        key_failure(selector, value, exc, dead_letter)
        return NO_KEY


def keyable(records: Iterable[Any], selector: Callable[[Any], Any], dead_letter: DeadLetter) -> list[Any]:
    """The StreamRecords ``selector`` gives a key, in order; the others become dead letters."""
    return [r for r in records if key_or_dead_letter(selector, r.value, dead_letter) is not NO_KEY]
