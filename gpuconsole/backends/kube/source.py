"""The real Kubernetes backend: Jobs, CronJobs, pods, GPU nodes and events through the official client.

:class:`KubeJobs` is a :class:`~gpuconsole.backends.base.JobBackend`. It reads the cluster the way
kubectl does (``--kubeconfig``, ``$KUBECONFIG`` with several files joined by ``:``,
``~/.kube/config``, ``--context``, or the pod's service account when it runs in a cluster) and
talks to the API server with one ``kubernetes`` ``ApiClient`` per context, created on first use
from a worker thread: the constructor reads no file and opens no connection.

Lists are read as plain JSON (``_preload_content=False``) and translated by
:mod:`gpuconsole.backends.kube.mapping`, never through the generated models: those are slow on
thousands of objects, and one object they cannot parse would fail the whole list, where here it
is skipped and logged. Lists are paginated (``limit``/``continue``); a continue token that
expires mid-list (``410``) restarts the list.

With ``watch=True`` (the console) each resource kind gets a daemon thread that lists, then
watches from the list's ``resourceVersion`` with bookmarks, and keeps an in-memory cache that
:meth:`KubeJobs.poll_jobs` joins into a reading, so a poll costs no request. A watch that the
server ends (``timeoutSeconds``) resumes from where it was; one that is too old (``410 Gone``, as
an HTTP status or an ``ERROR`` event) lists again and replaces that kind's cache in one step, so
nothing is lost or counted twice. Failures are kept per kind and raised by the next poll, as
:class:`~gpuconsole.backends.base.BackendPermissionDenied` (401/403),
:class:`~gpuconsole.backends.base.BackendTimeout` (no answer in time, or a watch gone silent for
longer than the server's own timeout) or :class:`~gpuconsole.backends.base.BackendError`; the
threads keep retrying with backoff, and the first answer clears the error. With ``watch=False``
(``gpuconsole snapshot``) every poll lists everything once.

A user who may read Jobs but not Nodes, Events, Pods or CronJobs (a namespace-scoped role) still
gets a queue: a 403 or 404 on one of those kinds is logged once and that kind is left empty.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from msgspec.structs import replace

from gpuconsole.backends.base import (
    BackendError,
    BackendPermissionDenied,
    BackendTimeout,
    BackendUnavailable,
    Capability,
)
from gpuconsole.backends.kube import mapping as kube_mapping
from gpuconsole.backends.kube import schema as kube_schema
from gpuconsole.backends.kube.mapping import one_line, status_error
from gpuconsole.model import JobsReading

log = logging.getLogger(__name__)

SETUP_HINT = "point KUBECONFIG at a kubeconfig, create ~/.kube/config, or pass --kubeconfig PATH"
DEFAULT_KUBECONFIG = "~/.kube/config"
IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"

PAGE_SIZE = 500  # objects per list request (the API server's own default page is unbounded)
# A list's own metadata (resourceVersion, continue) comes before its items; reading the token
# from there lets the next page be fetched while this one is parsed.
_LIST_META = re.compile(rb'^\s*\{(?:\s*"(?:kind|apiVersion)"\s*:\s*"[^"\\]*"\s*,)*\s*"metadata"\s*:\s*\{([^{}]*)\}')
_CONTINUE = re.compile(rb'"continue"\s*:\s*"([^"\\]*)"')
LIST_RESTARTS = 3  # a list whose continue token keeps expiring gives up after this many restarts
WATCH_TIMEOUT_S = 60  # the server ends each watch after this; it is resumed from where it was
BACKOFF_MIN_S = 0.25  # first wait after a failure; doubles up to BACKOFF_MAX_S
BACKOFF_MAX_S = 15.0
OPTIONAL_RETRY_S = 300.0  # how soon a kind the user may not read is tried again


def _kubernetes() -> Any:
    """The ``kubernetes`` package, imported on first use: it takes half a second (its generated
    models), which belongs in the worker thread that creates the client, not in start-up."""
    import kubernetes.client
    import kubernetes.config
    import kubernetes.watch.watch

    return kubernetes


_import_started = threading.Lock()


def _import_early() -> None:
    """Start importing ``kubernetes`` in a thread of its own, once per process: the console
    builds its sources before the window opens, so the import runs while the UI starts, and the
    first poll finds it done (or waits on the import lock for the rest)."""
    if not _import_started.acquire(blocking=False):
        return
    threading.Thread(target=_import_quietly, name="kube-import", daemon=True).start()


def _import_quietly() -> None:
    try:
        _kubernetes()
    except Exception:  # noqa: BLE001 - the first poll imports it again and reports the error
        log.debug("importing kubernetes failed", exc_info=True)


class _Gone(BackendError):
    """410: a continue token or a watch's resourceVersion is too old."""


@dataclass(frozen=True, slots=True)
class _Kind:
    """One resource kind: how it is listed and how an object of it is read."""

    name: str  # in messages: "listing Jobs"
    api: str  # "batch" (BatchV1Api) or "core" (CoreV1Api)
    list_all: str
    list_namespaced: str | None  # None: cluster-scoped
    read: Callable[[Mapping[str, Any]], Any]  # raw object → record (None: not one we keep)
    field_selector: str | None = None
    required: bool = True  # False: a 403/404 leaves it empty instead of failing the source


JOBS = _Kind("Jobs", "batch", "list_job_for_all_namespaces", "list_namespaced_job", kube_mapping.job_record)
CRONJOBS = _Kind("CronJobs", "batch", "list_cron_job_for_all_namespaces", "list_namespaced_cron_job",
                 kube_mapping.cronjob_record, required=False)
PODS = _Kind("Pods", "core", "list_pod_for_all_namespaces", "list_namespaced_pod", kube_mapping.pod_record,
             required=False)
NODES = _Kind("Nodes", "core", "list_node", None, kube_mapping.node_record, required=False)
EVENTS = _Kind("Events", "core", "list_event_for_all_namespaces", "list_namespaced_event",
               kube_mapping.warning_record, field_selector="type=Warning", required=False)
KINDS: tuple[_Kind, ...] = (JOBS, CRONJOBS, PODS, NODES, EVENTS)


def config_paths(kubeconfig: str | None = None, env: Mapping[str, str] = os.environ) -> list[str]:
    """The kubeconfig files that exist, in kubectl's order: ``kubeconfig`` (``--kubeconfig``),
    else every file of ``$KUBECONFIG`` (``:``-separated), else ``~/.kube/config``."""
    spec = kubeconfig or env.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    paths = [Path(p).expanduser() for p in spec.split(os.pathsep) if p]
    return [str(p) for p in paths if p.is_file()]


def contexts(kubeconfig: str | None = None) -> tuple[tuple[str, ...], str | None]:
    """The context names of the kubeconfig files and the current one (reads files only).

    Raises:
        BackendUnavailable: no kubeconfig, or one that cannot be read.
    """
    paths = config_paths(kubeconfig)
    if not paths:
        raise BackendUnavailable("no kubeconfig found", hint=SETUP_HINT)
    found, current = _read_contexts(paths)
    names = tuple(str(c.get("name")) for c in found or () if c.get("name"))
    return names, (str(current.get("name")) if current and current.get("name") else None)


def _read_contexts(paths: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The contexts of the kubeconfig files and the current one, as the client reads them."""
    try:
        return _kubernetes().config.list_kube_config_contexts(os.pathsep.join(paths))
    except Exception as exc:  # noqa: BLE001 - YAML or config errors: one line for the user
        raise BackendUnavailable(f"the kubeconfig cannot be read: {one_line(str(exc))}", hint=SETUP_HINT) from exc


def kubeconfig_user(kubeconfig: str | None = None, context: str | None = None) -> dict[str, str]:
    """``{"context", "user", "cluster", "namespace"}`` of the context in use, as the kubeconfig
    names them (``context`` None: its current context), or the pod's service account in a
    cluster. Reads files only: the name the API server knows may differ (``SelfSubjectReview``,
    :meth:`~gpuconsole.backends.kube.control.KubeJobControl.identity`).

    Raises:
        BackendUnavailable: no kubeconfig (nor a cluster to run in), one that cannot be read, or
            a context it does not hold; the hint says how to set one up.
    """
    paths = config_paths(kubeconfig)
    if not paths:
        if kubeconfig:
            raise BackendUnavailable(f"kubeconfig {kubeconfig} not found", hint=SETUP_HINT)
        if os.environ.get(IN_CLUSTER_ENV):
            return {"context": "in-cluster", "user": "the pod's service account", "cluster": "this cluster",
                    "namespace": ""}
        raise BackendUnavailable("no Kubernetes cluster configured", hint=SETUP_HINT)
    found, current = _read_contexts(paths)
    wanted = context or (current or {}).get("name")
    spec = next((c.get("context") or {} for c in found or () if c.get("name") == wanted), None)
    if spec is None:
        raise BackendUnavailable(f"context {wanted!r} is not in the kubeconfig" if wanted
                                 else "the kubeconfig names no current context",
                                 hint="kubectl config get-contexts; kubectl config use-context NAME")
    return {"context": str(wanted), "user": str(spec.get("user") or ""), "cluster": str(spec.get("cluster") or ""),
            "namespace": str(spec.get("namespace") or "")}


def _http_status(error: BackendError) -> int | None:
    return getattr(error, "status", None)


class _Watcher:
    """The cache of one kind in one namespace (or all), kept by a list-then-watch thread."""

    def __init__(self, owner: KubeJobs, kind: _Kind, namespace: str | None, stop: threading.Event) -> None:
        self.owner = owner
        self.kind = kind
        self.namespace = namespace
        self.stop = stop
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
                    records, version = self.owner._list(self.kind, self.namespace)
                    if self.stop.is_set():
                        break
                    self.owner._replace(self, records, version)
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
            except _Gone as exc:
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
                if not self.kind.required and _http_status(exc) in (403, 404):
                    log.warning("%s are not readable (%s); shown as none", self.where, exc)
                    self.owner._replace(self, {}, "")
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

        Returns the number of events applied. Raises :class:`_Gone` when the version is too old.
        """
        owner = self.owner
        where = f"watching {self.where}"
        # The read timeout covers the server's own timeoutSeconds: a stream silent for longer
        # than that belongs to a server that stopped answering.
        timeout = (owner.request_timeout, owner.watch_timeout + owner.request_timeout)
        response = owner._request(self.kind, self.namespace, where, timeout, watch=True,
                                  resource_version=self.resource_version or None, allow_watch_bookmarks=True,
                                  timeout_seconds=owner.watch_timeout)
        self._response = response
        self.error = None  # the server answers again
        applied = 0
        try:
            with owner._errors(where):
                for line in _kubernetes().watch.watch.iter_resp_lines(response):
                    if self.stop.is_set():
                        break
                    if line.strip():
                        self._apply(_json(line, where))
                        applied += 1
        except BackendTimeout as exc:
            # The server ends a watch after timeoutSeconds; silence for longer means it hangs.
            raise BackendTimeout(f"the API server went silent {where} (nothing for {timeout[1]:g} s)") from exc
        except BackendError as exc:
            if isinstance(exc, _Gone) or not isinstance(exc.__cause__, urllib3.exceptions.ProtocolError):
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
                raise _Gone(f"the watch is too old ({message or '410 Gone'})")
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
            record = None if kind == "DELETED" else self.owner._read(self.kind, obj)
            self.owner._put(self, uid, record)
        if version:
            self.resource_version = version


def _json(text: str | bytes, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise BackendError(f"unreadable answer {where}: {exc}") from exc


class KubeJobs:
    """Jobs, CronJobs and GPU nodes of one Kubernetes context, behind the console's job interface.

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
        self.name = f"kube:{context}" if context else "kube"
        self.kubeconfig = kubeconfig
        self.context = context
        self.namespaces = tuple(dict.fromkeys(namespaces))
        self.request_timeout = float(request_timeout)
        self.watch = watch
        self.watch_timeout = max(1, int(watch_timeout))
        self.page_size = max(1, int(page_size))
        # The Hub waits this long for a poll: the first one may wait for the first lists.
        self.poll_timeout = self.request_timeout + 2.0
        self._client_lock = threading.Lock()
        self._api: Any = None
        self._apis: dict[str, Any] = {}
        self._lock = threading.Lock()  # the caches, the generation, the last reading
        self._stop = threading.Event()
        self._watchers: list[_Watcher] | None = None
        self._generation = 0
        self._last: tuple[int, JobsReading, float | None] | None = None
        self._skipped: dict[tuple[str, str], str] = {}  # (kind, uid) → resourceVersion logged
        self._control: Any = None
        _import_early()

    # ----------------------------------------------------------------- configuration and client

    @property
    def job_control(self) -> Any:
        """Submit, delete, suspend, trigger, logs and describe in this context (same ApiClient)."""
        with self._client_lock:
            control = getattr(self, "_control", None)
            if control is None:
                from gpuconsole.backends.kube.control import KubeJobControl

                control = self._control = KubeJobControl(self._client, self.request_timeout)
            return control

    def _client(self) -> Any:
        """The ApiClient of this context, created on first use (reads the kubeconfig)."""
        with self._client_lock:
            if self._api is None:
                client = _kubernetes().client
                self._api = self._new_client()
                self._apis = {"batch": client.BatchV1Api(self._api), "core": client.CoreV1Api(self._api)}
            return self._api

    def _new_client(self) -> Any:
        paths = config_paths(self.kubeconfig)
        k8s = _kubernetes()
        configuration = k8s.client.Configuration()
        # One retry for a connection that could not be opened, none for an answer that did not
        # come: a read timeout retried would double how long a hung server holds a poll.
        configuration.retries = urllib3.Retry(total=1, connect=1, read=0, status=0, redirect=0)
        if paths:
            config_file = os.pathsep.join(paths)
            try:
                if self.context is not None:
                    contexts, _current = k8s.config.list_kube_config_contexts(config_file)
                    names = [c.get("name") for c in contexts or ()]
                    if self.context not in names:
                        raise BackendUnavailable(
                            f"context {self.context!r} is not in the kubeconfig",
                            hint=f"its contexts: {', '.join(map(str, names)) or 'none'} (kubectl config get-contexts)")
                api = k8s.config.new_client_from_config(config_file=config_file, context=self.context,
                                                        persist_config=False, client_configuration=configuration)
            except BackendUnavailable:
                raise
            except (k8s.config.ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
                raise BackendUnavailable(f"the kubeconfig cannot be used: {one_line(str(exc))}", hint=SETUP_HINT) from exc
            except Exception as exc:  # noqa: BLE001 - YAML errors, auth plugins: one line for the user
                raise BackendUnavailable(f"the kubeconfig cannot be read: {one_line(str(exc))}", hint=SETUP_HINT) from exc
        elif self.kubeconfig:
            raise BackendUnavailable(f"kubeconfig {self.kubeconfig} not found", hint=SETUP_HINT)
        elif os.environ.get(IN_CLUSTER_ENV):
            try:
                k8s.config.load_incluster_config(client_configuration=configuration)
            except (k8s.config.ConfigException, OSError) as exc:
                raise BackendUnavailable(f"the in-cluster service account cannot be used: {one_line(str(exc))}",
                                         hint=SETUP_HINT) from exc
            api = k8s.client.ApiClient(configuration)
        else:
            raise BackendUnavailable("no Kubernetes cluster configured", hint=SETUP_HINT)
        self._hold_tls(api)
        return api

    def _hold_tls(self, api: Any) -> None:
        """Put the TLS floor of ``[tls] min_version`` on the client's connections (through its
        urllib3 pool manager: the client's configuration has no setting for it), trusting the
        kubeconfig's CA where it names one. A kubeconfig that turns verification off is refused."""
        from gpuconsole.backends.tls import client_context

        configuration = api.configuration
        if not configuration.verify_ssl:
            raise BackendUnavailable("the kubeconfig turns TLS verification off (insecure-skip-tls-verify): "
                                     "gpuconsole never connects so", hint="give the cluster's CA (certificate-authority)")
        context = client_context(self.name, configuration.ssl_ca_cert)
        api.rest_client.pool_manager.connection_pool_kw["ssl_context"] = context

    # ----------------------------------------------------------------- errors

    @contextmanager
    def _errors(self, where: str, seconds: float | None = None) -> Iterator[None]:
        """Run client calls; only :class:`BackendError` subclasses come out (with ``.status``
        set to the HTTP status where there was one). ``seconds``: the timeout the calls had."""
        k8s = _kubernetes()
        try:
            yield
        except BackendError:
            raise
        except k8s.client.ApiException as exc:
            if exc.status == 410:
                raise _Gone(f"410 Gone {where}: {kube_mapping.status_message(exc.body)}") from exc
            error = status_error(exc.status or 0, exc.body, where)
            error.status = exc.status  # type: ignore[attr-defined]
            raise error from exc
        except urllib3.exceptions.HTTPError as exc:
            raise self._network_error(exc, where, self.request_timeout if seconds is None else seconds) from exc
        except k8s.config.ConfigException as exc:  # an auth plugin that fails while refreshing
            raise BackendUnavailable(f"credentials {where}: {one_line(str(exc))}", hint=SETUP_HINT) from exc
        except OSError as exc:
            raise BackendError(f"cannot talk to the API server {where}: {one_line(str(exc))}") from exc

    def _network_error(self, exc: urllib3.exceptions.HTTPError, where: str, seconds: float) -> BackendError:
        reason = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason else exc
        host = getattr(getattr(self._api, "configuration", None), "host", "the API server")
        if isinstance(reason, urllib3.exceptions.TimeoutError):
            return BackendTimeout(f"no answer from {host} in {seconds:g} s {where}")
        if isinstance(reason, urllib3.exceptions.NewConnectionError):
            return BackendError(f"cannot reach {host} {where}: {one_line(str(reason.__cause__ or reason))}")
        if isinstance(reason, urllib3.exceptions.SSLError):
            return BackendError(f"TLS with {host} failed {where}: {one_line(str(reason))}")
        return BackendError(f"the connection to {host} failed {where}: {one_line(str(reason))}")

    # ----------------------------------------------------------------- requests

    def _request(self, kind: _Kind, namespace: str | None, where: str, timeout: tuple[float, float],
                 **params: Any) -> Any:
        """One list or watch request of ``kind`` (``timeout``: connect, read); the raw urllib3 response."""
        self._client()
        api = self._apis[kind.api]
        if kind.field_selector:
            params["field_selector"] = kind.field_selector
        args: tuple[str, ...] = ()
        method = kind.list_all
        if namespace is not None and kind.list_namespaced is not None:
            method, args = kind.list_namespaced, (namespace,)
        with self._errors(where, timeout[1]):
            return getattr(api, method)(*args, _preload_content=False, _request_timeout=timeout, **params)

    def _fetch(self, kind: _Kind, namespace: str | None, where: str, token: str | None) -> bytes:
        """One page of a list, as the bytes the API server sent."""
        response = self._request(kind, namespace, where, (self.request_timeout, self.request_timeout),
                                 limit=self.page_size, _continue=token)
        try:
            with self._errors(where):
                return bytes(response.data)
        finally:
            response.release_conn()

    def _pages(self, kind: _Kind, namespace: str | None, where: str) -> Iterator[Mapping[str, Any]]:
        """The pages of one list, each next page requested while the one before is parsed.

        The continue token is read from the page's leading metadata without parsing the rest; when
        it cannot be read that way (or differs from the parsed one) the next page waits instead.
        """
        with ThreadPoolExecutor(1, thread_name_prefix="kube-page") as pool:
            data, token = self._fetch(kind, namespace, where, None), None
            while True:
                ahead = _peek_continue(data)
                coming = pool.submit(self._fetch, kind, namespace, where, ahead) if ahead else None
                page = kube_schema.decode_page(kind.name, data) or _json(data, where)
                if not isinstance(page, Mapping) or not isinstance(page.get("items", []), list):
                    raise BackendError(f"unreadable answer {where}: not a list")
                yield page
                meta = page.get("metadata")
                token = (meta if isinstance(meta, Mapping) else {}).get("continue") or None
                if token is None:
                    return
                data = coming.result() if coming is not None and token == ahead else self._fetch(kind, namespace, where, token)

    def _list(self, kind: _Kind, namespace: str | None) -> tuple[dict[str, Any], str]:
        """Every object of ``kind`` as records by uid, and the list's resourceVersion.

        A continue token that expires between pages restarts the list from the first page (a
        list stitched from two moments could miss or repeat objects).
        """
        where = f"listing {kind.name}" + (f" in {namespace}" if namespace else "")
        for _attempt in range(LIST_RESTARTS + 1):
            records: dict[str, Any] = {}
            first = True
            try:
                for page in self._pages(kind, namespace, where):
                    first = False
                    for obj in page.get("items") or ():
                        record = self._read(kind, obj)
                        if record is not None:
                            records[_uid(obj)] = record
                    meta = page.get("metadata")
                    meta = meta if isinstance(meta, Mapping) else {}
                    if not meta.get("continue"):
                        return records, str(meta.get("resourceVersion") or "")
            except _Gone:
                if first:
                    raise
                log.info("the continue token expired %s; listing again from the start", where)
        raise BackendError(f"the list kept expiring {where} ({LIST_RESTARTS} restarts)")

    def _read(self, kind: _Kind, obj: Any) -> Any:
        """``obj`` as a record; ``None`` (logged once per version) when it cannot be read."""
        try:
            return kind.read(obj)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            meta = obj.get("metadata") if isinstance(obj, Mapping) else None
            meta = meta if isinstance(meta, Mapping) else {}
            key, version = (kind.name, str(meta.get("uid"))), str(meta.get("resourceVersion"))
            if self._skipped.get(key) != version:
                self._skipped[key] = version
                log.warning("skipping %s %s: cannot read it (%s: %s)", kind.name[:-1], kube_mapping.describe(obj),
                            type(exc).__name__, exc)
            return None

    def _scopes(self, kind: _Kind) -> tuple[str | None, ...]:
        if kind.list_namespaced is None or not self.namespaces:
            return (None,)
        return self.namespaces

    # ----------------------------------------------------------------- the caches

    def _replace(self, watcher: _Watcher, records: dict[str, Any], version: str) -> None:
        with self._lock:
            watcher.records = records
            watcher.resource_version = version
            self._generation += 1
        watcher.synced.set()

    def _put(self, watcher: _Watcher, uid: str, record: Any) -> None:
        with self._lock:
            if record is None:
                if watcher.records.pop(uid, None) is None:
                    return
            else:
                watcher.records[uid] = record
            self._generation += 1

    def _start_watchers(self) -> list[_Watcher]:
        with self._client_lock:
            watchers = self._watchers
        if watchers is not None:
            return watchers
        self._client()  # a missing kubeconfig is reported before any thread starts
        with self._client_lock:
            if self._watchers is None:
                stop = self._stop
                self._watchers = [_Watcher(self, kind, ns, stop) for kind in KINDS for ns in self._scopes(kind)]
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
        with self._lock:
            generation = self._generation
            if self._last is not None:
                seen, reading, due = self._last
                if seen == generation and (due is None or now < due):
                    return replace(reading, taken_at=now)
            values = {name: [r for cache in kept for r in cache.values()] for name, kept in caches().items()}
        reading = kube_mapping.compose(values[JOBS.name], values[CRONJOBS.name], values[PODS.name],
                                       values[NODES.name], values[EVENTS.name], now)
        with self._lock:
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
                    if kind.required or _http_status(exc) not in (403, 404):
                        raise
                    log.warning("%s are not readable (%s); shown as none", kind.name, exc)
                    continue
                caches[kind.name].append(records)
        with self._lock:
            self._generation += 1
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


def _uid(obj: Any) -> str:
    """The uid of a listed object that could be read (a decoded structure or plain JSON)."""
    meta = getattr(obj, "metadata", None)
    return meta.uid if isinstance(meta, kube_schema.Metadata) else obj["metadata"]["uid"]


def _peek_continue(data: bytes) -> str | None:
    """The continue token in a list's leading metadata, read without parsing the list."""
    head = _LIST_META.match(data[:4096])
    if head is None:
        return None
    token = _CONTINUE.search(head.group(1))
    return token.group(1).decode() if token else None


def _fresh(error: BackendError) -> BackendError:
    """A copy of a kept error to raise (raising one instance again grows its traceback)."""
    fresh = copy.copy(error)
    fresh.__traceback__ = None
    return fresh
