"""Who holds a GPU and what it costs: the join GPU → pod → Kubernetes job → node → instance → $/h.

The sources each know one link. NVML and the simulator name the pod by UID (a process's or a MIG
device's ``pod_uid``); the DCGM exporter, read through Prometheus, names it by ``pod`` and
``namespace``. The jobs source maps pods to jobs, and the cloud source maps nodes to instances
with their price. :func:`attribute` follows every link it can and says which it could not, so a
row reads "GPU 3 on node-a: 2% busy, held by job bert-ft of ns nlp, costing $4.10/h".

A big cluster lists 100,000 jobs: the link from a pod to its job is a look-up in a
:class:`JobIndex`, made once per reading (:class:`PerReading` keeps what was made of the last
readings, which the console may make in the thread that delivers them).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from gpuconsole.core.money.costs import job_gpus, mig_share
from gpuconsole.model import FleetSnapshot, Gpu, Instance, Job, MigSlice, unfinished
from gpuconsole.model.per_reading import PerReading

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
    """Join ``gpu`` (or its MIG instance ``mig_uuid``) with the snapshot's live jobs and its
    instances: a finished job's pods have let their GPUs go, and a cluster that keeps finished
    jobs lists 100,000 of them beside a few thousand live ones (an index of those is made once
    a reading, not of every job on each GPU's detail)."""
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
    jobs = jobs_of(unfinished(snapshot.jobs), uids, pod, namespace)
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
    """A reading's jobs found by the pods they own, with no pass of Python code over every job
    (a big cluster lists 100,000): a column of the jobs (their pod UIDs, pod names or names) is
    read out in C once per reading when first asked, and a look-up searches it in C (about
    1.5 ms over 100,000 jobs). No dict of every job: one would hold megabytes a reading."""

    def __init__(self, jobs: tuple[Job, ...]) -> None:
        self.jobs = jobs
        self._columns: dict[str, tuple[str | None, ...]] = {}
        self._spread: list[int] | None = None  # where the jobs with several pods are (distributed jobs)
        self._found: dict[tuple[frozenset[str | None], str | None, str | None], tuple[Job, ...]] = {}

    def owner(self, pod_uid: str | None) -> Job | None:
        """The first job owning the pod with ``pod_uid``."""
        found = self.owning({pod_uid}, None, None)
        return found[0] if found else None

    def owning(self, pod_uids: set[str | None], pod: str | None, namespace: str | None) -> tuple[Job, ...]:
        """As :func:`jobs_of`, in the order of the reading; the same question asked again of
        the reading (every frame, every key the footer checks) is answered from memory."""
        asked = (frozenset(pod_uids), pod, namespace)
        found = self._found.get(asked)
        if found is None:
            found = self._found[asked] = self._search(pod_uids, pod, namespace)
        return found

    def _search(self, pod_uids: set[str | None], pod: str | None, namespace: str | None) -> tuple[Job, ...]:
        jobs = self.jobs
        uids = [uid for uid in pod_uids if uid]
        places: set[int] = set()
        for uid in uids:
            places.update(self._places("pod_uid", uid))
        if uids:
            places.update(at for at in self._spread_places() if any(uid in jobs[at].pod_uids for uid in uids))
        if places or not pod:
            return tuple(jobs[at] for at in sorted(places))

        def first(column: str, value: str) -> tuple[Job, ...] | None:
            """The first job whose ``column`` is ``value`` in ``namespace`` (any, when none)."""
            at = next((at for at in self._places(column, value) if not namespace or jobs[at].namespace == namespace), None)
            return None if at is None else (jobs[at],)

        found = first("pod", pod)
        at = len(pod)
        while found is None and (at := pod.rfind("-", 0, at)) >= 0:  # the longest job name before a "-" first
            found = first("name", pod[:at])
        return found or ()

    def _spread_places(self) -> list[int]:
        """Where the jobs with pods of their own (distributed jobs) are."""
        if self._spread is None:
            self._spread = list(itertools.compress(range(len(self.jobs)), map(_POD_UIDS, self.jobs)))
        return self._spread

    def _column(self, column: str) -> tuple[str | None, ...]:
        values = self._columns.get(column)
        if values is None:
            values = self._columns[column] = tuple(map(operator.attrgetter(column), self.jobs))
        return values

    def _places(self, column: str, value: str) -> Iterator[int]:
        """Where the jobs whose ``column`` is ``value`` are, in order (searched in C)."""
        values = self._column(column)
        at = -1
        while True:
            try:
                at = values.index(value, at + 1)
            except ValueError:
                return
            yield at


job_index: PerReading[JobIndex] = PerReading(JobIndex)  # a reading's JobIndex, made once (the one on screen)


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
