"""Model values to plain JSON types and back, for the cache, the history and ``--json`` output.

Both directions are msgspec's own, in C: :func:`to_jsonable` gives what ``json.loads`` would
(structs as dicts, enums by value, tuples as lists); :func:`from_jsonable` rebuilds a typed value from them and
checks every field's type on the way.
"""

from __future__ import annotations

from typing import Any

import msgspec

_ENCODER = msgspec.json.Encoder()


def to_jsonable(value: Any) -> Any:
    """Turn a model value (or a tuple, list or dict of them) into plain JSON types: objects,
    arrays (tuples become lists), strings, numbers, booleans and null (a non-finite float too)."""
    return msgspec.json.decode(_ENCODER.encode(value))


def from_jsonable(cls: Any, data: Any) -> Any:
    """Rebuild a value of type ``cls`` from :func:`to_jsonable` output.

    Raises:
        ValueError: the data does not fit the type (a corrupt cache row, say).
    """
    try:
        return msgspec.convert(data, cls)
    except (msgspec.ValidationError, TypeError) as exc:
        raise ValueError(f"cannot decode {getattr(cls, '__name__', cls)}: {exc}") from exc
