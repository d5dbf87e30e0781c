"""Watching one resource kind: a daemon thread that lists, then watches, and keeps a cache.

A watch the server ends (``timeoutSeconds``) resumes from where it was; one that is too old
(410, as a status or an ``ERROR`` event) lists again and replaces the cache in one step, so
nothing is lost or counted twice. Failures are kept for the next poll; the thread retries with
backoff, and a kind the user may not read (403/404, not required) is left empty.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

import urllib3

from gpuconsole.backends.base import BackendError, BackendTimeout
from gpuconsole.backends.kube import mapping as kube_mapping
from gpuconsole.backends.kube.client import Gone, http_status
from gpuconsole.backends.kube.errors import status_error
from gpuconsole.backends.kube.kubeconfig import import_kubernetes
from gpuconsole.backends.kube.listing import Kind, KubeLister, parse_json

log = logging.getLogger(__name__)

WATCH_TIMEOUT_S = 60  # the server ends each watch after this; it is resumed from where it was
BACKOFF_MIN_S = 0.25  # first wait after a failure; doubles up to BACKOFF_MAX_S
BACKOFF_MAX_S = 15.0
OPTIONAL_RETRY_S = 300.0  # how soon a kind the user may not read is tried again


class WatchCache:
    """The lock over every watcher's records, and a generation counted up on each change."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.generation = 0

    def replace(self, watcher: Watcher, records: dict[str, Any], version: str) -> None:
        """All of ``watcher``'s records at once (a fresh list), and the list's resourceVersion."""
        with self.lock:
            watcher.records = records
            watcher.resource_version = version
            self.generation += 1
        watcher.synced.set()

    def put(self, watcher: Watcher, uid: str, record: Any) -> None:
        """One object changed (``record`` None: deleted)."""
        with self.lock:
            if record is None:
                if watcher.records.pop(uid, None) is None:
                    return
            else:
                watcher.records[uid] = record
            self.generation += 1

    def changed(self) -> None:
        with self.lock:
            self.generation += 1


class Watcher:
    """The cache of one kind in one namespace (or all), kept by a list-then-watch thread."""

    def __init__(self, lister: KubeLister, cache: WatchCache, kind: Kind, namespace: str | None,
                 stop: threading.Event, watch_timeout: int) -> None:
        self.lister = lister
        self.cache = cache
        self.kind = kind
        self.namespace = namespace
        self.stop = stop
        self.watch_timeout = watch_timeout
        self.records: dict[str, Any] = {}
        self.resource_version = ""
        self.synced = threading.Event()
        self.error: BackendError | None = None
        self._response: Any = None
        where = f"-{namespace}" if namespace else ""
        self.thread = threading.Thread(target=self._run, name=f"kube-watch-{kind.name.lower()}{where}", daemon=True)

    @property
    def where(self) -> str:
        return f"{self.kind.name}" + (f" in {self.namespace}" if self.namespace else "")

    def interrupt(self) -> None:
        """Cut the open watch stream (close() uses it so the thread sees ``stop`` at once)."""
        response = self._response
        if response is None:
            return
        try:
            response.shutdown()
        except Exception:  # noqa: BLE001 - an older urllib3, or a response already released
            try:
                response.close()
            except Exception:  # noqa: BLE001 - closing must never fail
                pass

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        backoff = BACKOFF_MIN_S
        must_list = True
        listed_at = 0.0
        while not self.stop.is_set():
            try:
                if must_list:
                    records, version = self.lister._list(self.kind, self.namespace)
                    if self.stop.is_set():
                        break
                    self.cache.replace(self, records, version)
                    must_list, listed_at = False, time.monotonic()
                    self.error = None
                started = time.monotonic()
                events = self._watch()
                if events == 0 and time.monotonic() - started < 0.5:
                    # Cut at once again and again: do not spin against a struggling server.
                    self.stop.wait(backoff)
                    backoff = min(backoff * 2, BACKOFF_MAX_S)
                else:
                    backoff = BACKOFF_MIN_S
            except Gone as exc:
                log.info("%s: %s; listing again", self.where, exc)
                if must_list:  # the list itself: a server that cannot list
                    self._failed(exc)
                    self.stop.wait(backoff)
                    backoff = min(backoff * 2, BACKOFF_MAX_S)
                elif time.monotonic() - listed_at < 1.0:  # gone again right after a list
                    self.stop.wait(backoff)
                    backoff = min(backoff * 2, BACKOFF_MAX_S)
                must_list = True
            except BackendError as exc:
                if not self.kind.required and http_status(exc) in (403, 404):
                    log.warning("%s are not readable (%s); shown as none", self.where, exc)
                    self.cache.replace(self, {}, "")
                    self.error = None
                    must_list = True
                    self.stop.wait(OPTIONAL_RETRY_S)
                    continue
                self._failed(exc)
                self.stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
            except Exception as exc:  # noqa: BLE001 - the thread must outlive any surprise
                if self.stop.is_set():
                    break  # close() cut the stream under it
                log.exception("watching %s failed unexpectedly", self.where)
                self._failed(BackendError(f"watching {self.where} failed: {type(exc).__name__}: {exc}"))
                self.stop.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)

    def _failed(self, error: BackendError) -> None:
        if self.stop.is_set():
            return
        if self.error is None or str(self.error) != str(error):
            log.info("%s: %s", self.where, error)
        self.error = error

    def _watch(self) -> int:
        """Stream events from the cache's resourceVersion until the server ends the watch.

        Returns the number of events applied. Raises :class:`~gpuconsole.backends.kube.client.Gone` when the version is too old.
        """
        lister = self.lister
        where = f"watching {self.where}"
        # The read timeout covers the server's own timeoutSeconds: a stream silent for longer
        # than that belongs to a server that stopped answering.
        timeout = (lister.request_timeout, self.watch_timeout + lister.request_timeout)
        response = lister._request(self.kind, self.namespace, where, timeout, watch=True,
                                  resource_version=self.resource_version or None, allow_watch_bookmarks=True,
                                  timeout_seconds=self.watch_timeout)
        self._response = response
        self.error = None  # the server answers again
        applied = 0
        try:
            with lister._errors(where):
                for line in import_kubernetes().watch.watch.iter_resp_lines(response):
                    if self.stop.is_set():
                        break
                    if line.strip():
                        self._apply(parse_json(line, where))
                        applied += 1
        except BackendTimeout as exc:
            # The server ends a watch after timeoutSeconds; silence for longer means it hangs.
            raise BackendTimeout(f"the API server went silent {where} (nothing for {timeout[1]:g} s)") from exc
        except BackendError as exc:
            if isinstance(exc, Gone) or not isinstance(exc.__cause__, urllib3.exceptions.ProtocolError):
                raise
            log.debug("%s: the stream was cut (%s); resuming", where, exc)
        finally:
            self._response = None
            try:
                response.release_conn()
            except Exception:  # noqa: BLE001 - a connection already gone
                pass
        return applied

    def _apply(self, event: Any) -> None:
        if not isinstance(event, Mapping) or not isinstance(event.get("object"), Mapping):
            raise BackendError(f"watching {self.where}: an event of unknown shape")
        kind, obj = event.get("type"), event["object"]
        if kind == "ERROR":
            code = obj.get("code")
            message = kube_mapping.status_message(json.dumps(obj))
            if code == 410:
                raise Gone(f"the watch is too old ({message or '410 Gone'})")
            error = status_error(int(code) if isinstance(code, int) else 0, json.dumps(obj), f"watching {self.where}")
            error.status = code  # type: ignore[attr-defined]
            raise error
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
        version = str(meta.get("resourceVersion") or "")
        if kind == "BOOKMARK":
            if version:
                self.resource_version = version
            return
        uid = meta.get("uid")
        if isinstance(uid, str) and kind in ("ADDED", "MODIFIED", "DELETED"):
            record = None if kind == "DELETED" else self.lister._read(self.kind, obj)
            self.cache.put(self, uid, record)
        if version:
            self.resource_version = version
