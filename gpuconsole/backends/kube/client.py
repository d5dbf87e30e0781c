"""One context's API client, created on first use, and the client's failures as backend errors."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import urllib3

from gpuconsole.backends.base import BackendError, BackendTimeout, BackendUnavailable
from gpuconsole.backends.kube.errors import one_line, status_error, status_message
from gpuconsole.backends.kube.kubeconfig import SETUP_HINT, import_kubernetes, new_api_client


class Gone(BackendError):
    """410: a continue token or a watch's resourceVersion is too old."""


def http_status(error: BackendError) -> int | None:
    """The HTTP status the API server answered with, where there was one."""
    return getattr(error, "status", None)


class KubeClient:
    """The ApiClient of one kubeconfig context: the constructor reads no file and opens no
    connection; the first :meth:`_client` call (from a worker thread) does.

    Args:
        kubeconfig: a kubeconfig path (or several joined by ``:``); ``None``: as kubectl finds it.
        context: a context of the kubeconfig; ``None``: its current context.
        request_timeout: seconds any request may take to answer.
    """

    def __init__(self, kubeconfig: str | None, context: str | None, request_timeout: float) -> None:
        self.name = f"kube:{context}" if context else "kube"
        self.kubeconfig = kubeconfig
        self.context = context
        self.request_timeout = float(request_timeout)
        self._client_lock = threading.Lock()
        self._api: Any = None
        self._apis: dict[str, Any] = {}

    def _client(self) -> Any:
        """The ApiClient of this context, created on first use (reads the kubeconfig)."""
        with self._client_lock:
            if self._api is None:
                client = import_kubernetes().client
                self._api = new_api_client(self.kubeconfig, self.context, self.name)
                self._apis = {"batch": client.BatchV1Api(self._api), "core": client.CoreV1Api(self._api),
                              "apps": client.AppsV1Api(self._api), "autoscaling": client.AutoscalingV2Api(self._api),
                              "custom": client.CustomObjectsApi(self._api), "apis": client.ApisApi(self._api)}
            return self._api

    @contextmanager
    def _errors(self, where: str, seconds: float | None = None) -> Iterator[None]:
        """Run client calls; only :class:`BackendError` subclasses come out (with ``.status``
        set to the HTTP status where there was one). ``seconds``: the timeout the calls had."""
        k8s = import_kubernetes()
        try:
            yield
        except BackendError:
            raise
        except k8s.client.ApiException as exc:
            if exc.status == 410:
                raise Gone(f"410 Gone {where}: {status_message(exc.body)}") from exc
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

