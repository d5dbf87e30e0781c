"""Model values to plain JSON types and back, for the cache, the history and ``--json`` output.

Both directions are msgspec's own: :func:`to_jsonable` gives dicts, tuples, lists, strings and
numbers (structs as dicts, enums by value), which ``json`` writes as JSON; :func:`from_jsonable` rebuilds a typed value from them and
checks every field's type on the way.
"""

from __future__ import annotations

from typing import Any

import msgspec


def to_jsonable(value: Any) -> Any:
    """Turn a model value (or a tuple, list or dict of them) into plain JSON types."""
    return msgspec.to_builtins(value, str_keys=True)


def from_jsonable(cls: Any, data: Any) -> Any:
    """Rebuild a value of type ``cls`` from :func:`to_jsonable` output.

    Raises:
        ValueError: the data does not fit the type (a corrupt cache row, say).
    """
    try:
        return msgspec.convert(data, cls)
    except (msgspec.ValidationError, TypeError) as exc:
        raise ValueError(f"cannot decode {getattr(cls, '__name__', cls)}: {exc}") from exc
