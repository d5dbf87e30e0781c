"""Kubernetes as the queue view needs it: nodes and their GPU capacity, Jobs and CronJobs.
"""

from __future__ import annotations

import enum

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


class Job(Value):
    """A Kubernetes Job as the queue view needs it."""

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
    kind: str = "Job"  # "Job" (batch/v1) or "VolcanoJob" (batch.volcano.sh)
    queue_position: int | None = None  # Kueue: its place among its ClusterQueue's pending Workloads (1 first)

    @property
    def waiting(self) -> bool:
        """Whether it waits to start (pending, or queued by a queueing layer)."""
        return self.state in (JobState.PENDING, JobState.QUEUED)

    @property
    def gpu_request(self) -> str:
        """What the job asked for, in the words of its resource request."""
        if self.mig_profile:
            return f"{max(self.gpus, 1)}×{self.mig_profile}"
        return str(self.gpus) if self.gpus else "-"


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

