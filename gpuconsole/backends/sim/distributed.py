"""Distributed training jobs in the simulated world: an MPIJob and a PyTorchJob made of member pods.

A :class:`SimGang` is one MPIJob or PyTorchJob. Each of its GPU replicas is a member
:class:`~gpuconsole.backends.sim.state.SimJob` that the scheduler places like any pod (so its
GPUs, processes and waits are real in the world), hidden from the job list; the gang is listed
instead, with its roles, and its members' pods are its own (``pod_uids``). An MPIJob's launcher
holds no GPU: it runs beside the first worker while the workers run.
"""

from __future__ import annotations

from typing import Any

from gpuconsole.backends.sim.state import SimJob, pod_suffix
from gpuconsole.model import Job, JobRole, JobState

MEMBER_S = 30 * 86400.0  # a member's run: longer than any demo
LEAD_ROLES = ("Launcher", "Master")


class SimGang:
    """An MPIJob or a PyTorchJob: ``roles`` in order, each a name and its member jobs."""

    def __init__(self, kind: str, uid: str, name: str, namespace: str, created: float, image: str, owner: str,
                 roles: list[tuple[str, int, list[SimJob]]]) -> None:
        self.kind, self.uid, self.name, self.namespace = kind, uid, name, namespace
        self.created, self.image, self.owner = created, image, owner
        self.roles = roles  # (role, GPUs per replica, members); a launcher has no members
        self.manifest: dict[str, Any] | None = None  # as submitted, where it was

    def members(self) -> list[SimJob]:
        return [m for _role, _gpus, members in self.roles for m in members]

    def state(self) -> JobState:
        states = [m.state for m in self.members()]
        if JobState.FAILED in states:
            return JobState.FAILED
        if all(s is JobState.SUCCEEDED for s in states):
            return JobState.SUCCEEDED
        if all(s is JobState.RUNNING for s in states):
            return JobState.RUNNING
        if states and all(s is JobState.SUSPENDED for s in states):
            return JobState.SUSPENDED
        return JobState.PENDING

    def to_model(self) -> Job:
        state = self.state()
        running = [m for m in self.members() if m.state is JobState.RUNNING]
        roles = []
        for role, gpus, members in self.roles:
            waiting = next((m.pending_reason for m in members if m.state is JobState.PENDING and m.pending_reason), None)
            if members:
                active = sum(1 for m in members if m.state is JobState.RUNNING)
                pod = next((m.pod_names()[0] for m in members if m.state is JobState.RUNNING), None)
            else:  # the launcher: up while the workers run
                active = 1 if state is JobState.RUNNING else 0
                pod = self.launcher_pod() if active else None
            roles.append(JobRole(role, max(len(members), 1), active=active, gpus_per_replica=gpus,
                                 pending_reason=waiting, pod=pod))
        lead = next((r for r in roles if r.name in LEAD_ROLES and r.pod), None)
        shown = running[0] if running else None
        waits = max((r for r in roles if r.pending_reason), default=None,
                    key=lambda r: (r.replicas - r.active) * r.gpus_per_replica)
        nodes = sorted({m.node.node_name for m in running if m.node is not None})
        return Job(
            uid=self.uid, name=self.name, namespace=self.namespace, state=state, created=self.created,
            gpus=sum(r.replicas * r.gpus_per_replica for r in roles),
            node=shown.node.node_name if shown is not None and shown.node is not None else None,
            started=min((m.started for m in running if m.started is not None), default=None)
            if state is not JobState.PENDING else None,
            pending_reason=f"{waits.name}: {waits.pending_reason}" if waits is not None and state is JobState.PENDING else None,
            image=self.image, owner=self.owner,
            pod_uid=(shown or self.members()[0]).pod_uid,
            pod=lead.pod if lead is not None else (shown.pod_names()[0] if shown is not None else None),
            kind=self.kind, roles=tuple(roles), nodes=tuple(nodes),
            pod_uids=tuple(m.pod_uid for m in self.members()),
            phase="created" if state is JobState.PENDING else None, restarts=0,
        )

    def launcher_pod(self) -> str:
        return f"{self.name}-launcher-{pod_suffix(self.uid, 0)}"


def member(uid: str, pod_uid: str, name: str, namespace: str, created: float, gpus: int, product: str | None,
           image: str, owner: str) -> SimJob:
    """One GPU replica of a gang: a pod the owner never gives up on, running longer than any demo."""
    job = SimJob(uid, name, namespace, created, gpus, None, product, MEMBER_S, image, owner, pod_uid)
    job.give_up_at = created + MEMBER_S
    return job


def new_gang(world: Any, ids: Any, kind: str, name: str, namespace: str, created: float, owner: str,
             roles: list[tuple[str, int, int, str | None, str]]) -> SimGang:
    """A distributed job of ``roles`` (name, replicas, GPUs each, GPU product, image) added to
    ``world``: its GPU replicas become member jobs (pending until placed); ``ids`` draws the uids."""
    gang = SimGang(kind, ids.uuid4(), name, namespace, created, roles[0][4], owner, [])
    for role, replicas, gpus, product, image in roles:
        members = [member(ids.uuid4(), ids.uuid4(), f"{name}-{role.lower()}-{i}", namespace, created,
                          gpus, product, image, owner) for i in range(replicas if gpus else 0)]
        for job in members:
            job.gang = gang
            world._add_job(job)
        gang.roles.append((role, gpus, members))
    world._gangs.append(gang)
    return gang
