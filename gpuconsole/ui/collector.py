"""Full garbage collections at quiet moments, not in the middle of a keystroke.

A big fleet keeps a few hundred thousand objects the cyclic collector tracks (widgets, styles,
rendered lines), and a full collection walks them all: a pause of 100–400 ms that lands on
whatever key was typed then. Once the console is built, what exists is frozen (never walked
again: modules, the catalog, the panes), and the full collections the interpreter would start
on its own are started here instead: when no key has been typed for :data:`QUIET_S`, at most
every :data:`LEAST_GAP_S`, and after :data:`LONGEST_GAP_S` whatever the keyboard does, so cyclic
garbage never waits long. The young generations are collected as before.

After a full collection the C heap's free pages go back to the system (glibc's
``malloc_trim``, where the C library has it): a big fleet's readings come and go as tables of
100,000 rows, whose freed space would otherwise stay resident between them.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import gc
import threading
import time
from collections.abc import Callable, Iterator
from typing import Protocol

QUIET_S = 0.5  # no key typed for this long: a full collection may run
LEAST_GAP_S = 5.0  # the interpreter's own pace at a big fleet's allocation rate
LONGEST_GAP_S = 30.0  # a full collection runs by then even while keys keep coming
CHECK_EVERY_S = 0.25
NEVER = 1 << 30  # a third threshold the interpreter never reaches


def _heap_trimmer() -> Callable[[], object] | None:
    """glibc's ``malloc_trim(0)``, or None where the C library has none (macOS, musl)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return lambda: trim(0)


class _LastKey(Protocol):
    last_key_at: float


class GpuConsoleAppLike(Protocol):
    @property
    def typeahead(self) -> _LastKey: ...

    @property
    def core(self) -> object | None: ...


class CollectorPacing:
    """Starts full collections beside one running app, from a thread of its own (a collection
    stops every thread alike, so only when it runs matters, not where).

    Args:
        last_key: when a key was last typed (``time.monotonic``).
        ready: whether the console is built, so what exists now may be frozen.
    """

    def __init__(self, last_key: Callable[[], float], ready: Callable[[], bool],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._last_key, self._ready, self._clock = last_key, ready, clock
        self._last_full = clock()
        self._threshold: tuple[int, int, int] | None = None
        self._stop = threading.Event()
        self._trim = _heap_trimmer()
        self.collections = 0

    @contextlib.contextmanager
    def beside(self) -> Iterator[None]:
        """Pace the collections while the block runs (``app.run()``); the interpreter's own
        pace, and nothing frozen, after it."""
        thread = threading.Thread(target=self._loop, name="gc-pacing", daemon=True)
        thread.start()
        try:
            yield
        finally:
            self._stop.set()
            thread.join(2 * CHECK_EVERY_S)
            self.release()

    def take_over(self) -> None:
        """Freeze what exists and start the full collections here from now on."""
        if self._threshold is None:
            gc.freeze()
            self._threshold = gc.get_threshold()
            first, second, _third = self._threshold
            gc.set_threshold(first, second, NEVER)
            self._last_full = self._clock()

    def release(self) -> None:
        if self._threshold is not None:
            gc.set_threshold(*self._threshold)
            self._threshold = None
            gc.unfreeze()

    def tick(self) -> bool:
        """Collect in full when it is time; whether a collection ran."""
        if self._threshold is None:
            if not self._ready():
                return False
            self.take_over()
        now = self._clock()
        since = now - self._last_full
        quiet = now - self._last_key() >= QUIET_S
        if since >= LONGEST_GAP_S or (quiet and since >= LEAST_GAP_S):
            gc.collect(2)
            if self._trim is not None:
                self._trim()  # the GIL is let go meanwhile: ctypes calls release it
            self._last_full = self._clock()
            self.collections += 1
            return True
        return False

    def _loop(self) -> None:
        while not self._stop.wait(CHECK_EVERY_S):
            self.tick()


def pace_collections(app: GpuConsoleAppLike) -> CollectorPacing:
    """The pacing for ``app``: its type-ahead says when a key was last typed."""
    return CollectorPacing(lambda: app.typeahead.last_key_at, lambda: app.core is not None)
