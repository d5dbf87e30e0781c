"""Who holds a GPU and what it costs: the join GPU → pod → Kubernetes job → node → instance → $/h.

The sources each know one link. NVML and the simulator name the pod by UID (a process's or a MIG
device's ``pod_uid``); the DCGM exporter, read through Prometheus, names it by ``pod`` and
``namespace``. The jobs source maps pods to jobs, and the cloud source maps nodes to instances
with their price. :func:`attribute` follows every link it can and says which it could not, so a
row reads "GPU 3 on node-a: 2% busy, held by job bert-ft of ns nlp, costing $4.10/h".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
import itertools
import operator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from gpuconsole.core.money.costs import job_gpus, mig_share
from gpuconsole.model import FleetSnapshot, Gpu, Instance, Job, MigSlice

T = TypeVar("T")
_POD_UID = operator.attrgetter("pod_uid")
_POD_UIDS = operator.attrgetter("pod_uids")


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
    Job); the longest such job name wins. Found through :class:`JobIndex`, made once per reading.
    """
    return job_index(jobs if isinstance(jobs, tuple) else tuple(jobs)).owning(pod_uids, pod, namespace)


class JobIndex:
    """A reading's jobs found by the pods they own: made once per tuple of jobs (a big cluster
    lists 100,000), so each GPU's holder is a look-up, not a pass over every job.

    By pod UID at once (in C: a dict of each job's pod); by pod name or job name, per
    namespace, when first asked (a DCGM exporter names pods, not UIDs)."""

    def __init__(self, jobs: tuple[Job, ...]) -> None:
        self.jobs = jobs
        uids = list(map(_POD_UID, jobs))
        self._owner: dict[str | None, Job] = dict(zip(reversed(uids), reversed(jobs), strict=True))  # the first wins
        self._more: dict[str, list[Job]] = {}  # a pod some other job owns too, or a distributed job's other pods
        unnamed = uids.count(None) + uids.count("")
        if len(uids) - unnamed > len(self._owner) - (None in self._owner) - ("" in self._owner):
            for job in jobs:  # two jobs name the same pod (never in a healthy cluster): keep both
                if job.pod_uid and self._owner[job.pod_uid] is not job:
                    self._more.setdefault(job.pod_uid, []).append(job)
        for job in itertools.compress(jobs, map(_POD_UIDS, jobs)):  # the few distributed jobs
            for uid in job.pod_uids:
                if uid != job.pod_uid:
                    self._more.setdefault(uid, []).append(job)
        self._named: dict[str | None, tuple[dict[str, Job], dict[str, Job]]] = {}

    def owner(self, pod_uid: str | None) -> Job | None:
        """The first job owning the pod with ``pod_uid``."""
        found = self.owning({pod_uid}, None, None)
        return found[0] if found else None

    def owning(self, pod_uids: set[str | None], pod: str | None, namespace: str | None) -> tuple[Job, ...]:
        """As :func:`jobs_of`, in the order of the reading."""
        found: dict[int, Job] = {}
        for uid in pod_uids:
            if not uid:
                continue
            first = self._owner.get(uid)
            for job in ([first] if first is not None else []) + self._more.get(uid, []):
                found.setdefault(id(job), job)
        if found or not pod:
            jobs = list(found.values())
            return tuple(sorted(jobs, key=self.jobs.index) if len(jobs) > 1 else jobs)
        pods, names = self._names(namespace or None)
        if pod in pods:
            return (pods[pod],)
        at = len(pod)
        while (at := pod.rfind("-", 0, at)) >= 0:  # the longest job name before a "-" first
            if pod[:at] in names:
                return (names[pod[:at]],)
        return ()

    def _names(self, namespace: str | None) -> tuple[dict[str, Job], dict[str, Job]]:
        """The first job of each pod name and of each job name in ``namespace`` (None: any)."""
        named = self._named.get(namespace)
        if named is None:
            pods: dict[str, Job] = {}
            names: dict[str, Job] = {}
            for job in self.jobs:
                if namespace is None or job.namespace == namespace:
                    if job.pod:
                        pods.setdefault(job.pod, job)
                    names.setdefault(job.name, job)
            named = self._named[namespace] = (pods, names)
        return named


class PerReading(Generic[T]):
    """What ``make`` made of the last two readings (tuples, known by identity): the one on
    screen and the one just delivered, which the thread delivering it may make first, so the
    UI thread only looks it up. Safe from any thread (a miss is made twice at worst)."""

    def __init__(self, make: Callable[[tuple[Any, ...]], T]) -> None:
        self._make = make
        self._made: tuple[tuple[tuple[Any, ...], T], ...] = ()

    def __call__(self, reading: tuple[Any, ...]) -> T:
        for seen, made in self._made:
            if seen is reading:
                return made
        made = self._make(reading)
        self._made = ((reading, made), *self._made[:1])
        return made


job_index: PerReading[JobIndex] = PerReading(JobIndex)  # a reading's JobIndex, made once


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
