"""What is made of a reading once: a reading's tuples (jobs, GPUs) are known by identity, so
whatever several readers derive from one (an index, a tally, its live jobs) is made by the first
to ask and looked up by the rest, in any thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class PerReading(Generic[T]):
    """What ``make`` made of the last ``keep`` readings (tuples, known by identity): the one on
    screen and those delivered since (which the thread delivering them may make first, so the
    UI thread only looks it up). Safe from any thread: a miss is made twice at worst."""

    def __init__(self, make: Callable[[tuple[Any, ...]], T], keep: int = 2) -> None:
        self._make, self._keep = make, keep
        self._made: tuple[tuple[tuple[Any, ...], T], ...] = ()

    def __call__(self, reading: tuple[Any, ...]) -> T:
        for seen, made in self._made:
            if seen is reading:
                return made
        made = self._make(reading)
        self._made = ((reading, made), *self._made[:self._keep - 1])
        return made
