"""One moment's service records joined into a :class:`~gpuconsole.model.ServicesReading`.

Each workload gets the GPU pods its selector selects (found through a label index, not by
testing every pod), the HPA whose ``scaleTargetRef`` names it, the GPU product of its nodes, and
for each replica that is not ready, why, in the scheduler's words (as for a job). A KServe
InferenceService runs a Deployment of its own (raw mode; one per revision serverless): that
Deployment (the newest) is shown as the InferenceService (its replica counts, its HPA, its
stalled rollout), not twice.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from gpuconsole.backends.kube.pending import WarningIndex, pod_reason
from gpuconsole.backends.kube.records import NodeRecord, WarningRecord
from gpuconsole.backends.kube.service_records import HpaRecord, ReplicaRecord, WorkloadRecord
from gpuconsole.model import Rollout, Service, ServiceHpa, ServiceKind, ServiceReplica, ServicesReading


class PodIndex:
    """The GPU pods of one moment by namespace and by each label they carry."""

    def __init__(self, replicas: Iterable[ReplicaRecord]) -> None:
        self._by_label: dict[tuple[str, str, str], list[ReplicaRecord]] = defaultdict(list)
        for replica in replicas:
            namespace = replica.pod.namespace
            for key, value in replica.labels.items():
                self._by_label[(namespace, str(key), str(value))].append(replica)

    def select(self, workload: WorkloadRecord) -> list[ReplicaRecord]:
        """The pods of ``workload``'s namespace that its selector selects."""
        selector = workload.selector
        if not selector.labels:  # expressions alone: every pod of the namespace is a candidate
            candidates = {id(r): r for (ns, _k, _v), found in self._by_label.items() if ns == workload.namespace
                          for r in found}.values()
        else:
            candidates = min((self._by_label.get((workload.namespace, k, v), []) for k, v in selector.labels), key=len)
        return [r for r in candidates if selector.matches(r.labels)]


def _replica(record: ReplicaRecord, warnings: WarningIndex) -> ServiceReplica:
    pod = record.pod
    return ServiceReplica(pod=pod.name, node=pod.node, uid=pod.uid, phase=pod.phase, ready=record.ready,
                          gpus=record.gpus, mig_profile=record.mig_profile,
                          pending_reason=None if record.ready else pod_reason(pod, warnings), started=record.started)


def service_of(workload: WorkloadRecord, pods: list[ReplicaRecord], hpa: ServiceHpa | None,
               products: dict[str, str], warnings: WarningIndex, runs: WorkloadRecord | None = None) -> Service:
    """One service: ``workload`` with its pods, its HPA, and (an InferenceService) the Deployment
    that ``runs`` it."""
    replicas = tuple(sorted((_replica(p, warnings) for p in pods), key=lambda r: r.pod))
    counted = sum(1 for r in replicas if r.ready)
    counts = runs if runs is not None else workload
    desired = runs.desired if runs is not None else workload.desired
    ready = counts.ready if counts.ready is not None else counted
    available = counts.available if counts.available is not None else counted
    rollout, message = workload.rollout, workload.rollout_message
    if runs is not None and runs.rollout is Rollout.STALLED:
        rollout, message = runs.rollout, runs.rollout_message
    nodes = tuple(sorted({r.node for r in replicas if r.node}))
    return Service(
        namespace=workload.namespace, name=workload.name, kind=workload.kind, replicas_desired=desired,
        replicas_ready=ready, replicas_available=available,
        gpus_per_replica=(workload.per_replica or (runs.per_replica if runs is not None else 0.0)
                          or max((r.gpus for r in replicas), default=0.0)),
        gpus=sum(r.gpus for r in replicas if r.node), gpu_model=next((products[n] for n in nodes if products.get(n)), None),
        mig_profile=(workload.mig_profile or (runs.mig_profile if runs is not None else None)
                     or next((r.mig_profile for r in replicas if r.mig_profile), None)),
        nodes=nodes, image=workload.image, created=workload.created, uid=workload.uid, hpa=hpa, rollout=rollout,
        rollout_message=message, pending_reason=next((r.pending_reason for r in replicas if r.pending_reason), None),
        replicas=replicas, labels=workload.labels,
    )


def compose(workloads: Iterable[WorkloadRecord], inference_services: Iterable[WorkloadRecord],
            hpas: Iterable[HpaRecord], replicas: Iterable[ReplicaRecord], nodes: Iterable[NodeRecord],
            warnings: Iterable[WarningRecord], now: float, kserve: bool | None) -> ServicesReading:
    """Join the records of one moment into a reading, services sorted by namespace and name."""
    index = PodIndex(replicas)
    warning_index = WarningIndex(warnings)
    products = {n.node.name: n.node.gpu_product for n in nodes}
    targets = {(h.namespace, h.target_kind, h.target_name): h.hpa for h in hpas}
    served = {(s.namespace, s.name): s for s in inference_services}
    runs: dict[tuple[str, str], WorkloadRecord] = {}
    services: list[Service] = []
    for workload in workloads:
        key = (workload.namespace, workload.inference_service or "")
        if key in served:
            # Serverless mode keeps a Deployment per revision: the newest is the one serving.
            seen = runs.get(key)
            if seen is None or (workload.created or 0.0) >= (seen.created or 0.0):
                runs[key] = workload
            continue
        hpa = targets.get((workload.namespace, workload.kind.value, workload.name))
        services.append(service_of(workload, index.select(workload), hpa, products, warning_index))
    for key, isvc in served.items():
        pods, deployment = index.select(isvc), runs.get(key)
        if not isvc.per_replica and not pods and deployment is None:
            continue  # its predictor asks for no GPU
        hpa = targets.get((isvc.namespace, ServiceKind.DEPLOYMENT.value, deployment.name)) if deployment else None
        services.append(service_of(isvc, pods, hpa, products, warning_index, deployment))
    services.sort(key=lambda s: (s.namespace, s.name, s.kind.value))
    return ServicesReading(tuple(services), now, kserve=kserve)
