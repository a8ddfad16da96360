"""Type-exact key identity inside a keyed subtask (Flink keeps ``1``, ``1.0`` and ``True`` apart; Python's ``==``
does not).

A keyed operator's dicts and sets (keyed state, timers, a window operator's per-batch groups) hold a key's
*identity*: the key itself when it is a str, an int or a flat tuple of them — among those, equal means encoded
alike — else a :class:`TypedKey`, equal to another exactly when their codec texts (``encode_key``) are equal.  Code
that hands a key to the user unwraps it (:func:`key_value`); the codec writes a TypedKey as the key it wraps, so
snapshots do not change; a restore wraps the keys it reads (:func:`key_identity`)."""

from __future__ import annotations

from typing import Any


class TypedKey:
    """A key whose Python equality could merge it with a key of another type (a float, a bool, a tuple or Row
    holding one, ...), compared by its codec text."""

    __slots__ = ("value", "text", "_hash")

    def __init__(self, value: Any, text: str) -> None:
        self.value = value
        self.text = text
        self._hash = hash(text)

    def __eq__(self, other: object) -> bool:
        return type(other) is TypedKey and other.text == self.text  # type: ignore[attr-defined]

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return repr(self.value)


def plain_key(key: Any) -> bool:
    """Whether ``key`` is its own identity: a str, an int, or a flat tuple of them."""
    t = type(key)
    if t is str or t is int:
        return True
    return t is tuple and all(type(e) is str or type(e) is int for e in key)


def key_identity(key: Any, text: str | None = None) -> Any:
    """``key`` as keyed operators hold it (``text``: its ``encode_key`` text when already known)."""
    if type(key) is TypedKey or plain_key(key):
        return key
    if text is None:
        from engine.state.codec import encode_key

        text = encode_key(key)
    return TypedKey(key, text)


def key_value(identity: Any) -> Any:
    """The user's key of an identity."""
    return identity.value if type(identity) is TypedKey else identity
