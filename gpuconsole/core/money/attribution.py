"""Who holds a GPU and what it costs: the join GPU → pod → Kubernetes job → node → instance → $/h.

The sources each know one link. NVML and the simulator name the pod by UID (a process's or a MIG
device's ``pod_uid``); the DCGM exporter, read through Prometheus, names it by ``pod`` and
``namespace``. The jobs source maps pods to jobs, and the cloud source maps nodes to instances
with their price. :func:`attribute` follows every link it can and says which it could not, so a
row reads "GPU 3 on node-a: 2% busy, held by job bert-ft of ns nlp, costing $4.10/h".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpuconsole.core.money.costs import job_gpus, mig_share
from gpuconsole.model import FleetSnapshot, Gpu, Instance, Job, MigSlice


@dataclass(frozen=True, slots=True)
class Attribution:
    """A GPU (or one MIG instance of it) with whoever holds it and what it costs per hour."""

    gpu: Gpu
    mig: MigSlice | None = None
    pod: str | None = None  # the pod's name where a source names it
    namespace: str | None = None
    jobs: tuple[Job, ...] = ()
    instance: Instance | None = None
    per_hour: float | None = None  # this GPU's (or MIG instance's) share of the instance price

    @property
    def utilization(self) -> float | None:
        return self.mig.utilization if self.mig is not None else self.gpu.utilization

    @property
    def held(self) -> bool:
        return bool(self.jobs or self.pod)

    @property
    def idle_while_billed(self) -> bool:
        """Billed and doing nothing: no holder and (for a whole GPU) not busy."""
        if self.per_hour is None:
            return False
        if self.mig is not None:
            return not self.held and not self.mig.memory_used_mib
        return not self.gpu.busy

    def sentence(self, node: Callable[[str], str] = str) -> str:
        """``GPU 3 on node-a: 2% busy, held by job bert-ft of ns nlp, costing $4.10/h``.

        Args:
            node: how to write the node's name (the UI shortens it).
        """
        gpu = self.gpu
        where = f"GPU {gpu.index} on {node(gpu.node)}"
        if self.mig is not None:
            where = f"MIG {self.mig.profile} (GI {self.mig.gi_id}) of {where}"
        util = self.utilization
        busy = "utilization N/A" if util is None else f"{util:.0f}% busy"
        if self.jobs:
            holder = "held by " + ", ".join(f"job {j.name} of ns {j.namespace}" for j in self.jobs)
        elif self.pod:
            holder = f"held by pod {self.pod}" + (f" of ns {self.namespace}" if self.namespace else "")
        else:
            holder = "no job"
        cost = ""
        if self.per_hour is not None:
            cost = f", costing ${self.per_hour:,.2f}/h" + (" while IDLE" if self.idle_while_billed else "")
        return f"{where}: {busy}, {holder}{cost}"


def attribute(snapshot: FleetSnapshot, gpu: Gpu, mig_uuid: str = "") -> Attribution:
    """Join ``gpu`` (or its MIG instance ``mig_uuid``) with the snapshot's jobs and instances."""
    mig = next((s for s in gpu.mig_slices if s.uuid == mig_uuid), None) if mig_uuid else None
    if mig is not None:
        pod, namespace = mig.pod, mig.namespace
        uids = {mig.pod_uid} if mig.pod_uid else set()
        uids |= {p.pod_uid for p in gpu.processes if p.pod_uid and p.mig_uuid == mig.uuid}
    else:
        pod, namespace = gpu.pod, gpu.namespace
        uids = {p.pod_uid for p in gpu.processes if p.pod_uid}
        if not pod and gpu.mig_slices:  # a MIG GPU: who holds any of its instances
            uids |= {s.pod_uid for s in gpu.mig_slices if s.pod_uid}
    jobs = jobs_of(snapshot.jobs, uids, pod, namespace)
    instance = instance_of(snapshot, gpu.node)
    per_hour = None
    if instance is not None and instance.gpus and instance.state.billed:
        per_hour = instance.price_per_hour / instance.gpus
        if mig is not None:
            per_hour *= mig_share(mig.profile)
    return Attribution(gpu, mig, pod, namespace, jobs, instance, per_hour)


def jobs_of(jobs: Iterable[Job], pod_uids: set[str | None], pod: str | None,
            namespace: str | None) -> tuple[Job, ...]:
    """The jobs owning pods ``pod_uids`` (a distributed job owns its launcher's and workers'), or
    the pod named ``pod`` in ``namespace``.

    A pod name matches a job's recorded pod, or the job whose name it starts with followed by
    the suffixes Kubernetes adds (``<job>-<suffix>``, ``<job>-<index>-<suffix>`` for an Indexed
    Job); the longest such job name wins.
    """
    found = [j for j in jobs if any(j.owns_pod(uid) for uid in pod_uids)] if pod_uids else []
    if found or not pod:
        return tuple(found)
    best: Job | None = None
    for job in jobs:
        if namespace and job.namespace != namespace:
            continue
        if job.pod == pod:
            return (job,)
        if pod.startswith(job.name + "-") and (best is None or len(job.name) > len(best.name)):
            best = job
    return (best,) if best is not None else ()


def instance_of(snapshot: FleetSnapshot, node: str) -> Instance | None:
    """The instance backing Kubernetes node ``node``: by the instance's node name, else by the
    node's instance id (its ``providerID``)."""
    found = [i for i in snapshot.instances if i.node == node]
    if found:
        return next((i for i in found if i.state.billed), found[-1])
    instance_id = next((n.instance_id for n in snapshot.nodes if n.name == node and n.instance_id), None)
    if instance_id is None:
        return None
    return next((i for i in snapshot.instances if i.instance_id == instance_id), None)


def job_rate(snapshot: FleetSnapshot, job: Job) -> float | None:
    """What ``job`` costs per hour now: its share of the instance under its node (its GPUs, or
    its MIG slice's share of one); None when that cannot be known (no node, no price)."""
    if not job.node:
        return None
    instance = instance_of(snapshot, job.node)
    if instance is None or not instance.gpus or not instance.state.billed:
        return None
    return instance.price_per_hour / instance.gpus * job_gpus(job)
