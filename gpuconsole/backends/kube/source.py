"""The real Kubernetes job backend: Jobs, CronJobs, pods, GPU nodes and events of one context.

:class:`KubeJobs` reads the cluster the way kubectl does (:mod:`kubeconfig`) through one
ApiClient per context (:mod:`client`), created on first use from a worker thread. With
``watch=True`` (the console) each kind is kept by a watch thread (:mod:`watch`) and a poll joins
the caches without a request; with ``watch=False`` every poll lists everything (:mod:`listing`).
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from msgspec.structs import replace

from gpuconsole.backends.base import BackendError, BackendPermissionDenied, BackendTimeout, Capability
from gpuconsole.backends.kube import mapping as kube_mapping
from gpuconsole.backends.kube.client import http_status
from gpuconsole.backends.kube.kubeconfig import (
    DEFAULT_KUBECONFIG,
    IN_CLUSTER_ENV,
    SETUP_HINT,
    config_paths,
    contexts,
    import_early,
    kubeconfig_user,
)
from gpuconsole.backends.kube.listing import CRONJOBS, EVENTS, JOBS, KINDS, NODES, PAGE_SIZE, PODS, KubeLister
from gpuconsole.backends.kube.watch import WATCH_TIMEOUT_S, WatchCache, Watcher
from gpuconsole.model import JobsReading

__all__ = [
    "DEFAULT_KUBECONFIG",
    "IN_CLUSTER_ENV",
    "PAGE_SIZE",
    "SETUP_HINT",
    "WATCH_TIMEOUT_S",
    "KubeJobs",
    "config_paths",
    "contexts",
    "kubeconfig_user",
]

log = logging.getLogger(__name__)


class KubeJobs(KubeLister):
    """Jobs, CronJobs and GPU nodes of one Kubernetes context, behind the console's job interface.

    A user who may read Jobs but not Nodes, Events, Pods or CronJobs (a namespace-scoped role)
    still gets a queue: a 403 or 404 on one of those kinds is logged once and left empty.

    Args:
        kubeconfig: a kubeconfig path (or several joined by ``:``); ``None``: ``$KUBECONFIG``,
            else ``~/.kube/config``, else the in-cluster service account.
        context: a context of the kubeconfig; ``None``: its current context.
        namespaces: namespaces to read; empty: all of them. Nodes are cluster-wide either way,
            but their allocated GPUs then count the pods of these namespaces only.
        request_timeout: seconds any request may take to answer (a watch: to start answering).
        watch: keep a watch-fed cache (the console); ``False``: every poll lists everything.
        watch_timeout: seconds the server keeps one watch open before it is resumed.
        page_size: objects per list request.
    """

    capabilities: frozenset[Capability] = frozenset()

    def __init__(
        self,
        kubeconfig: str | None = None,
        context: str | None = None,
        namespaces: tuple[str, ...] = (),
        *,
        request_timeout: float = 10.0,
        watch: bool = True,
        watch_timeout: int = WATCH_TIMEOUT_S,
        page_size: int = PAGE_SIZE,
    ) -> None:
        super().__init__(kubeconfig, context, namespaces, request_timeout, page_size)
        self.watch = watch
        self.watch_timeout = max(1, int(watch_timeout))
        # The Hub waits this long for a poll: the first one may wait for the first lists.
        self.poll_timeout = self.request_timeout + 2.0
        self._cache = WatchCache()  # its lock also guards the last reading
        self._stop = threading.Event()
        self._watchers: list[Watcher] | None = None
        self._last: tuple[int, JobsReading, float | None] | None = None
        self._control: Any = None
        import_early()

    @property
    def job_control(self) -> Any:
        """Submit, delete, suspend, trigger, logs and describe in this context (same ApiClient)."""
        with self._client_lock:
            control = getattr(self, "_control", None)
            if control is None:
                from gpuconsole.backends.kube.control import KubeJobControl

                control = self._control = KubeJobControl(self._client, self.request_timeout)
            return control

    def _start_watchers(self) -> list[Watcher]:
        with self._client_lock:
            watchers = self._watchers
        if watchers is not None:
            return watchers
        self._client()  # a missing kubeconfig is reported before any thread starts
        with self._client_lock:
            if self._watchers is None:
                stop = self._stop
                self._watchers = [Watcher(self, self._cache, kind, ns, stop, self.watch_timeout)
                                  for kind in KINDS for ns in self._scopes(kind)]
                for watcher in self._watchers:
                    watcher.thread.start()
            return self._watchers

    # ----------------------------------------------------------------- JobBackend

    def poll_jobs(self) -> JobsReading:
        """The jobs, CronJobs and GPU nodes as the cache (or, without watching, a list) has them.

        Raises:
            BackendUnavailable: no kubeconfig / in-cluster account, or one that cannot be used.
            BackendPermissionDenied: 401, or 403 on Jobs.
            BackendTimeout: the API server did not answer in time.
            BackendError: any other failure; the cache is kept for the next poll.
        """
        if not self.watch:
            return self._list_everything()
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
        return self._reading(lambda: {kind.name: [w.records for w in watchers if w.kind is kind] for kind in KINDS})

    def _reading(self, caches: Callable[[], dict[str, list[dict[str, Any]]]]) -> JobsReading:
        """Join the caches into a reading; the last one again (newly stamped) while nothing
        changed and no CronJob's next run has come."""
        now = time.time()
        with self._cache.lock:
            generation = self._cache.generation
            if self._last is not None:
                seen, reading, due = self._last
                if seen == generation and (due is None or now < due):
                    return replace(reading, taken_at=now)
            values = {name: [r for cache in kept for r in cache.values()] for name, kept in caches().items()}
        reading = kube_mapping.compose(values[JOBS.name], values[CRONJOBS.name], values[PODS.name],
                                       values[NODES.name], values[EVENTS.name], now)
        with self._cache.lock:
            self._last = (generation, reading, kube_mapping.next_cron_change(reading))
        return reading

    def _list_everything(self) -> JobsReading:
        self._client()
        caches: dict[str, list[dict[str, Any]]] = {kind.name: [] for kind in KINDS}
        for kind in KINDS:
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
        return self._reading(lambda: caches)

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
