"""Values in state as data, never pickle (ARCHITECTURE section 5, STYLE section 9).

State values, keys and accumulators are encoded to canonical JSON text.  Plain
JSON types map to themselves; the few Python types JSON lacks are tagged with a
single-key object whose key starts with ``$``:

==========  ===================================
tuple       ``{"$t": [...]}``
bytes       ``{"$b": "<base64>"}``
dict        plain object when every key is a ``str`` not starting with ``$``,
            otherwise ``{"$m": [[k, v], ...]}``
float nan   ``{"$f": "nan"}`` / ``"inf"`` / ``"-inf"`` (JSON has no such numbers)
datetime    ``{"$dt": "<ISO 8601>"}`` (naive, or with its UTC offset; ``["<ISO 8601>", 1]``
            when ``fold=1``); a datetime in a named ``zoneinfo`` zone keeps the zone:
            ``{"$dz": ["<naive ISO 8601>", fold, "<zone key>"]}``
date        ``{"$d": "YYYY-MM-DD"}``
time        ``{"$tm": "<ISO 8601>"}`` (fold as for datetime)
timedelta   ``{"$td": [days, seconds, microseconds]}``
Decimal     ``{"$dec": "<str(d)>"}`` (exact, trailing zeros kept)
Row         ``{"$row": ["<kind>", ["<name>", ...] or null, [values]]}`` (engine/row.py; kind ``+I``, ``-U``,
            ``+U`` or ``-D``; null for a row of positions only)
==========  ===================================

The date and time types and ``Decimal`` are what Parquet and CSV readers hand out for timestamp,
date, time, duration and decimal columns, so records read by ``read_files`` can be window
elements and accumulators as they are.  A datetime subclass (``pandas.Timestamp``) is stored as
the datetime it is (microseconds; nanoseconds are dropped), as a numpy scalar is stored as its
Python value.

Anything else (objects, sets, functions) is refused with a
:class:`StateSerializationError` that says how to make it storable; decoding
builds only these types, so reading a snapshot never runs code.

``encode_key`` is canonical (sorted object keys, no spaces) because key groups
are derived from its bytes and must agree across processes and runtimes.  Keys that are equal
but written differently get one text: an aware datetime key is written in UTC (12:00+01:00 and
11:00Z are the same key; a wall time its zone repeats or skips has no single instant and is
refused as a key), a ``Decimal`` key without trailing zeros (``1.50`` and ``1.5``), a named ``Row`` key with
its fields in name order (``Row(a=1, b=2) == Row(b=2, a=1)``, as PyFlink compares rows; such a key reads
back with its names sorted).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import msgspec

from engine.errors import CorruptSnapshotError, StateSerializationError
from engine.row import Row, RowKind
from engine.windowing.windows import Window

_TEMPORAL_TAGS = frozenset(("$dt", "$dz", "$d", "$tm", "$td", "$dec"))


# Built once: ``json.dumps`` with options builds a new encoder on every call, which costs more than
# encoding a short key.  Same settings, same text.
_VALUE_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_KEY_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True, allow_nan=False)
_JSON_DECODER = msgspec.json.Decoder()


class TypedKey:
    """A key whose Python equality could merge it with a key of another type (a float, a bool, a tuple or Row
    holding one, ...), compared by its codec text: the identity keyed operators hold (engine/state/key_identity.py).
    Encoded as the key it wraps."""

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



def _to_jsonable(value: Any, path: str, key: bool = False) -> Any:
    """``value`` as plain JSON data; ``key``: write equal keys alike (module docstring)."""
    if type(value) is TypedKey:  # a key's identity inside a keyed operator is written as the key
        value = value.value
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {"$f": "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")}
    if isinstance(value, list):
        return [_to_jsonable(v, f"{path}[{i}]", key) for i, v in enumerate(value)]
    if isinstance(value, Row):
        return _row_jsonable(value, path, key)
    if isinstance(value, tuple):
        if isinstance(value, Window):  # a TimeWindow is a tuple underneath, but a window is no state value
            raise StateSerializationError(
                f"cannot store the window {value!r} at {path} in state: store its start and end instead"
            )
        return {"$t": [_to_jsonable(v, f"{path}[{i}]", key) for i, v in enumerate(value)]}
    if isinstance(value, (bytes, bytearray)):
        return {"$b": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: _to_jsonable(v, f"{path}.{k}", key) for k, v in value.items()}
        return {"$m": [[_to_jsonable(k, f"{path}<key>", key), _to_jsonable(v, f"{path}[{k!r}]", key)]
                       for k, v in value.items()]}
    if isinstance(value, (dt.date, dt.time, dt.timedelta)):  # datetime is a date
        return _temporal_jsonable(value, key)
    if isinstance(value, decimal.Decimal):
        return {"$dec": _decimal_text(value, key)}
    # numpy scalars and similar expose .item(); accept them as their Python value
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy":
        return _to_jsonable(item(), path, key)
    raise StateSerializationError(
        f"cannot store {type(value).__module__}.{type(value).__qualname__} at {path} in state: Sluice persists "
        "state without pickle and accepts None, bool, int, float, str, bytes, list, tuple, dict, datetime, date, "
        "time, timedelta, Decimal and Row. "
        "Convert the value (e.g. dataclasses.asdict(obj) or a tuple) before emitting it into a window."
    )


def _row_jsonable(row: Row, path: str, key: bool) -> dict:
    """A Row as ``{"$row": [kind, names, values]}``; for a key, named fields in name order (module docstring)."""
    names, values = row.get_field_names(), list(row)
    if names is not None:
        if len(names) != len(values) or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
            raise StateSerializationError(
                f"cannot store the row {row!r} at {path} in state: its field names {names!r} must be distinct "
                f"strings, one per value ({len(values)}); fix them with row.set_field_names([...])")
        if key:
            pairs = sorted(zip(names, values), key=lambda pair: pair[0])
            names, values = [n for n, _ in pairs], [v for _, v in pairs]
    labels = names if names is not None else range(len(values))
    return {"$row": [row.get_row_kind().short_string, names,
                     [_to_jsonable(v, f"{path}[{label!r}]" if names else f"{path}[{label}]", key)
                      for label, v in zip(labels, values)]]}


def _row(inner: Any) -> Row:
    """Decode a ``$row`` tag; anything malformed is a corrupt snapshot."""
    if type(inner) is list and len(inner) == 3 and type(inner[0]) is str and type(inner[2]) is list:
        short, names, values = inner
        if names is None or (type(names) is list and len(names) == len(values)
                             and all(type(n) is str for n in names) and len(set(names)) == len(names)):
            try:
                kind = RowKind.from_short_string(short)
            except ValueError:
                pass
            else:
                row = Row(*(_from_jsonable(v) for v in values))
                row.set_field_names(names)
                row.set_row_kind(kind)
                return row
    raise CorruptSnapshotError(f"malformed $row value {inner!r} in encoded state: must be [kind (+I, -U, +U or -D), "
                               "distinct names, one per value, or null, [values]]")


def _temporal_jsonable(value: Any, key: bool) -> dict:
    """datetime, date, time or timedelta as its tagged form (base-class methods: a subclass such as
    ``pandas.Timestamp`` is written as the datetime it is)."""
    if isinstance(value, dt.datetime):
        tz = value.tzinfo
        if tz is None or value.utcoffset() is None:
            return {"$dt": _with_fold(dt.datetime.isoformat(value.replace(tzinfo=None)), value.fold, key)}
        if key:  # one text per instant: equal aware datetimes are equal keys whatever their zone
            if value.replace(fold=1 - value.fold).utcoffset() != value.utcoffset():
                # Python (PEP 495) holds such a time unequal to every time in another zone, its UTC
                # instant included, so a key read back in UTC would no longer find its state
                raise StateSerializationError(
                    f"cannot use the datetime {value!r} as a key: its wall time is repeated or skipped in "
                    f"{tz!r}, so it has no single instant; key by a UTC datetime or an epoch timestamp")
            return {"$dt": dt.datetime.isoformat(value.astimezone(dt.timezone.utc))}
        if type(tz) is ZoneInfo and tz.key:
            # the wall time, fold and zone: exactly the fields, also for a time the zone skips or repeats
            return {"$dz": [dt.datetime.isoformat(value.replace(tzinfo=None)), value.fold, tz.key]}
        return {"$dt": _with_fold(dt.datetime.isoformat(value), value.fold, key)}
    if isinstance(value, dt.date):
        return {"$d": dt.date.isoformat(value)}
    if isinstance(value, dt.time):
        return {"$tm": _with_fold(dt.time.isoformat(value), value.fold, key)}
    return {"$td": [value.days, value.seconds, value.microseconds]}


def _with_fold(iso: str, fold: int, key: bool) -> Any:
    """The ISO text, or ``[text, 1]`` for ``fold=1`` (equality ignores the fold here, so a key drops it)."""
    return [iso, 1] if fold and not key else iso


def _decimal_text(value: decimal.Decimal, key: bool) -> str:
    """``str(value)``; for a key, one text for equal values (no trailing zeros, one zero)."""
    if not key or not value.is_finite():
        return str(value)
    if value.is_zero():
        return "0"
    # as many digits as the value has, so normalizing never rounds whatever the thread's context says
    exact = decimal.Context(prec=max(1, len(value.as_tuple().digits)), Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
    return str(value.normalize(exact))


def _tagged(tag: str, inner: Any) -> Any:
    """Decode one date/time/decimal tag; anything malformed is a corrupt snapshot, never a guess."""
    try:
        if tag == "$dt" and type(inner) is str:
            return dt.datetime.fromisoformat(inner)
        if tag in ("$dt", "$tm") and type(inner) is list and len(inner) == 2 and type(inner[0]) is str \
                and type(inner[1]) is int and inner[1] == 1:
            return (dt.datetime if tag == "$dt" else dt.time).fromisoformat(inner[0]).replace(fold=1)
        if tag == "$dz" and type(inner) is list and len(inner) == 3 and type(inner[0]) is str \
                and inner[1] in (0, 1) and type(inner[1]) is int and type(inner[2]) is str:
            wall = dt.datetime.fromisoformat(inner[0])
            if wall.tzinfo is None:
                if inner[1]:
                    return wall.replace(tzinfo=ZoneInfo(inner[2]), fold=1)
                # replace()'s value (fold 0), several times faster: one per record of a Parquet timestamp column
                return dt.datetime.combine(wall.date(), wall.time(), ZoneInfo(inner[2]))
        if tag == "$d" and type(inner) is str:
            return dt.date.fromisoformat(inner)
        if tag == "$tm" and type(inner) is str:
            return dt.time.fromisoformat(inner)
        if tag == "$td" and type(inner) is list and len(inner) == 3 and all(type(x) is int for x in inner):
            return dt.timedelta(days=inner[0], seconds=inner[1], microseconds=inner[2])
        if tag == "$dec" and type(inner) is str:
            return decimal.Decimal(inner)
    except (ValueError, TypeError, OverflowError, ZoneInfoNotFoundError, decimal.InvalidOperation) as exc:
        raise CorruptSnapshotError(f"malformed {tag} value {inner!r} in encoded state ({exc})") from exc
    raise CorruptSnapshotError(f"malformed {tag} value {inner!r} in encoded state")


def _from_jsonable(value: Any) -> Any:
    if isinstance(value, list):
        return [_from_jsonable(v) for v in value]
    if isinstance(value, dict):
        if len(value) == 1:
            (tag, inner), = value.items()
            if tag == "$t":
                return tuple(_from_jsonable(v) for v in inner)
            if tag == "$b":
                return base64.b64decode(inner)
            if tag == "$m":
                return {_freeze(_from_jsonable(k)): _from_jsonable(v) for k, v in inner}
            if tag == "$f":
                return float(inner)
            if tag in _TEMPORAL_TAGS:
                return _tagged(tag, inner)
            if tag == "$row":
                return _row(inner)
        for k in value:
            if k.startswith("$"):
                raise CorruptSnapshotError(f"unknown tag {k!r} in encoded state value {value!r}")
        return {k: _from_jsonable(v) for k, v in value.items()}
    return value


def _freeze(value: Any) -> Any:
    """Dict keys decoded from lists must be hashable again: lists inside become tuples only if needed."""
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _flat_tuple_encoder() -> Any:
    """The JSON array text of a flat tuple of plain scalars, without building a C encoder per call.

    ``JSONEncoder.encode`` makes a new C encoder for every container it writes; this one is made
    once with ``_VALUE_ENCODER``'s settings (no circular-reference markers: a flat tuple of scalars
    holds no container).  Without the C accelerator it is ``_VALUE_ENCODER.encode`` itself.
    """
    from json.encoder import c_make_encoder, encode_basestring_ascii

    if c_make_encoder is None:
        return _VALUE_ENCODER.encode
    make = c_make_encoder(None, _VALUE_ENCODER.default, encode_basestring_ascii, None, ":", ",", False, False, False)
    return lambda value: "".join(make(value, 0))


_encode_flat_tuple = _flat_tuple_encoder()


def _plain(x: Any) -> bool:
    """A scalar written as itself (exact types: subclasses and numpy scalars take the generic walk)."""
    t = type(x)
    return t is str or t is int or t is bool or x is None or (t is float and x - x == 0.0)


def all_plain(xs: Any) -> bool:
    """Whether every item is a scalar written as itself: an exact ``str``/``int``/``bool``/``None`` or a
    finite ``float`` (subclasses, numpy scalars and NaN/infinity take the generic walk)."""
    for x in xs:
        if not _plain(x):
            return False
    return True


#: date and time types a flat record's value may be without the generic walk (exact types: subclasses walk)
_FLAT_TEMPORALS = frozenset((dt.datetime, dt.date, dt.time, dt.timedelta, decimal.Decimal))


def _flat_record_jsonable(value: dict) -> dict | None:
    """``_to_jsonable(value)`` of a dict of ``str`` keys (none starting with ``$``) whose values are plain scalars
    or exact date/time/timedelta/Decimal values, without the walk's recursion; None for any other dict.

    A Parquet row with a timestamp column is such a dict, and the column path keeps one per window
    (engine/windowing/slicing/columnar.py ``carrier``): its state is encoded and decoded every Spark epoch.
    """
    out = {}
    for k, x in value.items():
        if type(k) is not str or k.startswith("$"):
            return None
        if _plain(x):
            out[k] = x
        elif type(x) is dt.datetime and type(x.tzinfo) is ZoneInfo and x.tzinfo.key:
            # _temporal_jsonable's $dz, with its naive wall time built without replace() (several times slower)
            out[k] = {"$dz": [dt.datetime.combine(x.date(), x.time()).isoformat(), x.fold, x.tzinfo.key]}
        elif type(x) in _FLAT_TEMPORALS:
            out[k] = _temporal_jsonable(x, False) if type(x) is not decimal.Decimal else {"$dec": str(x)}
        else:
            return None
    return out


def encode(value: Any) -> str:
    """Encode a state value to JSON text (raises StateSerializationError for unsupported types).

    Flat tuples and dicts of plain scalars — most records and window contents — are written with
    one encoder call, the very text the generic walk gives (tests/engine/state/test_codec_fast_path.py);
    so is a dict whose other values are exact dates, times, timedeltas or Decimals (a Parquet row with a
    timestamp column), with only those values tagged; anything else (nested values, non-finite floats, bytes,
    tagged dict keys, subclasses) takes the walk.
    """
    t = type(value)
    if t is tuple:
        if all_plain(value):
            return '{"$t":' + _encode_flat_tuple(value) + "}"
    elif t is dict:
        for k, x in value.items():
            if type(k) is not str or k.startswith("$") or not _plain(x):
                break
        else:
            return _VALUE_ENCODER.encode(value)
        flat = _flat_record_jsonable(value)
        if flat is not None:
            return _VALUE_ENCODER.encode(flat)
    elif _plain(value):
        return _VALUE_ENCODER.encode(value)
    return _VALUE_ENCODER.encode(_to_jsonable(value, "value"))


def decode(text: str) -> Any:
    """Decode JSON text written by :func:`encode`; builds only plain data types.

    Parsed by msgspec (about three times faster than ``json.loads`` for a short value, which matters
    when a restore reads millions); where msgspec refuses a text, ``json.loads`` decides, so the
    values and errors are the module's (tests/engine/state/test_codec_fast_path.py).
    """
    try:
        raw = parse_json(text)
    except (TypeError, ValueError) as exc:
        raise CorruptSnapshotError(f"state value is not valid JSON ({exc}): {str(text)[:80]!r}") from exc
    return from_jsonable(raw)


def parse_json(text: str) -> Any:
    """JSON text as plain data, parsed by msgspec; what msgspec refuses, ``json.loads`` decides (with its errors).

    msgspec refuses what Python's JSON module refuses, and also NaN/Infinity literals, numbers
    beyond a double and escaped lone surrogates, which the module accepts.
    """
    try:
        return _JSON_DECODER.decode(text)
    except (msgspec.MsgspecError, TypeError, UnicodeError):
        return json.loads(text)


def _flat(items: Any) -> bool:
    for v in items:
        if type(v) is dict or type(v) is list:
            return False
    return True


def _flat_record(raw: dict) -> Any:
    """``_from_jsonable(raw)`` of an object without ``$`` keys: taken as it is when its values are scalars, with
    only its date/time/Decimal tags decoded when those are its only objects (a Parquet row with a timestamp
    column), the walk for anything else."""
    out = None
    for k, v in raw.items():
        tv = type(v)
        if tv is dict:
            if len(v) != 1:
                return _from_jsonable(raw)
            (tag, inner), = v.items()
            if tag not in _TEMPORAL_TAGS:
                return _from_jsonable(raw)
            if out is None:
                out = dict(raw)
            out[k] = _tagged(tag, inner)
        elif tv is list:
            return _from_jsonable(raw)
    return raw if out is None else out


def from_jsonable(raw: Any) -> Any:
    """The value of already parsed JSON written by :func:`encode`; a flat tuple or flat untagged dict is
    taken without the walk, and so is a dict whose only objects are date/time/Decimal tags (:func:`_flat_record`)."""
    t = type(raw)
    if t is dict:
        if len(raw) == 1 and "$t" in raw:
            inner = raw["$t"]
            if type(inner) is list and _flat(inner):
                return tuple(inner)
        elif not any(k.startswith("$") for k in raw):
            return _flat_record(raw)
    elif t is not list:
        return raw
    return _from_jsonable(raw)


def encode_key(key: Any) -> str:
    """Canonical encoding of a key: equal keys give equal text in every process."""
    return _KEY_ENCODER.encode(_to_jsonable(key, "key", key=True))
