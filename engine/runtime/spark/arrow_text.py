"""Arrow columns as JSON text, column-wise: the records, keys and state values Spark stages write (issue 16).

:func:`record_texts` writes a column path partial's first record as the element path reads it (equal values, not
always equal bytes: such text is never persisted); :func:`codec_texts` writes the codec's very bytes of each row
dict (what a column fold checkpoint persists, engine/runtime/spark/column_fold.py); :func:`encode_key_column` is
``codec.encode_key`` of a key column.  Each falls back to the codec per value where a column is not done
column-wise, or says None so the caller does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.state import codec

#: timestamp column unit -> (multiplier, divisor) to epoch milliseconds
_TO_MS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000)}


#: the text of a printable-ASCII string JSON needs no escape for (no ``"``, no ``\\``)
_PLAIN_ASCII = r'^[\x20\x21\x23-\x5b\x5d-\x7e]*$'


def _json_fragment(column: pa.Array, canonical: bool = False) -> pa.Array | None:
    """One column's JSON text per value, as the record's text holds it, or None when this is not done column-wise.

    A string of plain ASCII is itself in double quotes; an integer its decimal text; a finite float Arrow's
    shortest round-trip text (``.0`` added to an integral one, so it reads back as a float); a bool
    ``true``/``false``; a UTC timestamp (pyarrow gives ``ZoneInfo("UTC")``) the codec's ``$dz`` tag of its wall
    time, and a timestamp without a zone (a naive datetime) its ``$dt`` tag: each decodes to the very datetime the
    element path reads.  ``canonical``: the codec's very bytes
    (:func:`codec_texts`): a float is Python's ``repr``, a wall time without microseconds has no fraction.
    """
    t = column.type
    if column.null_count:
        return None
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        column = pc.cast(column, pa.string())
        if pc.all(pc.match_substring_regex(column, _PLAIN_ASCII)).as_py() is False:
            return None
        return pc.binary_join_element_wise('"', column, '"', "")
    if pa.types.is_boolean(t):
        return pc.if_else(column, "true", "false")
    if pa.types.is_integer(t):
        return pc.cast(column, pa.string())
    if pa.types.is_floating(t) and t != pa.float16():
        if not pc.all(pc.is_finite(column)).as_py():
            return None
        if canonical:
            return pa.array(list(map(float.__repr__, pc.cast(column, pa.float64()).to_pylist())), pa.string())
        text = pc.cast(pc.cast(column, pa.float64()), pa.string())
        integral = pc.invert(pc.match_substring_regex(text, r"[.eE]"))
        return pc.if_else(integral, pc.binary_join_element_wise(text, ".0", ""), text)
    if pa.types.is_timestamp(t) and t.tz in ("UTC", None) and t.unit in _TO_MS:
        ints = column.cast(pa.int64()).to_numpy(zero_copy_only=False)
        walls = pa.array(np.datetime_as_string(ints.astype(f"datetime64[{t.unit}]").astype("datetime64[us]")),
                         pa.string())
        if canonical:  # datetime.isoformat: no fraction when the microseconds are 0, years 1-9999 only
            if not pc.all(pc.equal(pc.utf8_length(walls), 26)).as_py():
                return None
            walls = pc.replace_substring_regex(walls, r"\.000000$", "")
        if t.tz is None:
            return pc.binary_join_element_wise('{"$dt":"', walls, '"}', "")
        return pc.binary_join_element_wise('{"$dz":["', walls, '",0,"UTC"]}', "")
    return None


def codec_texts(table: pa.Table) -> pa.Array | None:
    """``codec.encode(d)`` for each row dict ``d`` of ``table`` (as :func:`engine.io.formats.table_to_pylist` gives
    them), byte for byte, written column-wise; None when a column is not done column-wise (the caller encodes the
    dicts).  What a checkpoint writes of a column fold's windows (engine/runtime/spark/column_fold.py)."""
    import json

    names = table.column_names
    if not table.num_rows or not names or len(set(names)) != len(names) or any(n.startswith("$") for n in names):
        return None
    parts: list[Any] = []
    for i, (name, column) in enumerate(zip(names, table.columns)):
        fragment = _json_fragment(column.combine_chunks(), canonical=True)
        if fragment is None:
            return None
        parts.append(("{" if i == 0 else ",") + json.dumps(name) + ":")
        parts.append(fragment)
    parts.append("}")
    return pc.binary_join_element_wise(*parts, "")


def record_texts(table: pa.Table) -> list[str]:
    """``encode_record(d)`` for each row dict ``d`` of ``table`` (as :func:`engine.io.formats.table_to_pylist`
    gives them) in value, not always in bytes — ``decode_values`` reads both back as equal dicts of equal types
    (tests/runtime/spark/test_column_record_texts.py) — written column-wise (module docstring, step 3)."""
    import json

    from engine.io.formats import table_to_pylist
    from engine.runtime.spark.rows import encode_record

    names = table.column_names
    fragments = []
    if table.num_rows and names and len(set(names)) == len(names) and not any(n.startswith("$") for n in names):
        for column in table.columns:
            fragment = _json_fragment(column.combine_chunks())
            if fragment is None:
                break
            fragments.append(fragment)
    if not table.num_rows or not names or len(fragments) != len(names):
        return [encode_record(v) for v in table_to_pylist(table)]
    parts: list[Any] = []
    for i, (name, fragment) in enumerate(zip(names, fragments)):
        parts.append(("{" if i == 0 else ",") + json.dumps(name) + ":")
        parts.append(fragment)
    parts.append("}")
    return pc.binary_join_element_wise(*parts, "").to_pylist()


def encode_key_column(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """``codec.encode_key`` of every value of an Arrow column, vectorised where the encoding is trivial.

    ints encode as their decimal text; strings made only of printable ASCII without ``"`` or ``\\``
    encode as the string in double quotes (exactly what ``json.dumps`` writes for them); anything else falls
    back to :func:`codec.encode_key` per value, so the result always equals it.
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_integer(column.type) and column.null_count == 0:
        return pc.cast(column, pa.string())
    if (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)) and column.null_count == 0:
        column = pc.cast(column, pa.string())
        simple = pc.match_substring_regex(column, r'^[\x20\x21\x23-\x5b\x5d-\x7e]*$')
        quoted = pc.binary_join_element_wise('"', column, '"', "")
        if pc.all(simple).as_py() is not False:
            return quoted
        fallback = pa.array([codec.encode_key(v) for v in column.to_pylist()], pa.string())
        return pc.if_else(simple, quoted, fallback)
    return pa.array([codec.encode_key(v) for v in column.to_pylist()], pa.string())
