"""Distributed training jobs joined with what they own: child Jobs, JobSets and pods.

The controllers build a tree: an MPIJob owns its worker pods and the batch Job that runs its
launcher; a PyTorchJob owns its pods; a JobSet owns a batch Job per replica; a TrainJob owns a
JobSet of its own name. :func:`join` follows the controller owner references to the job at the
top, so its pods (their nodes, GPUs, waits and restarts) are that job's, and the child Jobs and
JobSets are not listed as jobs of their own. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuconsole.backends.kube.pending import WarningIndex, pod_reason
from gpuconsole.backends.kube.records import JobRecord, PodRecord
from gpuconsole.backends.kube.training import LEAD_ROLES, SAYS_RUNNING, RoleSpec, TrainingRecord
from gpuconsole.model import Job, JobRole, JobState


def join(records: Iterable[TrainingRecord], jobs: Iterable[JobRecord], pods: Iterable[PodRecord],
         warnings: WarningIndex) -> tuple[list[Job], set[str]]:
    """The distributed jobs at the top of their trees, and the uids of the batch Jobs they own
    (not to be listed again)."""
    by_uid = {r.uid: r for r in records}

    def top(uid: str) -> str:
        controller = by_uid[uid].controller
        return controller if controller in by_uid else uid

    nested = {r.controller: r for r in by_uid.values() if r.controller in by_uid}  # a TrainJob's JobSet
    owned_jobs = {j.uid: top(j.controller) for j in jobs if j.controller in by_uid}
    owned_pods: dict[str, list[PodRecord]] = {}
    for pod in pods:
        owner = top(pod.controller) if pod.controller in by_uid else owned_jobs.get(pod.job_uid or "")
        if owner is not None:
            owned_pods.setdefault(owner, []).append(pod)
    models = []
    for record in by_uid.values():
        if record.controller in by_uid:
            continue
        roles = nested[record.uid].roles if record.uid in nested else record.roles
        models.append(training_model(record, roles, owned_pods.get(record.uid, []), warnings))
    return models, set(owned_jobs)


def _role(spec: RoleSpec, pods: list[PodRecord], warnings: WarningIndex) -> JobRole:
    mine = [p for p in pods if p.role == spec.name.lower()]
    live = sorted((p for p in mine if not p.terminated), key=lambda p: (p.index or 0, p.name))
    running = sum(1 for p in mine if p.running)
    reason = next((r for p in live if (r := pod_reason(p, warnings))), None)
    shown = next((p for p in live if p.running), live[0] if live else None)
    return JobRole(
        name=spec.name,
        replicas=spec.replicas,
        active=spec.active if spec.active is not None else running,
        succeeded=spec.succeeded,
        failed=spec.failed,
        gpus_per_replica=spec.gpus,
        mig_profile=spec.mig_profile,
        pending_reason=reason,
        pod=shown.name if shown is not None else None,
    )


def waiting_role(roles: tuple[JobRole, ...]) -> JobRole | None:
    """The role whose wait matters most: the most GPUs still waiting (a PyTorchJob's workers
    before its master)."""
    waiting = [r for r in roles if r.pending_reason]
    return max(waiting, key=lambda r: (r.replicas - r.active) * r.gpus_per_replica, default=None)


def training_model(record: TrainingRecord, specs: tuple[RoleSpec, ...], pods: list[PodRecord],
                   warnings: WarningIndex) -> Job:
    """A distributed job with its roles, state, nodes, pods and why it waits."""
    roles = tuple(_role(spec, pods, warnings) for spec in specs)
    running = [p for p in pods if p.running]
    state, phase = record.state, record.phase
    if state is None:  # the Kubeflow kinds say Running; a JobSet or TrainJob runs while its Jobs do
        active = record.kind not in SAYS_RUNNING and (running or any(r.active for r in roles))
        state, phase = (JobState.RUNNING, None) if active else (JobState.PENDING, phase)
    # Shown by its launcher (or master), else a running pod, else any: its logs and node.
    lead = next((p for p in sorted(pods, key=lambda p: (p.terminated, -p.created)) if p.role in LEAD_ROLES), None)
    shown = lead or min(running or pods, key=lambda p: (p.index or 0, -p.created), default=None)
    gpu_pod = next((p for p in running if p.gpus or p.mig), None)
    waiting = waiting_role(roles)
    first_run = min((p.created for p in running), default=None)
    return Job(
        uid=record.uid,
        name=record.name,
        namespace=record.namespace,
        state=state,
        created=record.created,
        gpus=sum(r.replicas * r.gpus_per_replica for r in roles),
        mig_profile=next((r.mig_profile for r in roles if r.mig_profile), None),
        node=(gpu_pod or shown).node if (gpu_pod or shown) is not None else None,
        started=(record.started or first_run) if state is not JobState.PENDING else None,
        finished=record.finished,
        pending_reason=(f"{waiting.name}: {waiting.pending_reason}" if waiting is not None
                        and state is JobState.PENDING else None),
        image=record.image,
        owner=record.owner,
        pod_uid=shown.uid if shown is not None else None,
        pod=shown.name if shown is not None else None,
        kind=record.kind,
        roles=roles,
        nodes=tuple(sorted({p.node for p in running if p.node})),
        pod_uids=tuple(p.uid for p in sorted(pods, key=lambda p: p.name)),
        phase=phase,
        restarts=record.restarts if record.restarts is not None else (sum(p.restarts for p in pods) if pods else None),
    )
