"""A pure, single-threaded future: the result of a trigger request (savepoint path, completed checkpoint).

Flink hands back a ``CompletableFuture``.  Sluice's protocol code has no threads,
so a Promise is settled by a method call and runs its callbacks right there, in
the caller's thread; a runtime that needs to wait across threads wraps it.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

from engine.errors import IllegalStateError

T = TypeVar("T")

_PENDING = object()


class Promise(Generic[T]):
    """Settled once, by :meth:`resolve` or :meth:`reject`; callbacks added later run immediately."""

    __slots__ = ("_value", "_error", "_callbacks")

    def __init__(self) -> None:
        self._value: Any = _PENDING
        self._error: BaseException | None = None
        self._callbacks: list[tuple[Callable[[T], Any] | None, Callable[[BaseException], Any] | None]] = []

    @staticmethod
    def resolved(value: T) -> Promise[T]:
        p: Promise[T] = Promise()
        p.resolve(value)
        return p

    def is_done(self) -> bool:
        return self._value is not _PENDING or self._error is not None

    def is_failed(self) -> bool:
        return self._error is not None

    def resolve(self, value: T) -> None:
        self._settle(value, None)

    def reject(self, error: BaseException) -> None:
        self._settle(_PENDING, error)

    def _settle(self, value: Any, error: BaseException | None) -> None:
        if self.is_done():
            raise IllegalStateError(f"Bug: promise settled twice (now with {value if error is None else error!r})")
        self._value, self._error = value, error
        callbacks, self._callbacks = self._callbacks, []
        for on_value, on_error in callbacks:
            self._run(on_value, on_error)

    def then(self, on_value: Callable[[T], Any] | None = None,
             on_error: Callable[[BaseException], Any] | None = None) -> Promise[T]:
        """Call ``on_value`` or ``on_error`` once settled (now, if already settled); returns self."""
        if self.is_done():
            self._run(on_value, on_error)
        else:
            self._callbacks.append((on_value, on_error))
        return self

    def _run(self, on_value: Callable[[T], Any] | None, on_error: Callable[[BaseException], Any] | None) -> None:
        if self._error is not None:
            if on_error is not None:
                on_error(self._error)
        elif on_value is not None:
            on_value(self._value)

    def result(self) -> T:
        """The value; raises the error if rejected and IllegalStateError if not settled yet."""
        if not self.is_done():
            raise IllegalStateError("Promise.result(): not settled yet")
        if self._error is not None:
            raise self._error
        return self._value

    def exception(self) -> BaseException | None:
        return self._error

    def __repr__(self) -> str:
        state = "pending" if not self.is_done() else ("failed" if self._error else "resolved")
        return f"Promise({state})"
