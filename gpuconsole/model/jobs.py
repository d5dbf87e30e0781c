"""Kubernetes as the queue view needs it: nodes and their GPU capacity, Jobs and CronJobs.
"""

from __future__ import annotations

import enum

from gpuconsole.model.per_reading import PerReading
from gpuconsole.model.queues import WaitingFor
from gpuconsole.model.value import Value


class JobState(str, enum.Enum):
    """Lifecycle of a Kubernetes-style job, in the order the queue view groups them."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SUSPENDED = "suspended"
    QUEUED = "queued"  # held by a queueing layer (Kueue) until its queue admits it


class Node(Value):
    """A Kubernetes node and its GPU capacity."""

    name: str
    gpu_product: str
    gpu_capacity: int
    gpu_allocatable: int
    gpu_allocated: int
    instance_id: str | None = None
    mig_strategy: str | None = None  # "single" / "mixed"
    mig_capacity: tuple[tuple[str, int], ...] = ()  # (profile, count)
    ready: bool = True
    mig_allocated: tuple[tuple[str, int], ...] = ()  # (profile, count) held by running pods


class JobRole(Value):
    """One role of a distributed job (an MPIJob's Launcher or Worker, a PyTorchJob's Master, a
    JobSet's replicated job): its desired replicas (pods), how many run, and GPUs per replica."""

    name: str
    replicas: int
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    gpus_per_replica: int = 0
    mig_profile: str | None = None
    pending_reason: str | None = None  # why a replica waits, in the scheduler's words
    pod: str | None = None  # a pod of the role, what its logs are read from

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_replica


JOB_KINDS = ("Job", "MPIJob", "PyTorchJob", "TrainJob", "JobSet")


class Job(Value):
    """A Kubernetes Job, or a distributed training job (``kind``: MPIJob, PyTorchJob, TrainJob,
    JobSet) with its ``roles``, as the queue view needs it."""

    uid: str
    name: str
    namespace: str
    state: JobState
    created: float
    gpus: int = 0
    mig_profile: str | None = None
    node: str | None = None
    started: float | None = None
    finished: float | None = None
    pending_reason: str | None = None
    cronjob: str | None = None
    image: str = ""
    owner: str | None = None
    pod_uid: str | None = None
    pod: str | None = None  # the pod's name (of index 0 for an Indexed Job), what logs are read from
    queue: str | None = None  # its Kueue LocalQueue, or its Volcano Queue
    cluster_queue: str | None = None  # Kueue: the ClusterQueue its LocalQueue points at
    waiting_for: WaitingFor | None = None  # why it has not started; pending_reason says it in one line
    kind: str = "Job"  # "Job" (batch/v1), "VolcanoJob" (batch.volcano.sh) or one of JOB_KINDS
    queue_position: int | None = None  # Kueue: its place among its ClusterQueue's pending Workloads (1 first)
    roles: tuple[JobRole, ...] = ()  # a distributed job's roles; gpus is the sum of their GPUs
    nodes: tuple[str, ...] = ()  # every node its running pods are on (a distributed job: several)
    pod_uids: tuple[str, ...] = ()  # every pod it owns (a distributed job's launcher and workers)
    phase: str | None = None  # the operator's own word where it says more than state ("restarting")
    restarts: int | None = None

    @property
    def waiting(self) -> bool:
        """Whether it waits to start (pending, or queued by a queueing layer)."""
        return self.state in (JobState.PENDING, JobState.QUEUED)

    def owns_pod(self, uid: str | None) -> bool:
        """Whether the pod with ``uid`` is this job's (its shown pod or any other)."""
        return bool(uid) and (uid == self.pod_uid or uid in self.pod_uids)

    @property
    def gpu_request(self) -> str:
        """What the job asked for, in the words of its resource request."""
        if self.mig_profile:
            return f"{max(self.gpus, 1)}×{self.mig_profile}"
        return str(self.gpus) if self.gpus else "-"


FINISHED_STATES = (JobState.SUCCEEDED, JobState.FAILED)  # a job in either has run its course


def _live(jobs: tuple[Job, ...]) -> tuple[Job, ...]:
    return tuple([job for job in jobs if job.state not in FINISHED_STATES])  # identity first: 3 ms for 100,000


unfinished: PerReading[tuple[Job, ...]] = PerReading(_live, keep=3)
"""``unfinished(jobs)``: the jobs of a reading that have not finished (pending, queued, running,
suspended), in their order, made once per reading (the one on screen and those delivered since).
A cluster with a long finished-job TTL lists 100,000 jobs of which a few thousand are live:
whatever asks about live jobs (the autopilot, alerts, budgets, the panes' counts, a GPU's
holder) walks these, and only one pass a reading walks them all."""


class CronJob(Value):
    """A Kubernetes CronJob (periodic training or evaluation)."""

    uid: str
    name: str
    namespace: str
    schedule: str
    created: float
    suspended: bool = False
    last_schedule: float | None = None
    next_schedule: float | None = None
    gpus: int = 0
    mig_profile: str | None = None
    active: int = 0

