"""Distributed training jobs reduced to records: MPIJob, PyTorchJob, TrainJob and JobSet.

Each kind says its roles its own way: the Kubeflow operators' ``mpiReplicaSpecs`` /
``pytorchReplicaSpecs`` (Launcher / Worker, Master / Worker) with ``status.replicaStatuses``, a
JobSet's ``replicatedJobs`` with ``status.replicatedJobsStatus``, a TrainJob's ``trainer``
(``numNodes`` × ``resourcesPerNode``) with ``status.jobsStatus``. Their states are conditions:
the Kubeflow operators' Created, Running, Restarting, Succeeded, Failed and Suspended, a JobSet's
Completed, Failed and Suspended, a TrainJob's Complete, Failed and Suspended. Pure functions
over the JSON the API server sends; an object that cannot be read raises alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpuconsole.backends.kube import schema
from gpuconsole.backends.kube.readers import EMPTY, count, items, mapping, metadata, parse_time
from gpuconsole.backends.kube.records import OWNER_LABELS, container_devices, gpu_request, pod_devices, pods_at_once
from gpuconsole.model import FINISHED_STATES, JobState

# (kind, group, version, plural): what discovery must show for a kind to be read.
MPIJOB = ("MPIJob", "kubeflow.org", "v2beta1", "mpijobs")
PYTORCHJOB = ("PyTorchJob", "kubeflow.org", "v1", "pytorchjobs")
TRAINJOB = ("TrainJob", "trainer.kubeflow.org", "v1alpha1", "trainjobs")
JOBSET = ("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets")
SAYS_RUNNING = frozenset({"MPIJob", "PyTorchJob"})  # kinds with a Running condition of their own
# The role whose pod a job is shown by (its node, its logs): the launcher runs mpirun.
LEAD_ROLES = ("launcher", "master")


@dataclass(frozen=True, slots=True)
class RoleSpec:
    """One role as the job object says it: desired replicas (pods), GPUs per replica, status counts."""

    name: str
    replicas: int
    gpus: int  # per replica (a MIG job: devices of mig_profile)
    mig_profile: str | None
    active: int | None  # None: the status does not say
    succeeded: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True)
class TrainingRecord:
    """What a distributed job object itself says; the compose step adds what its pods say."""

    kind: str
    uid: str
    name: str
    namespace: str
    created: float
    state: JobState | None  # what its conditions (or spec.suspend) say; None: nothing final yet
    phase: str | None  # the condition word when it says more ("created", "restarting")
    started: float | None
    finished: float | None
    roles: tuple[RoleSpec, ...]
    image: str
    owner: str | None  # the owner label
    restarts: int | None
    controller: str | None = None  # a JobSet's TrainJob


def _conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The conditions whose status is True, by type."""
    held = {}
    for condition in items(status.get("conditions"), "conditions"):
        condition = mapping(condition, "condition")
        if condition.get("status") == "True" and isinstance(condition.get("type"), str):
            held[condition["type"]] = condition
    return held


def _pod_template(template: Any) -> schema.PodSpec:
    return schema.convert(dict(mapping(mapping(template, "template").get("spec"), "spec")), schema.PodSpec)


def _image(spec: schema.PodSpec) -> str:
    return next((c.image for c in spec.containers or () if isinstance(c.image, str)), "")


def _owner(meta: Mapping[str, Any]) -> str | None:
    labels = mapping(meta.get("labels"), "labels")
    return next((str(labels[k]) for k in OWNER_LABELS if isinstance(labels.get(k), str) and labels[k]), None)


def _controller(meta: Mapping[str, Any]) -> str | None:
    for ref in items(meta.get("ownerReferences"), "ownerReferences"):
        ref = mapping(ref, "ownerReference")
        if ref.get("kind") == "TrainJob" and ref.get("controller") and ref.get("uid"):
            return str(ref["uid"])
    return None


def _state(held: dict[str, Any], suspend: Any, done: str) -> tuple[JobState | None, str | None]:
    """State and phase from the conditions held (``done``: the kind's word for success)."""
    if done in held:
        return JobState.SUCCEEDED, None
    if "Failed" in held:
        return JobState.FAILED, None
    if "Suspended" in held or suspend is True:
        return JobState.SUSPENDED, None
    if "Restarting" in held:
        return JobState.RUNNING, "restarting"
    if "Running" in held:
        return JobState.RUNNING, None
    return None, "created" if "Created" in held else None


def _record(kind: str, obj: Mapping[str, Any], roles: list[RoleSpec], image: str, state: JobState | None,
            phase: str | None, started: Any, finished: Any, restarts: int | None) -> TrainingRecord:
    meta = metadata(obj)
    return TrainingRecord(
        kind=kind, uid=meta["uid"], name=meta["name"], namespace=str(meta.get("namespace") or "default"),
        created=parse_time(meta.get("creationTimestamp")) or 0.0, state=state, phase=phase,
        started=parse_time(started), finished=parse_time(finished) if state in FINISHED_STATES else None,
        roles=tuple(roles), image=image, owner=_owner(meta), restarts=restarts, controller=_controller(meta))


def _kubeflow(kind: str, specs_field: str, obj: Mapping[str, Any]) -> TrainingRecord:
    """An MPIJob or a PyTorchJob: the Kubeflow operators' common replica specs and status."""
    spec = mapping(obj.get("spec"), "spec")
    status = mapping(obj.get("status"), "status")
    counts = mapping(status.get("replicaStatuses"), "replicaStatuses")
    roles, image = [], ""
    for name, replica in mapping(spec.get(specs_field), specs_field).items():
        replica = mapping(replica, name)
        pod_spec = _pod_template(replica.get("template"))
        gpus, mig = gpu_request(pod_devices(pod_spec))
        said = mapping(counts.get(name), name)
        roles.append(RoleSpec(str(name), count(replica.get("replicas", 1)), gpus, mig,
                              count(said["active"]) if "active" in said else None,
                              count(said.get("succeeded") or 0), count(said.get("failed") or 0)))
        image = image or _image(pod_spec)
    roles.sort(key=lambda r: (r.name.lower() not in LEAD_ROLES, r.name))
    state, phase = _state(_conditions(status), mapping(spec.get("runPolicy"), "runPolicy").get("suspend"), "Succeeded")
    return _record(kind, obj, roles, image, state, phase, status.get("startTime"), status.get("completionTime"), None)


def mpijob_record(obj: Mapping[str, Any]) -> TrainingRecord:
    """Read a kubeflow.org/v2beta1 MPIJob.

    Raises:
        KeyError, TypeError, ValueError: an object of a shape that cannot be read.
    """
    return _kubeflow("MPIJob", "mpiReplicaSpecs", obj)


def pytorchjob_record(obj: Mapping[str, Any]) -> TrainingRecord:
    """Read a kubeflow.org/v1 PyTorchJob (raises as :func:`mpijob_record`)."""
    return _kubeflow("PyTorchJob", "pytorchReplicaSpecs", obj)


def _child_counts(status: Mapping[str, Any], field: str) -> dict[str, Mapping[str, Any]]:
    found = {}
    for entry in items(status.get(field), field):
        entry = mapping(entry, field)
        if isinstance(entry.get("name"), str):
            found[entry["name"]] = entry
    return found


def jobset_record(obj: Mapping[str, Any]) -> TrainingRecord:
    """Read a jobset.x-k8s.io/v1alpha2 JobSet: a role per replicated job, its replicas counted
    in pods (Jobs × the pods each runs at once) (raises as :func:`mpijob_record`)."""
    spec = mapping(obj.get("spec"), "spec")
    status = mapping(obj.get("status"), "status")
    counts = _child_counts(status, "replicatedJobsStatus")
    roles, image = [], ""
    for replicated in items(spec.get("replicatedJobs"), "replicatedJobs"):
        replicated = mapping(replicated, "replicatedJob")
        name = str(replicated["name"])
        job_spec = schema.convert(dict(mapping(mapping(replicated.get("template"), "template").get("spec"), "spec")),
                                  schema.JobSpec)
        pod_spec = job_spec.template.spec if job_spec.template and job_spec.template.spec else schema.EMPTY_POD_SPEC
        per_job = pods_at_once(job_spec)
        gpus, mig = gpu_request(pod_devices(pod_spec))
        said = counts.get(name, EMPTY)
        roles.append(RoleSpec(name, count(replicated.get("replicas", 1)) * per_job, gpus, mig,
                              count(said["active"]) * per_job if "active" in said else None,
                              count(said.get("succeeded") or 0) * per_job, count(said.get("failed") or 0)))
        image = image or _image(pod_spec)
    state, phase = _state(_conditions(status), spec.get("suspend"), "Completed")
    restarts = count(status["restarts"]) if status.get("restarts") is not None else None
    return _record("JobSet", obj, roles, image, state, phase, None, None, restarts)


def trainjob_record(obj: Mapping[str, Any]) -> TrainingRecord:
    """Read a trainer.kubeflow.org/v1alpha1 TrainJob: one ``node`` role of ``numNodes`` replicas
    (the runtime's own default, 1, when unset; its JobSet says more) (raises as :func:`mpijob_record`)."""
    spec = mapping(obj.get("spec"), "spec")
    status = mapping(obj.get("status"), "status")
    trainer = mapping(spec.get("trainer"), "trainer")
    resources = schema.convert(dict(mapping(trainer.get("resourcesPerNode"), "resourcesPerNode")), schema.Resources)
    gpus, mig = gpu_request(container_devices(schema.Container(resources=resources)))
    said = _child_counts(status, "jobsStatus").get("node", EMPTY)
    role = RoleSpec("node", count(trainer.get("numNodes", 1)), gpus, mig,
                    count(said["active"]) if "active" in said else None,
                    count(said.get("succeeded") or 0), count(said.get("failed") or 0))
    held = _conditions(status)
    state, phase = _state(held, spec.get("suspend"), "Complete")
    image = trainer.get("image") if isinstance(trainer.get("image"), str) else ""
    started = next((c.get("lastTransitionTime") for t, c in held.items() if t == "Created"), None)
    finished = next((c.get("lastTransitionTime") for t, c in held.items() if t in ("Complete", "Failed")), None)
    return _record("TrainJob", obj, [role], str(image), state, phase, started, finished, None)


READERS: dict[str, Callable[[Mapping[str, Any]], TrainingRecord]] = {
    "MPIJob": mpijob_record, "PyTorchJob": pytorchjob_record, "TrainJob": trainjob_record, "JobSet": jobset_record,
}
