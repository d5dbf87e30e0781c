"""Queues in front of the scheduler (Kueue's ClusterQueues, Volcano's Queues) and why a job waits.
"""

from __future__ import annotations

import enum

from gpuconsole.model.value import Value


class QueueKind(str, enum.Enum):
    """The queueing layer a queue belongs to."""

    KUEUE = "kueue"
    VOLCANO = "volcano"


class WaitingFor(str, enum.Enum):
    """What a job that has not started waits for, in the words the console shows."""

    QUOTA = "quota"  # its queue's quota (more nodes would not help)
    GANG = "gang"  # its whole gang does not fit at once
    CAPACITY = "capacity"  # quota is free (or none applies): no node fits, in the scheduler's words
    ADMISSION_CHECK = "admission-check"  # quota reserved, an admission check has not passed yet
    PREEMPTED = "preempted"  # evicted to make room, waiting to be admitted again


class Queue(Value):
    """A cluster-wide queue: a Kueue ClusterQueue or a Volcano Queue.

    GPU figures count ``nvidia.com/gpu`` and the MIG devices together; None: not known (no quota
    for GPUs: ``gpu_quota`` None means the queue does not cap them).
    """

    name: str
    kind: QueueKind
    cohort: str | None = None
    gpu_quota: int | None = None  # Kueue: nominal quota; Volcano: capability
    gpu_used: int | None = None  # admitted (Kueue: flavorsUsage) or allocated (Volcano)
    gpu_borrowed: int | None = None  # used over the nominal quota, from the cohort
    gpu_borrowing_limit: int | None = None  # None: no limit (or no cohort)
    gpu_lending_limit: int | None = None  # None: all unused quota may be lent
    pending_workloads: int | None = None
    admitted_workloads: int | None = None
    flavors: tuple[str, ...] = ()  # ResourceFlavors that give it GPUs
    active: bool = True  # Kueue: the Active condition; Volcano: state Open
    local_queues: tuple[str, ...] = ()  # "namespace/name" of the LocalQueues that point at it
    usd_per_hour: float | None = None  # what its admitted (running) jobs' GPUs cost; None: not known
    gpu_lent: int | None = None  # of its quota, what the rest of its cohort borrows now; None: not known
    budgets: tuple[str, ...] = ()  # the team's budgets: those whose scope is its namespace or names it

    def holds(self, job_queue: str | None, job_cluster_queue: str | None) -> bool:
        """Whether a job of LocalQueue / Volcano queue ``job_queue`` (and ClusterQueue
        ``job_cluster_queue``) is this queue's."""
        if self.kind is QueueKind.KUEUE:
            return job_cluster_queue == self.name
        return job_cluster_queue is None and job_queue == self.name

    @property
    def gpu_lendable(self) -> int | None:
        """GPUs of its own quota it leaves unused and may lend to its cohort (within its lending
        limit); None when a figure is not known."""
        if self.gpu_quota is None or self.gpu_used is None:
            return None
        own_use = self.gpu_used - (self.gpu_borrowed or 0)
        lendable = self.gpu_quota if self.gpu_lending_limit is None else min(self.gpu_quota, self.gpu_lending_limit)
        return max(0, min(lendable, self.gpu_quota - own_use))

    @property
    def gpu_free(self) -> int | None:
        """GPUs of its own quota not in use; None when either is not known."""
        if self.gpu_quota is None or self.gpu_used is None:
            return None
        return max(0, self.gpu_quota - self.gpu_used)
