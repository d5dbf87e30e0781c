"""Small readers of Kubernetes JSON shared by the record makers: timestamps, counts, maps, lists.

Each raises ``ValueError`` (or ``KeyError``/``TypeError``) on a value of the wrong shape, so the
object that holds it is skipped alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

_QUANTITY = re.compile(r"^\s*(\d+)\s*$")


def parse_time(text: Any) -> float | None:
    """An RFC 3339 timestamp (``2024-05-01T10:00:00Z``, with or without microseconds) in POSIX
    seconds; ``None`` for no value.

    Raises:
        ValueError: a value that is not such a timestamp.
    """
    if text is None or text == "":
        return None
    if not isinstance(text, str):
        raise ValueError(f"not a timestamp: {text!r}")
    when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


EMPTY: Mapping[str, Any] = MappingProxyType({})


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj["metadata"]
    if type(meta) is not dict and not isinstance(meta, Mapping):
        raise ValueError("metadata is not an object")
    if not isinstance(meta.get("uid"), str) or not isinstance(meta.get("name"), str):
        raise ValueError("metadata without uid or name")
    return meta


def mapping(value: Any, what: str) -> Mapping[str, Any]:
    if type(value) is dict:  # what JSON gives: skip the (slow) abstract-class check
        return value
    if value is None:
        return EMPTY
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} is not an object")
    return value


def items(value: Any, what: str) -> list[Any]:
    if type(value) is list:
        return value
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    return value


def count(value: Any) -> int:
    """A device count: extended resources are whole numbers (``"2"`` or ``2``)."""
    if type(value) is int:
        return value
    if isinstance(value, bool):
        raise ValueError(f"not a device count: {value!r}")
    if isinstance(value, int):
        return value
    match = _QUANTITY.match(str(value))
    if match is None:
        raise ValueError(f"not a device count: {value!r}")
    return int(match.group(1))
