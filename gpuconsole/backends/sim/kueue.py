"""Kueue in the simulated cluster: a cohort of ClusterQueues with GPU quotas in front of the scheduler.

The demo's cluster runs Kueue for two teams: ClusterQueues ``research`` and ``nlp`` share the
cohort ``gpu-pool``, each team namespace has a LocalQueue named after its ClusterQueue, and a Job
that names a LocalQueue (``kueue.x-k8s.io/queue-name``) is held, suspended, until its ClusterQueue
admits it: its GPUs fit in the queue's nominal quota plus what it may borrow from the rest of the
cohort (each lends at most its lending limit of what it leaves unused). Held Jobs are admitted in
Kueue's order, oldest first (BestEffortFIFO: one that does not fit lets the next one try).
Admitted work keeps its quota until it finishes, is suspended or is deleted, whether or not a
node fits it yet; so work that waits for nodes can fill a queue, and what comes after it waits
on quota however many nodes there are.

The world reads the queues as the Kubernetes backend reads Kueue's objects: this module gives
the same records (:mod:`gpuconsole.backends.kube.queue_records`) and the same composition
(:func:`gpuconsole.backends.kube.queue_compose.annotate`) says why each job waits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from msgspec.structs import replace

from gpuconsole.backends.kube.queue_compose import annotate, borrowable, kueue_queues
from gpuconsole.backends.kube.queue_records import ClusterQueueRecord, LocalQueueRecord, WorkloadRecord
from gpuconsole.backends.sim.scheduler import Scheduler
from gpuconsole.backends.sim.state import SimJob
from gpuconsole.model import Job, JobsReading, JobState, WaitingFor

COHORT = "gpu-pool"
FLAVOR = "default-flavor"
LIVE = (JobState.PENDING, JobState.RUNNING)


@dataclass(frozen=True, slots=True)
class QuotaSpec:
    """A ClusterQueue: its GPU quota, limits, and the namespaces whose LocalQueue (named after it) feeds it."""

    name: str
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None
    namespaces: tuple[str, ...]


# research's quota is taken by its training runs, two of which wait for nodes; nlp lends it 8 GPUs.
DEMO_QUEUES = (
    QuotaSpec("nlp", 16, 8, 8, ("team-nlp",)),
    QuotaSpec("research", 44, 8, None, ("research",)),
)


class _Workload:
    """One Kueue Workload: a Job, or a distributed job (a gang of member pods)."""

    __slots__ = ("obj", "local_queue", "cluster_queue", "gpus", "active")

    def __init__(self, obj: Any, local_queue: str, cluster_queue: str, gpus: int) -> None:
        self.obj = obj  # SimJob, or sim.distributed.SimGang
        self.local_queue = local_queue
        self.cluster_queue = cluster_queue
        self.gpus = gpus
        self.active = True

    def live(self) -> bool:
        obj = self.obj
        if isinstance(obj, SimJob):
            return obj.run != -1 and obj.state in LIVE
        return obj.state() in LIVE

    def record(self, admitted: bool) -> WorkloadRecord:
        obj = self.obj
        return WorkloadRecord(
            uid=f"wl-{obj.uid}", namespace=obj.namespace, name=f"job-{obj.name}", job_uid=obj.uid,
            queue=self.local_queue, cluster_queue=self.cluster_queue if admitted else None, priority=0,
            created=obj.created, active=self.active, quota_reserved=admitted, admitted=admitted, finished=False,
            preempted=None, check=None, waiting=None, gpus=self.gpus)


def _gpus(job: SimJob) -> int:
    return max(job.gpus, 1) if job.mig_profile else job.gpus


class SimKueue:
    """The cohort's ClusterQueues, the namespaces' LocalQueues, and the Workloads held or admitted."""

    def __init__(self, specs: Iterable[QuotaSpec] = DEMO_QUEUES) -> None:
        self.specs = {s.name: s for s in specs}
        self.local = {(ns, s.name): s.name for s in self.specs.values() for ns in s.namespaces}
        self.admitted: dict[str, _Workload] = {}
        self.held: dict[str, _Workload] = {}

    # ----------------------------------------------------------------- queues

    def local_queue(self, namespace: str) -> str | None:
        """The LocalQueue the team of ``namespace`` submits to (its jobs carry its name)."""
        return next((lq for ns, lq in self.local if ns == namespace), None)

    def local_queues(self, namespace: str) -> tuple[str, ...]:
        return tuple(sorted(lq for ns, lq in self.local if ns == namespace))

    def _records(self) -> tuple[list[ClusterQueueRecord], list[LocalQueueRecord]]:
        used: dict[str, int] = dict.fromkeys(self.specs, 0)
        admitted: dict[str, int] = dict.fromkeys(self.specs, 0)
        pending: dict[str, int] = dict.fromkeys(self.specs, 0)
        for w in self.admitted.values():
            used[w.cluster_queue] += w.gpus
            admitted[w.cluster_queue] += 1
        for w in self.held.values():
            pending[w.cluster_queue] += 1
        cqs = [ClusterQueueRecord(name=s.name, cohort=COHORT, quota=s.nominal, borrowing_limit=s.borrowing_limit,
                                  lending_limit=s.lending_limit, used=used[s.name], reserved=used[s.name],
                                  borrowed=max(0, used[s.name] - s.nominal), pending=pending[s.name],
                                  admitted=admitted[s.name], flavors=(FLAVOR,), active=True)
               for s in self.specs.values()]
        lqs = [LocalQueueRecord(ns, lq, cq) for (ns, lq), cq in sorted(self.local.items())]
        return cqs, lqs

    # ----------------------------------------------------------------- workloads

    def hold(self, job: SimJob) -> bool:
        """Take a Job that names a LocalQueue and is not admitted: Kueue keeps it suspended until
        its queue admits it. False for a Job Kueue does not hold (no queue, or one it does not know:
        Kueue leaves such a Job suspended too, and this world then runs it as any other)."""
        if job.queue is None or job.uid in self.admitted:
            return False
        cq = self.local.get((job.namespace, job.queue))
        if cq is None:
            return False
        job.state = JobState.SUSPENDED
        job.view = None
        self.held[job.uid] = _Workload(job, job.queue, cq, _gpus(job))
        return True

    def release(self, job: SimJob) -> bool:
        """Let go of a held Job (its owner suspends it); whether Kueue held it."""
        return self.held.pop(job.uid, None) is not None

    def admit_now(self, obj: Any, local_queue: str, gpus: int) -> None:
        """Record work admitted before the world began (what runs, and what Kueue let through)."""
        cq = self.local[(obj.namespace, local_queue)]
        self.admitted[obj.uid] = _Workload(obj, local_queue, cq, gpus)

    def admit(self, now: float) -> tuple[list[SimJob], list[SimJob]]:
        """One pass of Kueue's scheduler: quota of finished work is given back, then held Workloads
        are admitted in order where they fit. Returns the Jobs admitted (to be made pending) and
        those whose owners gave up waiting (to be dropped)."""
        for uid in [u for u, w in self.admitted.items() if not w.live()]:
            del self.admitted[uid]
        dropped = [w.obj for w in self.held.values() if w.obj.run == -1 or w.obj.state is not JobState.SUSPENDED
                   or w.obj.give_up_at <= now]
        for job in dropped:
            del self.held[job.uid]
        gave_up = [j for j in dropped if j.run != -1 and j.state is JobState.SUSPENDED]
        if not self.held:
            return [], gave_up
        cqs, lqs = self._records()
        queues = {q.name: q for q in kueue_queues(cqs, lqs)}
        used = {q.name: q.gpu_used or 0 for q in queues.values()}
        room = {name: self.specs[name].nominal + (borrowable(q, list(queues.values())) or 0)
                for name, q in queues.items()}
        cohort_room = sum(s.nominal for s in self.specs.values()) - sum(used.values())
        admitted = []
        for w in sorted(self.held.values(), key=lambda w: (w.obj.created, w.obj.name)):
            cq = w.cluster_queue
            if not w.active or used[cq] + w.gpus > room[cq] or w.gpus > cohort_room:
                continue
            used[cq] += w.gpus
            cohort_room -= w.gpus
            del self.held[w.obj.uid]
            self.admitted[w.obj.uid] = w
            admitted.append(w.obj)
        return admitted, gave_up

    def _pending(self, namespace: str, name: str, where: str) -> _Workload:
        """The held Workload of Job ``namespace/name``, refused in the cluster's words otherwise."""
        for w in self.held.values():
            if w.obj.namespace == namespace and w.obj.name == name:
                return w
        admitted = next((w for w in self.admitted.values() if w.obj.namespace == namespace and w.obj.name == name), None)
        if admitted is not None:
            raise ValueError(f"{where}: already admitted to {admitted.cluster_queue}; only a pending job can be changed")
        raise ValueError(f"{where}: Kueue keeps no Workload for it")

    def move(self, namespace: str, name: str, queue: str) -> None:
        """Move pending Job ``namespace/name`` to LocalQueue ``queue`` of its namespace (its queue
        label changed: Kueue moves its Workload to that queue's ClusterQueue)."""
        where = f"moving Job {namespace}/{name} to LocalQueue {queue}"
        cq = self.local.get((namespace, queue))
        if cq is None:
            raise ValueError(f'{where}: localqueues.kueue.x-k8s.io "{queue}" not found')
        w = self._pending(namespace, name, where)
        w.local_queue, w.cluster_queue = queue, cq
        w.obj.queue = queue
        w.obj.view = None

    def set_active(self, namespace: str, name: str, active: bool) -> None:
        """Deactivate (Kueue keeps it out of its queue) or reactivate the Workload of pending Job
        ``namespace/name`` (its ``spec.active``)."""
        w = self._pending(namespace, name, f"{'reactivating' if active else 'deactivating'} the Workload of Job "
                                           f"{namespace}/{name}")
        w.active = bool(active)
        w.obj.view = None

    # ----------------------------------------------------------------- reading

    def compose(self, jobs: tuple[Job, ...], now: float, gangs: Iterable[Any], scheduler: Scheduler) -> JobsReading:
        """``jobs`` with their queues and what each waits for, and the ClusterQueues."""
        cqs, lqs = self._records()
        work = [w.record(True) for w in self.admitted.values()] + [w.record(False) for w in self.held.values()]
        reading = annotate(JobsReading(jobs, (), (), now), cqs, lqs, work, (), (), ())
        gangs_waiting = {g.uid: g for g in gangs if g.state() is JobState.PENDING}
        out = []
        for job in reading.jobs:
            if job.state is JobState.PENDING and job.waiting_for is None:
                if job.uid in gangs_waiting:
                    job = gang_wait(job, gangs_waiting[job.uid], scheduler)
                elif job.pending_reason:  # the scheduler's words: quota is free, or none applies
                    job = replace(job, waiting_for=WaitingFor.CAPACITY)
            out.append(job)
        return replace(reading, jobs=tuple(out))


def gang_wait(job: Job, gang: Any, scheduler: Scheduler) -> Job:
    """A distributed job whose pods start together: ``1 of 3 pods fit; minMember 3``, then the
    scheduler's words for the pods that do not."""
    pods = sum(role.replicas for role in job.roles)
    waiting = [m for m in gang.members() if m.state is JobState.PENDING]
    fit = pods - len(waiting) + scheduler.fit_together(waiting)
    words = f"{fit} of {pods} pods fit; minMember {pods}"
    return replace(job, waiting_for=WaitingFor.GANG,
                   pending_reason=f"{words}; {job.pending_reason}" if job.pending_reason else words)
