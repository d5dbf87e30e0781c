"""The real Kubernetes job backend: Jobs, CronJobs, pods, GPU nodes and events of one context,
and the queues in front of the scheduler (Kueue, Volcano) where API discovery shows them.

:class:`KubeJobs` reads the cluster the way kubectl does (:mod:`kubeconfig`) through one
ApiClient per context (:mod:`client`), created on first use from a worker thread. With
``watch=True`` (the console) each kind is kept by a watch thread (:mod:`watch`) and a poll joins
the caches without a request; with ``watch=False`` every poll lists everything (:mod:`listing`);
:mod:`watched` does both for any set of kinds. Kueue's ClusterQueues, LocalQueues and Workloads
(``kueue.x-k8s.io`` v1beta2, else v1beta1) and Volcano's Queues, PodGroups and Jobs are read only
where discovery (:mod:`discovery`) serves their groups: without them nothing more is asked after
discovery, and a job's queue and what it waits for come from :mod:`queue_compose`, its place in
the queue from Kueue's visibility API where that is served (:mod:`queue_visibility`).
"""

from __future__ import annotations

from typing import Any

from gpuconsole.backends.base import Capability
from gpuconsole.backends.kube import mapping as kube_mapping
from gpuconsole.backends.kube.discovery import DISCOVERY_S, DiscoveringLister
from gpuconsole.backends.kube.kubeconfig import (
    DEFAULT_KUBECONFIG,
    IN_CLUSTER_ENV,
    SETUP_HINT,
    config_paths,
    contexts,
    import_early,
    kubeconfig_user,
)
from gpuconsole.backends.kube.listing import CRONJOBS, EVENTS, JOBS, KINDS, NODES, PAGE_SIZE, PODS, Kind, parse_json
from gpuconsole.backends.kube.queue_compose import annotate
from gpuconsole.backends.kube.queue_records import KUEUE_GROUP, KUEUE_VERSIONS
from gpuconsole.backends.kube.queue_kinds import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    POD_GROUPS,
    VOLCANO_JOBS,
    VOLCANO_QUEUES,
    WORKLOADS,
    queue_kinds,
)
from gpuconsole.backends.kube.queue_visibility import VISIBILITY_GROUP, VISIBILITY_VERSIONS, Positions, PositionReader
from gpuconsole.backends.kube.training import JOBSET, MPIJOB, PYTORCHJOB, READERS, TRAINJOB
from gpuconsole.backends.kube.watch import WATCH_TIMEOUT_S
from gpuconsole.backends.kube.watched import Records
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

VISIBILITY_TIMEOUT_S = 3.0  # at most, for one answer of Kueue's visibility API
# The distributed training kinds (MPIJob, PyTorchJob, TrainJob, JobSet), each read where
# discovery shows its CRD's group version; without them nothing else is asked.
TRAINING_KINDS: tuple[Kind, ...] = tuple(
    Kind(f"{kind}s", "custom", "list_cluster_custom_object", "list_namespaced_custom_object", READERS[kind],
         required=False, custom=(group, version, plural))
    for kind, group, version, plural in (MPIJOB, PYTORCHJOB, TRAINJOB, JOBSET))


class KubeJobs(DiscoveringLister):
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
        discovery_every: seconds between two discoveries of the Kueue, Volcano and training
            operators' API groups.
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
                         watch_timeout=watch_timeout, page_size=page_size, discovery_every=discovery_every)
        self._control: Any = None
        self._positions = PositionReader()
        import_early()

    def kinds(self) -> tuple[Kind, ...]:
        training = tuple(k for k in TRAINING_KINDS if k.custom is not None and self.serves(*k.custom[:2]))
        return (*KINDS, *queue_kinds(self), *training)

    @property
    def job_control(self) -> Any:
        """Submit, delete, suspend, trigger, logs and describe in this context (same ApiClient)."""
        with self._client_lock:
            control = getattr(self, "_control", None)
            if control is None:
                from gpuconsole.backends.kube.control import KubeJobControl

                control = self._control = KubeJobControl(self._client, self.request_timeout)
                control.kueue_version = self._kueue_version
            return control

    def _kueue_version(self) -> str | None:
        """The Kueue version the cluster serves (discovery is asked first when no poll has)."""
        if self.groups is None:
            self._discover()
        served = self.serves(KUEUE_GROUP, *KUEUE_VERSIONS)
        return served if isinstance(served, str) else None

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
        discovered = self._discovered_at
        self._discover()
        if self._discovered_at != discovered:
            self._positions.forget_refusal()
        self._read_positions()
        positions = self._positions.positions
        return self._poll(lambda values, now: _compose(values, now, positions), kube_mapping.next_cron_change)

    def _read_positions(self) -> None:
        """Kueue's queue positions, where its visibility API is served and it is time to ask
        (for the queues the last reading's jobs wait in); a change makes the next join new."""
        version = self.serves(VISIBILITY_GROUP, *VISIBILITY_VERSIONS)
        last = self._last[1] if self._last is not None else None
        if not isinstance(version, str) or last is None or not self._positions.due():
            return
        # The positions are extra: a slow visibility server never holds the jobs up for long.
        seconds = min(self.request_timeout, VISIBILITY_TIMEOUT_S)
        api, timeout = self._client(), (seconds, seconds)

        def get(path: str) -> Any:
            where = f"reading Kueue's queue positions ({path.split('?', 1)[0]})"
            with self._errors(where):
                response = api.call_api(f"/apis/{VISIBILITY_GROUP}/{version}/{path}", "GET",
                                        header_params={"Accept": "application/json"}, auth_settings=["BearerToken"],
                                        _preload_content=False, _request_timeout=timeout)
                try:
                    data = bytes(response.data)
                finally:
                    response.release_conn()
            return parse_json(data, where)

        if self._positions.read(get, last.jobs, self.namespaces):
            self._cache.changed()


def _compose(values: Records, now: float, positions: Positions | None = None) -> JobsReading:
    vcjobs = values.get(VOLCANO_JOBS.name, [])
    jobs = [*values[JOBS.name], *(r.job for r in vcjobs)]
    training = [record for kind in TRAINING_KINDS for record in values.get(kind.name, ())]
    reading = kube_mapping.compose(jobs, values[CRONJOBS.name], values[PODS.name], values[NODES.name],
                                   values[EVENTS.name], now, training)
    return annotate(reading, values.get(CLUSTER_QUEUES.name, ()), values.get(LOCAL_QUEUES.name, ()),
                    values.get(WORKLOADS.name, ()), values.get(VOLCANO_QUEUES.name, ()),
                    values.get(POD_GROUPS.name, ()), vcjobs, positions or {})
