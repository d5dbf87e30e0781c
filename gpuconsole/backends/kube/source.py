"""The real Kubernetes job backend: Jobs, CronJobs, pods, GPU nodes and events of one context.

:class:`KubeJobs` reads the cluster the way kubectl does (:mod:`kubeconfig`) through one
ApiClient per context (:mod:`client`), created on first use from a worker thread. With
``watch=True`` (the console) each kind is kept by a watch thread (:mod:`watch`) and a poll joins
the caches without a request; with ``watch=False`` every poll lists everything (:mod:`listing`);
:mod:`watched` does both for any set of kinds.

Distributed training jobs (MPIJob, PyTorchJob, TrainJob, JobSet: :mod:`training`) are read only
where API discovery (:mod:`discovery`) shows their CRD's group version; without them nothing
else is asked.
"""

from __future__ import annotations

from typing import Any

from gpuconsole.backends.base import Capability
from gpuconsole.backends.kube import mapping as kube_mapping
from gpuconsole.backends.kube.discovery import DISCOVERY_S, Discovery
from gpuconsole.backends.kube.kubeconfig import (
    DEFAULT_KUBECONFIG,
    IN_CLUSTER_ENV,
    SETUP_HINT,
    config_paths,
    contexts,
    import_early,
    kubeconfig_user,
)
from gpuconsole.backends.kube.listing import CRONJOBS, EVENTS, JOBS, KINDS, NODES, PAGE_SIZE, PODS, Kind
from gpuconsole.backends.kube.training import JOBSET, MPIJOB, PYTORCHJOB, READERS, TRAINJOB
from gpuconsole.backends.kube.watch import WATCH_TIMEOUT_S
from gpuconsole.backends.kube.watched import Records, WatchedLister
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

# The distributed kinds, each read where discovery shows its group version.
TRAINING_KINDS: tuple[Kind, ...] = tuple(
    Kind(f"{kind}s", "custom", "list_cluster_custom_object", "list_namespaced_custom_object", READERS[kind],
         required=False, custom=(group, version, plural))
    for kind, group, version, plural in (MPIJOB, PYTORCHJOB, TRAINJOB, JOBSET))


class KubeJobs(WatchedLister):
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
        discovery_every: seconds between two discoveries of the training operators' CRDs.
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
        discovery_every: float = DISCOVERY_S,
    ) -> None:
        super().__init__(kubeconfig, context, namespaces, request_timeout=request_timeout, watch=watch,
                         watch_timeout=watch_timeout, page_size=page_size)
        self.poll_timeout = 2 * self.request_timeout + 2.0  # a discovery, then the first lists
        self.discovery = Discovery(discovery_every)
        self._control: Any = None
        import_early()

    def kinds(self) -> tuple[Kind, ...]:
        served = self.discovery.served or frozenset()
        return KINDS + tuple(k for k in TRAINING_KINDS if k.custom is not None and f"{k.custom[0]}/{k.custom[1]}" in served)

    @property
    def job_control(self) -> Any:
        """Submit, delete, suspend, trigger, logs and describe in this context (same ApiClient)."""
        with self._client_lock:
            control = getattr(self, "_control", None)
            if control is None:
                from gpuconsole.backends.kube.control import KubeJobControl

                control = self._control = KubeJobControl(self._client, self.request_timeout)
            return control

    # ----------------------------------------------------------------- JobBackend

    def poll_jobs(self) -> JobsReading:
        """The jobs, CronJobs and GPU nodes as the cache (or, without watching, a list) has them.

        Raises:
            BackendUnavailable: no kubeconfig / in-cluster account, or one that cannot be used.
            BackendPermissionDenied: 401, or 403 on Jobs.
            BackendTimeout: the API server did not answer in time.
            BackendError: any other failure; the cache is kept for the next poll.
        """
        self._client()  # a missing kubeconfig is reported before discovery is tried
        self.discovery.refresh(self)
        return self._poll(_compose, kube_mapping.next_cron_change)


def _compose(values: Records, now: float) -> JobsReading:
    training = [record for kind in TRAINING_KINDS for record in values.get(kind.name, ())]
    return kube_mapping.compose(values[JOBS.name], values[CRONJOBS.name], values[PODS.name],
                                values[NODES.name], values[EVENTS.name], now, training)
