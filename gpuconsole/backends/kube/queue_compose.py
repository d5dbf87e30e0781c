"""Why a job waits, joined from Kueue's and Volcano's records: the queues, and each job's queue and words.

Pure functions, no I/O. :func:`annotate` takes a reading the job mapping composed and the queue
records of the same moment, and gives each job its queue, its ClusterQueue and what it waits for:

* ``quota``: Kueue has not reserved quota for its Workload ("waiting in queue team-a, position
  3: 16 of 16 GPUs used, may borrow 0 of 8 from cohort research"), or its Volcano queue's
  capability is used up. A job Kueue holds is ``queued``, never ``suspended``.
* ``admission-check``: quota is reserved, an admission check has not passed.
* ``preempted``: evicted to make room for other work; it waits to be admitted again.
* ``gang``: its Volcano PodGroup does not fit at once ("3 of 4 pods fit; minMember 4").
* ``capacity``: set by the job mapping already (a pod the scheduler cannot place).

The position in a queue is the Workload's place among the ClusterQueue's pending Workloads: as
Kueue's visibility API gave it where it was read, else in the order Kueue takes them as far as the
records say (higher priority first, then older first).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from msgspec.structs import replace

from gpuconsole.backends.kube.queue_records import (
    ClusterQueueRecord,
    LocalQueueRecord,
    PodGroupRecord,
    VolcanoJobRecord,
    VolcanoQueueRecord,
    WorkloadRecord,
)
from gpuconsole.model import Job, JobsReading, JobState, Queue, QueueKind, WaitingFor

_SCHEDULABLE = re.compile(r"(\d+) Schedulable")
_UNSCHEDULABLE = re.compile(r"^(\d+)/(\d+) tasks in gang unschedulable")


def kueue_queues(cluster_queues: Iterable[ClusterQueueRecord], local_queues: Iterable[LocalQueueRecord]) -> list[Queue]:
    by_cluster: dict[str, list[str]] = {}
    for lq in local_queues:
        by_cluster.setdefault(lq.cluster_queue, []).append(f"{lq.namespace}/{lq.name}")
    return [Queue(name=cq.name, kind=QueueKind.KUEUE, cohort=cq.cohort, gpu_quota=cq.quota, gpu_used=cq.used,
                  gpu_borrowed=cq.borrowed, gpu_borrowing_limit=cq.borrowing_limit,
                  gpu_lending_limit=cq.lending_limit, pending_workloads=cq.pending,
                  admitted_workloads=cq.admitted, flavors=cq.flavors, active=cq.active,
                  local_queues=tuple(sorted(by_cluster.get(cq.name, ()))))
            for cq in cluster_queues]


def volcano_queues(queues: Iterable[VolcanoQueueRecord]) -> list[Queue]:
    return [Queue(name=q.name, kind=QueueKind.VOLCANO, gpu_quota=q.capability, gpu_used=q.allocated,
                  pending_workloads=q.pending, admitted_workloads=q.running, active=q.open) for q in queues]


def borrowable(queue: Queue, queues: Sequence[Queue]) -> int | None:
    """GPUs ``queue`` may borrow now: its borrowing limit left, bounded by what the rest of its
    cohort leaves unused (each up to its lending limit); None when a figure is not known."""
    if queue.cohort is None:
        return 0
    unused = 0
    for other in queues:
        if other.kind is not queue.kind or other.cohort != queue.cohort or other.name == queue.name:
            continue
        lendable = other.gpu_lendable
        if lendable is None:
            return None
        unused += lendable
    if queue.gpu_borrowing_limit is None:
        return unused
    return max(0, min(unused, queue.gpu_borrowing_limit - (queue.gpu_borrowed or 0)))


def quota_words(queue_name: str, position: int | None, cq: Queue | None, queues: Sequence[Queue],
                fallback: str | None) -> str:
    """``waiting in queue team-a, position 3: 16 of 16 GPUs used, may borrow 0 of 8 from cohort research``."""
    head = f"waiting in queue {queue_name}" + (f", position {position}" if position else "")
    if cq is None or cq.gpu_quota is None or cq.gpu_used is None:
        return f"{head}: {fallback}" if fallback else head
    words = f"{head}: {cq.gpu_used} of {cq.gpu_quota} GPUs used"
    if cq.cohort is not None:
        may = borrowable(cq, queues)
        limit = f" of {cq.gpu_borrowing_limit}" if cq.gpu_borrowing_limit is not None else ""
        words += f", may borrow {'?' if may is None else may}{limit} from cohort {cq.cohort}"
    return words


def gang_words(group: PodGroupRecord) -> str:
    """``3 of 4 pods fit; minMember 4``, from the scheduler's Unschedulable condition."""
    text = group.unschedulable or ""
    schedulable = _SCHEDULABLE.search(text)
    if schedulable is not None:
        fit = int(schedulable.group(1)) + group.running
    elif (counts := _UNSCHEDULABLE.search(text)) is not None:
        fit = max(0, group.min_member - int(counts.group(1)))
    else:
        return f"gang of {group.min_member} does not fit; minMember {group.min_member}: {text}".rstrip(": ")
    return f"{fit} of {group.min_member} pods fit; minMember {group.min_member}"


def _positions(workloads: Iterable[WorkloadRecord], cluster_of: dict[tuple[str, str], str],
               visible: Mapping[str, Mapping[tuple[str, str], int]]) -> dict[str, int]:
    """Each pending Workload's place in its ClusterQueue (1 first): Kueue's own where its
    visibility API answered for that ClusterQueue (a Workload it did not list has none)."""
    lines: dict[str, list[WorkloadRecord]] = {}
    for w in workloads:
        if w.active and not w.quota_reserved and not w.finished and w.queue:
            cq = cluster_of.get((w.namespace, w.queue))
            if cq is not None:
                lines.setdefault(cq, []).append(w)
    out: dict[str, int] = {}
    for cq, line in lines.items():
        if cq in visible:
            out.update((w.uid, visible[cq][(w.namespace, w.name)]) for w in line if (w.namespace, w.name) in visible[cq])
            continue
        for place, w in enumerate(sorted(line, key=lambda w: (-w.priority, w.created, w.name)), start=1):
            out[w.uid] = place
    return out


def _kueue_job(job: Job, w: WorkloadRecord, queue: str | None, cq_name: str | None, cq: Queue | None,
               queues: Sequence[Queue], position: int | None) -> Job:
    job = replace(job, queue=queue, cluster_queue=cq_name)
    if w.admitted or w.finished or job.state not in (JobState.PENDING, JobState.SUSPENDED):
        return job
    name = queue or "?"
    if not w.active:
        return replace(job, state=JobState.QUEUED, waiting_for=None,
                       pending_reason=f"deactivated in queue {name} (its Workload's spec.active is false)")
    if w.preempted is not None:
        return replace(job, state=JobState.QUEUED, waiting_for=WaitingFor.PREEMPTED,
                       pending_reason=f"preempted, waiting in queue {name} again: {w.preempted}")
    if w.quota_reserved and w.check is not None:
        return replace(job, state=JobState.QUEUED, waiting_for=WaitingFor.ADMISSION_CHECK,
                       pending_reason=f"quota reserved in {cq_name or name}, admission check {w.check}")
    return replace(job, state=JobState.QUEUED, waiting_for=WaitingFor.QUOTA, queue_position=position,
                   pending_reason=quota_words(name, position, cq, queues, w.waiting))


def _volcano_job(job: Job, group: PodGroupRecord | None, queue: str, vq: Queue | None) -> Job:
    job = replace(job, queue=queue)
    if group is None or job.state is not JobState.PENDING:
        return job
    if (group.phase == "Pending" and vq is not None and vq.gpu_quota is not None and vq.gpu_used is not None
            and vq.gpu_used + group.gpus > vq.gpu_quota):
        return replace(job, waiting_for=WaitingFor.QUOTA,
                       pending_reason=f"waiting in queue {queue}: {vq.gpu_used} of {vq.gpu_quota} GPUs used")
    if group.unschedulable:
        return replace(job, waiting_for=WaitingFor.GANG, pending_reason=gang_words(group))
    return job


def annotate(reading: JobsReading, cluster_queues: Iterable[ClusterQueueRecord],
             local_queues: Iterable[LocalQueueRecord], workloads: Iterable[WorkloadRecord],
             vqueues: Iterable[VolcanoQueueRecord], groups: Iterable[PodGroupRecord],
             vcjobs: Iterable[VolcanoJobRecord],
             visible: Mapping[str, Mapping[tuple[str, str], int]] | None = None) -> JobsReading:
    """``reading`` with its queues, and each job's queue and what it waits for.

    Args:
        visible: the positions Kueue's visibility API gave, by ClusterQueue (see
            :mod:`~gpuconsole.backends.kube.queue_visibility`).
    """
    lqs = list(local_queues)
    queues = sorted([*kueue_queues(cluster_queues, lqs), *volcano_queues(vqueues)],
                    key=lambda q: (q.kind.value, q.name))
    work, pgs, vc = list(workloads), list(groups), list(vcjobs)
    if not (queues or lqs or work or pgs or vc):
        return reading
    cluster_of = {(lq.namespace, lq.name): lq.cluster_queue for lq in lqs}
    kueue = {q.name: q for q in queues if q.kind is QueueKind.KUEUE}
    volcano = {q.name: q for q in queues if q.kind is QueueKind.VOLCANO}
    by_job = {w.job_uid: w for w in sorted(work, key=lambda w: w.created) if w.job_uid}
    group_of = {g.owner_uid: g for g in pgs if g.owner_uid}
    vc_queue = {r.job.uid: r.queue for r in vc}
    positions = _positions(work, cluster_of, visible or {})
    jobs = []
    for job in reading.jobs:
        if job.uid in vc_queue:
            job = replace(job, kind="VolcanoJob")
        w = by_job.get(job.uid)
        group = group_of.get(job.uid)
        if w is not None:
            queue = w.queue or job.queue
            cq_name = w.cluster_queue or (cluster_of.get((job.namespace, queue)) if queue else None)
            job = _kueue_job(job, w, queue, cq_name, kueue.get(cq_name or ""), queues, positions.get(w.uid))
        elif group is not None or job.uid in vc_queue:
            queue = vc_queue.get(job.uid) or (group.queue if group is not None else "default")
            job = _volcano_job(job, group, queue, volcano.get(queue))
        jobs.append(job)
    return replace(reading, jobs=tuple(jobs), queues=tuple(queues))
