"""A Job's state, node and pending reason, as its pods and their warning events say."""

from __future__ import annotations

from collections.abc import Iterable

from gpuconsole.backends.kube.records import JobRecord, PodRecord, WarningRecord
from gpuconsole.model import Job, JobState, WaitingFor


class WarningIndex:
    """The latest warning per object, found by uid or by namespace and name."""

    def __init__(self, records: Iterable[WarningRecord]) -> None:
        self._latest: dict[tuple[str, str, str], WarningRecord] = {}
        for record in records:
            keys = [(record.kind, record.namespace, record.name)]
            if record.uid:
                keys.append((record.kind, "uid", record.uid))
            for key in keys:
                seen = self._latest.get(key)
                if seen is None or record.at >= seen.at:
                    self._latest[key] = record

    def latest(self, kind: str, uid: str, namespace: str, name: str) -> WarningRecord | None:
        by_uid = self._latest.get((kind, "uid", uid))
        by_name = self._latest.get((kind, namespace, name))
        if by_name is not None and by_name.uid not in (None, uid):
            by_name = None  # an event of an earlier object of the same name
        found = [w for w in (by_uid, by_name) if w is not None]
        return max(found, key=lambda w: w.at) if found else None


def pod_reason(pod: PodRecord, warnings: WarningIndex) -> str | None:
    """Why a pod waits, in the scheduler's words (its PodScheduled condition, else its latest
    FailedScheduling event), or the kubelet's (a container waiting to start); None: it does not."""
    if pod.node is None:
        if pod.unschedulable:
            return pod.unschedulable
        warning = warnings.latest("Pod", pod.uid, pod.namespace, pod.name)
        if warning is not None:
            return warning.message
    return pod.waiting


def pending_reason(job: JobRecord, pods: list[PodRecord], warnings: WarningIndex) -> str | None:
    return waiting(job, pods, warnings)[0]


def waiting(job: JobRecord, pods: list[PodRecord], warnings: WarningIndex) -> tuple[str | None, WaitingFor | None]:
    """Why a pending Job waits, and ``capacity`` when those are the scheduler's words (a pod no node takes)."""
    for pod in sorted((p for p in pods if not p.terminated), key=lambda p: p.created, reverse=True):
        reason = pod_reason(pod, warnings)
        if reason:
            return reason, WaitingFor.CAPACITY if pod.node is None else None
    warning = warnings.latest("Job", job.uid, job.namespace, job.name)
    return (warning.message if warning is not None else None), None


def job_model(job: JobRecord, pods: list[PodRecord], warnings: WarningIndex) -> Job:
    """A Job with its state, node and pending reason from its pods and their events."""
    running = [p for p in pods if p.running]
    if job.final is not None:
        state = job.final
    elif running or (not pods and job.ready > 0):
        state = JobState.RUNNING
    else:
        state = JobState.PENDING
    # The pod shown (its node, its logs): a running one before others, index 0 of an Indexed
    # Job before the other indexes, the newest before older tries.
    candidates = running or pods
    pod = min(candidates, key=lambda p: (p.index or 0, -p.created)) if candidates else None
    reason, waits = waiting(job, pods, warnings) if state is JobState.PENDING else (None, None)
    return Job(
        uid=job.uid,
        name=job.name,
        namespace=job.namespace,
        state=state,
        created=job.created,
        gpus=job.gpus,
        mig_profile=job.mig_profile,
        node=pod.node if pod is not None else None,
        started=job.started if state is not JobState.PENDING else None,
        finished=job.finished,
        pending_reason=reason,
        cronjob=job.cronjob,
        image=job.image,
        owner=job.owner,
        pod_uid=pod.uid if pod is not None else None,
        pod=pod.name if pod is not None else None,
        waiting_for=waits,
    )
