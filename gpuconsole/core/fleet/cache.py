"""The console's use of the Store: the cache that seeds a start, readings written as they come,
the Store opened in the background, and the GPU history charts read.

The Store is optional: without one (``--no-db``, tests) nothing is kept, and a Store that cannot
be opened becomes an alert, never a crash.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuconsole.backends.base import BackendError, Capability, GpuHistory
from gpuconsole.core.fleet.hub import READING_TYPES, Hub, Reading
from gpuconsole.model import Alert, GpuReading, GpuSample, Severity, SourceKind

if TYPE_CHECKING:  # the Store pulls in sqlite-utils: imported only where a database is used
    from gpuconsole.core.fleet.sources import SourceOptions
    from gpuconsole.core.fleet.store import Store

log = logging.getLogger(__name__)

CACHE_EVERY_S = 30.0
MAINTAIN_EVERY_S = 60.0
HISTORY_POINTS = 240  # samples a chart asks a history-keeping GPU source for


class FleetCache:
    """The Store of one console, once it is open, and what the console keeps in it.

    Args:
        store: an open Store, or None.
        sources: the session's source options (the simulator's cache key names its world).
        clock: the console's clock.
        opener: opens the Store in the background (:meth:`open_in_background`); None: none.
    """

    def __init__(self, store: Store | None, sources: Callable[[], SourceOptions], clock: Callable[[], float],
                 opener: Callable[[], Store] | None = None) -> None:
        self.store = store
        self.opener = opener
        self.alerts: list[Alert] = []  # the cache's own problems (and the TLS settings'), shown first
        self._sources = sources
        self._clock = clock
        self._last_cached: dict[SourceKind, float] = {}
        self._last_maintain = 0.0

    def key(self, kind: SourceKind, name: str) -> str:
        """The cache key of source ``name``'s readings. Keyed by source name, so cached demo data
        never shows in a real session, and for the simulator by its world too, so two demo
        worlds never mix in one screen."""
        if name == "sim":
            sim = self._sources()
            jobs = f":{sim.demo_jobs}-jobs" if sim.demo_jobs else ""
            return f"{kind.value}:sim:{sim.seed}:{sim.demo_nodes or 'default'}{jobs}"
        return f"{kind.value}:{name}"

    def seed(self, hub: Hub, *, use_cache: bool = True) -> None:
        """Show the cached readings of every source that has not answered yet."""
        if self.store is None or not use_cache:
            return
        for kind, runner in hub.runners.items():
            if runner.reading is not None:
                continue  # the source answered already: its cache is older than what is shown
            cached = self.store.load_reading(self.key(kind, runner.source.name), READING_TYPES[kind])
            if cached is not None:
                hub.seed(kind, cached, cached.taken_at)

    def persist(self, kind: SourceKind, name: str, reading: Reading) -> None:
        """Write a live reading: GPU samples always, the cached reading every :data:`CACHE_EVERY_S`."""
        if self.store is None:
            return
        now = self._clock()
        try:
            if isinstance(reading, GpuReading):
                self.store.record_gpus(reading.gpus, reading.taken_at)
                if now - self._last_maintain >= MAINTAIN_EVERY_S:
                    self._last_maintain = now
                    self.store.maintain(now)
            if now - self._last_cached.get(kind, 0.0) >= CACHE_EVERY_S:
                self._last_cached[kind] = now
                self.store.save_reading(self.key(kind, name), reading)
        except Exception:  # noqa: BLE001 - the cache is optional; the console goes on without it
            log.warning("could not write the cache", exc_info=True)

    def open_in_background(self, opened: Callable[[Store | None], None]) -> None:
        """Open the Store of :attr:`opener` in a thread (once; later calls do nothing), then call
        ``opened`` with it, or with None when it could not be opened (an alert says why)."""
        opener, self.opener = self.opener, None
        if opener is None:
            return

        def run() -> None:
            try:
                store = opener()
            except Exception as exc:  # noqa: BLE001 - the console works without its cache
                message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                self.alerts.append(Alert(Severity.WARNING, "cache", f"no cache or history: {message}", self._clock()))
                opened(None)
            else:
                self.alerts.extend(Alert(Severity.WARNING, "cache", w, self._clock()) for w in store.warnings)
                self.store = store
                opened(store)

        threading.Thread(target=run, name="open-store", daemon=True).start()

    def gpu_history(self, source: Any, uuid: str, seconds: float) -> list[GpuSample]:
        """The last ``seconds`` of one GPU's samples (blocking: call from a worker).

        A GPU source that keeps its own history (Prometheus: ``query_range``) answers first, at
        about :data:`HISTORY_POINTS` samples whatever the span; the Store otherwise, or when
        that source fails.
        """
        now = self._clock()
        if isinstance(source, GpuHistory) and Capability.HISTORY in source.capabilities:
            try:
                return list(source.history(uuid, now - seconds, now, max(1.0, seconds / HISTORY_POINTS)))
            except BackendError as exc:
                log.info("history of %s from %s: %s; using the cache", uuid, source.name, exc)
        if self.store is None:
            return []
        return self.store.gpu_history(uuid, now - seconds, now)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
