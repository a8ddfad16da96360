"""Type-exact key identity inside a keyed subtask (Flink keeps ``1``, ``1.0`` and ``True`` apart; Python's ``==``
does not).

A keyed operator's dicts and sets (keyed state, timers, a window operator's per-batch groups) hold a key's
*identity*: the key itself when it is a str, an int or a flat tuple of them — among those, equal means encoded
alike — else a :class:`TypedKey`, equal to another exactly when their codec texts (``encode_key``) are equal.  Code
that hands a key to the user unwraps it (:func:`key_value`); the codec writes a TypedKey as the key it wraps, so
snapshots do not change; a restore wraps the keys it reads (:func:`key_identity`)."""

from __future__ import annotations

from typing import Any

from engine.state.codec import TypedKey, encode_key

__all__ = ["TypedKey", "key_identity", "key_value", "plain_key"]


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
        text = encode_key(key)
    return TypedKey(key, text)


def key_value(identity: Any) -> Any:
    """The user's key of an identity."""
    return identity.value if type(identity) is TypedKey else identity
