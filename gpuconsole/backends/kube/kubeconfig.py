"""The kubeconfig as kubectl finds it: its files, its contexts, and the client built from it.

The ``kubernetes`` package is imported on first use (or early, in a thread of its own): it takes
half a second, which belongs behind the first frame.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import urllib3

from gpuconsole.backends.base import BackendUnavailable
from gpuconsole.backends.kube.errors import one_line

log = logging.getLogger(__name__)

SETUP_HINT = "point KUBECONFIG at a kubeconfig, create ~/.kube/config, or pass --kubeconfig PATH"
DEFAULT_KUBECONFIG = "~/.kube/config"
IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"


def import_kubernetes() -> Any:
    """The ``kubernetes`` package, imported on first use: it takes half a second (its generated
    models), which belongs in the worker thread that creates the client, not in start-up."""
    import kubernetes.client
    import kubernetes.config
    import kubernetes.watch.watch

    return kubernetes


_import_started = threading.Lock()


def import_early() -> None:
    """Start importing ``kubernetes`` in a thread of its own, once per process: the console
    builds its sources before the window opens, so the import runs while the UI starts, and the
    first poll finds it done (or waits on the import lock for the rest)."""
    if not _import_started.acquire(blocking=False):
        return
    threading.Thread(target=_import_quietly, name="kube-import", daemon=True).start()


def _import_quietly() -> None:
    try:
        import_kubernetes()
    except Exception:  # noqa: BLE001 - the first poll imports it again and reports the error
        log.debug("importing kubernetes failed", exc_info=True)


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
        return import_kubernetes().config.list_kube_config_contexts(os.pathsep.join(paths))
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



def new_api_client(kubeconfig: str | None, context: str | None, name: str) -> Any:
    """An ApiClient for ``context`` of the kubeconfig (or the pod's service account in a
    cluster), with the TLS floor of ``[tls]`` held on its connections; ``name`` is the source's.

    Raises:
        BackendUnavailable: no kubeconfig (nor a cluster to run in), a context it does not hold,
            credentials that cannot be used, or a kubeconfig that turns TLS verification off.
    """
    paths = config_paths(kubeconfig)
    k8s = import_kubernetes()
    configuration = k8s.client.Configuration()
    # One retry for a connection that could not be opened, none for an answer that did not
    # come: a read timeout retried would double how long a hung server holds a poll.
    configuration.retries = urllib3.Retry(total=1, connect=1, read=0, status=0, redirect=0)
    if paths:
        config_file = os.pathsep.join(paths)
        try:
            if context is not None:
                found, _current = k8s.config.list_kube_config_contexts(config_file)
                names = [c.get("name") for c in found or ()]
                if context not in names:
                    raise BackendUnavailable(
                        f"context {context!r} is not in the kubeconfig",
                        hint=f"its contexts: {', '.join(map(str, names)) or 'none'} (kubectl config get-contexts)")
            api = k8s.config.new_client_from_config(config_file=config_file, context=context,
                                                    persist_config=False, client_configuration=configuration)
        except BackendUnavailable:
            raise
        except (k8s.config.ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
            raise BackendUnavailable(f"the kubeconfig cannot be used: {one_line(str(exc))}", hint=SETUP_HINT) from exc
        except Exception as exc:  # noqa: BLE001 - YAML errors, auth plugins: one line for the user
            raise BackendUnavailable(f"the kubeconfig cannot be read: {one_line(str(exc))}", hint=SETUP_HINT) from exc
    elif kubeconfig:
        raise BackendUnavailable(f"kubeconfig {kubeconfig} not found", hint=SETUP_HINT)
    elif os.environ.get(IN_CLUSTER_ENV):
        try:
            k8s.config.load_incluster_config(client_configuration=configuration)
        except (k8s.config.ConfigException, OSError) as exc:
            raise BackendUnavailable(f"the in-cluster service account cannot be used: {one_line(str(exc))}",
                                     hint=SETUP_HINT) from exc
        api = k8s.client.ApiClient(configuration)
    else:
        raise BackendUnavailable("no Kubernetes cluster configured", hint=SETUP_HINT)
    _hold_tls(api, name)
    return api


def _hold_tls(api: Any, name: str) -> None:
    """Put the TLS floor of ``[tls] min_version`` on the client's connections (through its
    urllib3 pool manager: the client's configuration has no setting for it), trusting the
    kubeconfig's CA where it names one. A kubeconfig that turns verification off is refused."""
    from gpuconsole.backends.tls import client_context

    configuration = api.configuration
    if not configuration.verify_ssl:
        raise BackendUnavailable("the kubeconfig turns TLS verification off (insecure-skip-tls-verify): "
                                 "gpuconsole never connects so", hint="give the cluster's CA (certificate-authority)")
    context = client_context(name, configuration.ssl_ca_cert)
    api.rest_client.pool_manager.connection_pool_kw["ssl_context"] = context
