"""The base of every model value: a frozen ``msgspec.Struct`` the garbage collector does not track.

``frozen=True`` makes a value immutable (and hashable), so a snapshot crosses threads without
locks; ``gc=False`` keeps the thousands of values a fleet reading builds every second out of the
collector's sight (none of them can be part of a reference cycle: they hold only scalars, enums,
tuples and other values). Construction runs in C: a 32-field ``Gpu`` in about a microsecond.
"""

from __future__ import annotations

import msgspec

Tags = tuple[tuple[str, str], ...]


class Value(msgspec.Struct, frozen=True, gc=False):
    """An immutable model value (fields by position or by name, as declared)."""


def tag_of(tags: Tags, key: str) -> str | None:
    """The value of ``key`` among ``(key, value)`` tags, None when absent."""
    for k, v in tags:
        if k == key:
            return v
    return None
