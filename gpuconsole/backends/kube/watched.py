"""A source of several resource kinds, kept by watches or listed on each poll, joined into one reading.

:class:`WatchedLister` is what the job backend and the services backend share: with
``watch=True`` (the console) each kind is kept by a watch thread (:mod:`watch`) and a poll joins
the caches without a request; with ``watch=False`` every poll lists everything (:mod:`listing`).
A join is done again only when a cache changed (or the reading says it is due).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from msgspec.structs import replace

from gpuconsole.backends.base import BackendError, BackendPermissionDenied, BackendTimeout
from gpuconsole.backends.kube.client import http_status
from gpuconsole.backends.kube.listing import PAGE_SIZE, Kind, KubeLister
from gpuconsole.backends.kube.watch import WATCH_TIMEOUT_S, WatchCache, Watcher

log = logging.getLogger(__name__)

R = TypeVar("R")
Records = dict[str, list[Any]]  # kind name → every record of it
Join = Callable[[Records, float], R]


class WatchedLister(KubeLister):
    """The kinds of :meth:`kinds`, in one context, as watch-fed caches or fresh lists.

    Args:
        kubeconfig, context, namespaces, request_timeout, page_size: as for :class:`KubeLister`.
        watch: keep a watch-fed cache (the console); ``False``: every poll lists everything.
        watch_timeout: seconds the server keeps one watch open before it is resumed.
    """

    def __init__(self, kubeconfig: str | None, context: str | None, namespaces: tuple[str, ...], *,
                 request_timeout: float, watch: bool, watch_timeout: int = WATCH_TIMEOUT_S,
                 page_size: int = PAGE_SIZE) -> None:
        super().__init__(kubeconfig, context, namespaces, request_timeout, page_size)
        self.watch = watch
        self.watch_timeout = max(1, int(watch_timeout))
        # The Hub waits this long for a poll: the first one may wait for the first lists.
        self.poll_timeout = self.request_timeout + 2.0
        self._cache = WatchCache()  # its lock also guards the last reading
        self._stop = threading.Event()
        self._watchers: list[Watcher] | None = None
        self._last: tuple[int, Any, float | None] | None = None

    def kinds(self) -> tuple[Kind, ...]:
        """The kinds this source reads now."""
        raise NotImplementedError

    def _start_watchers(self) -> list[Watcher]:
        """The watchers of every kind read now, started for the kinds that have none yet."""
        kinds = self.kinds()
        with self._client_lock:
            watchers = self._watchers
        if watchers is not None and len({w.kind.name for w in watchers}) == len(kinds):
            return watchers
        self._client()  # a missing kubeconfig is reported before any thread starts
        with self._client_lock:
            watched = {w.kind.name for w in self._watchers or ()}
            fresh = [Watcher(self, self._cache, kind, ns, self._stop, self.watch_timeout)
                     for kind in kinds if kind.name not in watched for ns in self._scopes(kind)]
            self._watchers = [*(self._watchers or ()), *fresh]
            for watcher in fresh:
                watcher.thread.start()
            return self._watchers

    def _poll(self, join: Join[R], due: Callable[[R], float | None] = lambda _r: None) -> R:
        """The kinds' records joined by ``join``: as the caches have them (waiting for a first
        list at most ``request_timeout``), or, without watching, as fresh lists say.

        Raises:
            BackendPermissionDenied: 401, or 403 on a required kind (before other errors).
            BackendTimeout: the API server did not answer in time.
            BackendError: any other failure; the caches are kept for the next poll.
        """
        if not self.watch:
            return self._list_everything(join, due)
        watchers = self._start_watchers()
        deadline = time.monotonic() + self.request_timeout
        for watcher in watchers:
            while not watcher.synced.wait(0.02):
                if watcher.error is not None:
                    raise _fresh(watcher.error)
                if time.monotonic() > deadline:
                    raise BackendTimeout(f"no answer from the API server in {self.request_timeout:g} s "
                                         f"(listing {watcher.where})")
        errors = [w.error for w in watchers if w.error is not None]
        if errors:
            errors.sort(key=lambda e: not isinstance(e, BackendPermissionDenied))
            raise _fresh(errors[0])
        kinds = self.kinds()
        return self._joined(lambda: {kind.name: [w.records for w in watchers if w.kind.name == kind.name]
                                     for kind in kinds}, join, due)

    def _joined(self, caches: Callable[[], dict[str, list[dict[str, Any]]]], join: Join[R],
                due: Callable[[R], float | None]) -> R:
        """Join the caches into a reading; the last one again (newly stamped) while nothing
        changed and it is not due again."""
        now = time.time()
        with self._cache.lock:
            generation = self._cache.generation
            if self._last is not None:
                seen, reading, when = self._last
                if seen == generation and (when is None or now < when):
                    return replace(reading, taken_at=now)  # type: ignore[no-any-return]
            values = {name: [r for cache in kept for r in cache.values()] for name, kept in caches().items()}
        reading = join(values, now)
        with self._cache.lock:
            self._last = (generation, reading, due(reading))
        return reading

    def _list_everything(self, join: Join[R], due: Callable[[R], float | None]) -> R:
        self._client()
        kinds = self.kinds()
        caches: dict[str, list[dict[str, Any]]] = {kind.name: [] for kind in kinds}
        for kind in kinds:
            for namespace in self._scopes(kind):
                try:
                    records, _version = self._list(kind, namespace)
                except BackendError as exc:
                    if kind.required or http_status(exc) not in (403, 404):
                        raise
                    log.warning("%s are not readable (%s); shown as none", kind.name, exc)
                    continue
                caches[kind.name].append(records)
        self._cache.changed()
        return self._joined(lambda: caches, join, due)

    def close(self) -> None:
        """Stop the watch threads and drop the client; a later poll starts afresh."""
        with self._client_lock:
            watchers, self._watchers = self._watchers or [], None
            api, self._api, self._apis = self._api, None, {}
            self._stop.set()
            self._stop = threading.Event()
        for watcher in watchers:
            watcher.interrupt()
        deadline = time.monotonic() + 1.0
        for watcher in watchers:
            watcher.thread.join(max(0.0, deadline - time.monotonic()))
        if api is not None:
            try:
                api.close()
            except Exception:  # noqa: BLE001 - closing a pool must never fail an exit
                log.debug("closing the Kubernetes client failed", exc_info=True)


def _fresh(error: BackendError) -> BackendError:
    """A copy of a kept error to raise (raising one instance again grows its traceback)."""
    fresh = copy.copy(error)
    fresh.__traceback__ = None
    return fresh
