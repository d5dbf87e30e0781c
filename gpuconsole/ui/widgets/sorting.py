"""Sorting a table by any column, as htop's F6 and k9s's column sort do.

A table that holds no model objects sorts by what its cells say: :func:`cell_order` reads
``$1,234.50``, ``87%``, ``12.5/80 GiB``, ``3d4h`` and ``2×A100`` as numbers, anything else as
words; a cell that says nothing is known (``-``, ``N/A``, ``unknown``) sorts last whichever the
direction. :func:`ordered` puts row keys in that order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from rich.text import Text

UNKNOWN = frozenset({"", "-", "—", "–", "n/a", "na", "unknown", "?", "none", "…"})
_DURATION = re.compile(r"^(?:in )?((?:\d+(?:\.\d+)?\s*(?:ms|s|m|h|d|w)\s*)+)(?: ago)?$")
_PART = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_NUMBER = re.compile(r"^[\u2580-\u259f\s]*[<>~≈]?\s*[+-]?[$€£]?\s*([+-]?\d[\d,]*(?:\.\d+)?|[+-]?\.\d+)\s*([KMGTP]i?B?|[kMGT]|%)?")
_SCALE = {"K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
          "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}


def plain(cell: object) -> str:
    """The words a cell shows."""
    if isinstance(cell, Text):
        return cell.plain
    return "" if cell is None else str(cell)


def cell_order(cell: object) -> tuple[int, Any] | None:
    """An order key for a cell: ``(0, number)`` or ``(1, words)``; None when nothing is known."""
    words = plain(cell).strip()
    if words.lower() in UNKNOWN:
        return None
    duration = _DURATION.match(words)
    if duration:
        return 0, sum(float(n) * _SECONDS[unit] for n, unit in _PART.findall(duration.group(1)))
    number = _NUMBER.match(words)
    if number:
        value = float(number.group(1).replace(",", ""))
        unit = number.group(2)
        return 0, value * _SCALE.get(unit or "", 1)
    return 1, words.lower()


def numeric(values: Iterable[object]) -> bool:
    """Whether the first known of ``values`` (order keys) is a number: numbers sort highest
    first when a column is first chosen, words from A."""
    for value in values:
        if value is not None:
            return isinstance(value, tuple) and value[0] == 0 or isinstance(value, int | float)
    return False


def ordered(keys: Iterable[str], value_of: Callable[[str], Any], descending: bool) -> list[str]:
    """``keys`` sorted by ``value_of(key)``, the unknown (None) ones last in their given order."""
    known: list[tuple[Any, str]] = []
    unknown: list[str] = []
    for key in keys:
        value = value_of(key)
        if value is None:
            unknown.append(key)
        else:
            known.append((value, key))
    try:
        known.sort(key=lambda pair: pair[0], reverse=descending)
    except TypeError:  # values of kinds that do not compare: order by what they say
        known.sort(key=lambda pair: str(pair[0]), reverse=descending)
    return [key for _value, key in known] + unknown
