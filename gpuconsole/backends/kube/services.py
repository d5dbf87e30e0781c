"""The real Kubernetes services backend: GPU Deployments, StatefulSets and KServe InferenceServices.

:class:`KubeServices` reads, in one context, ``apps/v1`` Deployments and StatefulSets, the
``autoscaling/v2`` HPAs, the pods that hold GPUs, GPU nodes and scheduling warnings, kept by
watches (or listed each poll without watching) as the job backend keeps its kinds
(:mod:`watched`). InferenceServices are read only where API discovery (``GET /apis``, a request
every user may make) shows the ``serving.kserve.io/v1beta1`` group: a cluster without KServe
costs no failing request and no log line. Discovery is asked again every
:data:`DISCOVERY_S` seconds, so KServe installed later is found.

It is also the cluster's :class:`~gpuconsole.backends.base.ServiceControl` (scale, rollout
restart, a replica's log, describe) through :mod:`service_control`, on the same ApiClient.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

from gpuconsole.backends.base import Capability
from gpuconsole.backends.kube.autoscaler import hpa_record
from gpuconsole.backends.kube.discovery import DISCOVERY_S, DiscoveringLister
from gpuconsole.backends.kube.kubeconfig import import_early
from gpuconsole.backends.kube.listing import EVENTS, NODES, PAGE_SIZE, Kind
from gpuconsole.backends.kube.service_compose import compose
from gpuconsole.backends.kube.service_records import (
    INFERENCESERVICES,
    KSERVE_GROUP,
    KSERVE_VERSION,
    deployment_record,
    inference_service_record,
    replica_record,
    statefulset_record,
)
from gpuconsole.backends.kube.watch import WATCH_TIMEOUT_S
from gpuconsole.backends.kube.watched import Records
from gpuconsole.model import ServicesReading


DEPLOYMENTS = Kind("Deployments", "apps", "list_deployment_for_all_namespaces", "list_namespaced_deployment",
                   deployment_record)
STATEFULSETS = Kind("StatefulSets", "apps", "list_stateful_set_for_all_namespaces", "list_namespaced_stateful_set",
                    statefulset_record, required=False)
HPAS = Kind("HorizontalPodAutoscalers", "autoscaling", "list_horizontal_pod_autoscaler_for_all_namespaces",
            "list_namespaced_horizontal_pod_autoscaler", hpa_record, required=False)
# Named as the job backend's pods are, so their pages decode the fast way; only GPU pods are kept.
GPU_PODS = Kind("Pods", "core", "list_pod_for_all_namespaces", "list_namespaced_pod", replica_record, required=False)
INFERENCE_SERVICES = Kind("InferenceServices", "custom", "list_cluster_custom_object", "list_namespaced_custom_object",
                          inference_service_record, required=False,
                          custom=(KSERVE_GROUP, KSERVE_VERSION, INFERENCESERVICES))
KINDS: tuple[Kind, ...] = (DEPLOYMENTS, STATEFULSETS, HPAS, GPU_PODS, NODES, EVENTS)


class KubeServices(DiscoveringLister):
    """The inference services of one Kubernetes context, behind the console's services interface.

    Args:
        kubeconfig, context, namespaces, request_timeout, watch, watch_timeout, page_size: as
            for :class:`~gpuconsole.backends.kube.source.KubeJobs`.
        discovery_every: seconds between two discoveries of the KServe API group.
    """

    name: str = "kube"
    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, kubeconfig: str | None = None, context: str | None = None, namespaces: tuple[str, ...] = (),
                 *, request_timeout: float = 10.0, watch: bool = True, watch_timeout: int = WATCH_TIMEOUT_S,
                 page_size: int = PAGE_SIZE, discovery_every: float = DISCOVERY_S) -> None:
        super().__init__(kubeconfig, context, namespaces, request_timeout=request_timeout, watch=watch,
                         watch_timeout=watch_timeout, page_size=page_size, discovery_every=discovery_every)
        self._control: Any = None
        import_early()

    def kinds(self) -> tuple[Kind, ...]:
        return (*KINDS, INFERENCE_SERVICES) if self.kserve else KINDS

    @property
    def kserve(self) -> bool | None:
        """Whether KServe's InferenceService CRD is served; None: not known."""
        served = self.serves(KSERVE_GROUP, KSERVE_VERSION)
        return None if served is None else bool(served)

    def poll_services(self) -> ServicesReading:
        """The GPU services as the caches (or, without watching, fresh lists) have them.

        Raises:
            BackendUnavailable: no kubeconfig / in-cluster account, or one that cannot be used.
            BackendPermissionDenied: 401, or 403 on Deployments.
            BackendTimeout: the API server did not answer in time.
            BackendError: any other failure; the caches are kept for the next poll.
        """
        self._client()  # a missing kubeconfig is reported before discovery is tried
        self._discover()
        kserve = self.kserve
        isvc = INFERENCE_SERVICES.name

        def join(values: Records, now: float) -> ServicesReading:
            workloads = [*values[DEPLOYMENTS.name], *values[STATEFULSETS.name]]
            return compose(workloads, values.get(isvc, ()), values[HPAS.name], values[GPU_PODS.name],
                           values[NODES.name], values[EVENTS.name], now, kserve)

        return self._poll(join)

    # ----------------------------------------------------------------- ServiceControl

    @property
    def service_control(self) -> Any:
        """Scale, restart, logs and describe in this context (the same ApiClient)."""
        with self._client_lock:
            if self._control is None:
                from gpuconsole.backends.kube.service_control import KubeServiceControl

                self._control = KubeServiceControl(self._client, self.request_timeout)
            return self._control

    def scale_service(self, kind: str, namespace: str, name: str, replicas: int) -> None:
        self.service_control.scale_service(kind, namespace, name, replicas)

    def restart_service(self, kind: str, namespace: str, name: str) -> None:
        self.service_control.restart_service(kind, namespace, name)

    def service_logs(self, namespace: str, pod: str, *, tail_lines: int = 1000, follow: bool = False,
                     stop: threading.Event | None = None) -> Iterator[str]:
        return self.service_control.logs(namespace, pod, tail_lines=tail_lines, follow=follow, stop=stop)

    def describe_service(self, kind: str, namespace: str, name: str) -> str:
        return str(self.service_control.describe_service(kind, namespace, name))
