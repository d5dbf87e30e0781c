"""Kubernetes objects reduced to small records: what the console keeps of a Job, Pod, Node or Event.

Pure functions over the JSON the API server sends (or its decoded :mod:`schema` form); an object
that cannot be read raises alone, so a watch cache holds only what the console shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuconsole.backends.kube import schema
from gpuconsole.backends.kube.readers import EMPTY as _EMPTY
from gpuconsole.backends.kube.readers import count as _count
from gpuconsole.backends.kube.readers import items as _items
from gpuconsole.backends.kube.readers import mapping as _mapping
from gpuconsole.backends.kube.readers import metadata as _metadata
from gpuconsole.backends.kube.readers import parse_time
from gpuconsole.model import FINISHED_STATES, CronJob, JobState, Node

# GPUs are the nvidia.com/gpu extended resource, MIG devices the nvidia.com/mig-<profile> ones
# (the device plugin's mixed strategy). A container's limit counts, else its request; a pod asks
# for the sum over its containers (or its largest init container); a Job for one pod's times the
# pods it runs at once. Nodes are kept when they offer GPUs or carry a GPU product label.
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
PRODUCT_LABEL = "nvidia.com/gpu.product"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
OWNER_LABELS = ("owner", "app.kubernetes.io/created-by")
# Job pods carry these labels (the batch.kubernetes.io/ forms since Kubernetes 1.27).
JOB_UID_LABELS = ("batch.kubernetes.io/controller-uid", "controller-uid")
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"  # pods of an Indexed Job
# A distributed job's pods name their role: the Kubeflow operators' replica type, a JobSet's
# replicated job. Its pods (or its child Jobs: an MPIJob's launcher, a JobSet's replicas) name
# the job as their controller owner.
ROLE_LABELS = ("training.kubeflow.org/replica-type", "jobset.sigs.k8s.io/replicatedjob-name")
TRAINING_KINDS = frozenset({"MPIJob", "PyTorchJob", "TrainJob", "JobSet"})

# Warning events worth keeping: why a pod is not scheduled, why a Job cannot create its pods.
SCHEDULING_REASONS = frozenset({"FailedScheduling"})
JOB_REASONS = frozenset({"FailedCreate"})

_TERMINATED_PHASES = frozenset({"Succeeded", "Failed"})


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class JobRecord:
    """What a Job object itself says; :func:`compose` adds what its pods say."""

    uid: str
    name: str
    namespace: str
    created: float
    final: JobState | None  # SUCCEEDED, FAILED or SUSPENDED when the Job says so; else None
    active: int
    ready: int
    started: float | None
    finished: float | None
    gpus: int
    mig_profile: str | None
    cronjob: str | None
    image: str
    owner: str | None
    controller: str | None = None  # the uid of a distributed job that owns it (MPIJob, JobSet)


@dataclass(frozen=True, slots=True)
class PodRecord:
    uid: str
    name: str
    namespace: str
    created: float
    phase: str
    node: str | None
    job_uid: str | None
    job_name: str | None
    gpus: int
    mig: tuple[tuple[str, int], ...]  # (profile, count)
    unschedulable: str | None  # the PodScheduled=False condition's message
    waiting: str | None  # a container waiting to start: "ImagePullBackOff: …"
    index: int | None = None  # completion index of an Indexed Job's pod
    controller: str | None = None  # the uid of a distributed job that owns it directly
    role: str | None = None  # its role in a distributed job ("worker", "launcher", "node")
    restarts: int = 0  # container restarts

    @property
    def terminated(self) -> bool:
        return self.phase in _TERMINATED_PHASES

    @property
    def running(self) -> bool:
        return self.phase == "Running"


@dataclass(frozen=True, slots=True)
class NodeRecord:
    node: Node  # gpu_allocated and mig_allocated are filled in by compose


@dataclass(frozen=True, slots=True)
class CronJobRecord:
    cronjob: CronJob  # next_schedule is filled in by compose
    expression: str  # five cron fields, macros expanded, time zone prefix removed
    zone: str | None


@dataclass(frozen=True, slots=True)
class WarningRecord:
    """A FailedScheduling event of a pod, or a FailedCreate event of a Job."""

    kind: str  # "Pod" or "Job"
    uid: str | None
    namespace: str
    name: str
    reason: str
    message: str
    at: float


# --------------------------------------------------------------------------- small readers


def training_owner(meta: schema.Metadata) -> str | None:
    """The uid of the distributed training job that controls an object, if one does."""
    for ref in meta.ownerReferences or ():
        if ref.kind in TRAINING_KINDS and ref.controller and ref.uid:
            return str(ref.uid)
    return None


def owner_of(kind: str, meta: schema.Metadata) -> schema.OwnerReference | None:
    """The owner reference of ``kind`` (the controller one first)."""
    refs = [r for r in meta.ownerReferences or () if r.kind == kind]
    refs.sort(key=lambda r: not r.controller)
    return refs[0] if refs else None


def describe(obj: Any) -> str:
    """``namespace/name`` of an object, as far as it can be read, for log lines."""
    if isinstance(obj, schema.Job | schema.Pod | schema.CronJob):
        meta: Any = {"name": obj.metadata.name, "namespace": obj.metadata.namespace}
    else:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return "(no metadata)"
    name = meta.get("name", "?")
    return f"{meta['namespace']}/{name}" if meta.get("namespace") else str(name)


# --------------------------------------------------------------------------- GPU requests


def container_devices(container: schema.Container) -> dict[str, int]:
    """GPUs (key ``""``) and MIG devices (key: the profile) one container asks for."""
    resources = container.resources
    if resources is None:
        return {}
    limits = resources.limits or _EMPTY
    requests = resources.requests or _EMPTY
    devices: dict[str, int] = {}
    for name in set(limits) | set(requests):
        if name == GPU_RESOURCE:
            key = ""
        elif name.startswith(MIG_RESOURCE_PREFIX):
            key = name[len(MIG_RESOURCE_PREFIX):]
        else:
            continue
        count = _count(limits[name] if name in limits else requests[name])
        if count:
            devices[key] = count
    return devices


def pod_devices(spec: schema.PodSpec) -> dict[str, int]:
    """What a pod spec asks for: the sum over its containers, or an init container's if more."""
    total: dict[str, int] = {}
    for container in spec.containers or ():
        for key, count in container_devices(container).items():
            total[key] = total.get(key, 0) + count
    for container in spec.initContainers or ():
        for key, count in container_devices(container).items():
            total[key] = max(total.get(key, 0), count)
    return total


def gpu_request(devices: Mapping[str, int], pods: int = 1) -> tuple[int, str | None]:
    """``(gpus, mig_profile)`` for the model: whole GPUs when any, else the main MIG profile."""
    if devices.get(""):
        return devices[""] * pods, None
    mig = {k: v for k, v in devices.items() if k}
    if not mig:
        return 0, None
    profile = max(sorted(mig), key=lambda p: mig[p])
    return mig[profile] * pods, profile


def pods_at_once(job_spec: schema.JobSpec) -> int:
    pods = 1 if job_spec.parallelism is None else _count(job_spec.parallelism)
    if job_spec.completions is not None:
        pods = min(pods, _count(job_spec.completions))
    return max(pods, 1)


def template_spec(job_spec: schema.JobSpec) -> schema.PodSpec:
    template = job_spec.template
    return template.spec if template is not None and template.spec is not None else schema.EMPTY_POD_SPEC


def _first_image(pod_spec: schema.PodSpec) -> str:
    for container in pod_spec.containers or ():
        if isinstance(container.image, str):
            return container.image
    return ""


def _owner_label(*label_sets: Mapping[str, Any]) -> str | None:
    for key in OWNER_LABELS:
        for labels in label_sets:
            value = labels.get(key)
            if isinstance(value, str) and value:
                return value
    return None


# --------------------------------------------------------------------------- objects → records


def job_record(obj: Mapping[str, Any] | schema.Job) -> JobRecord:
    """Read a batch/v1 Job (plain JSON or already decoded as :class:`schema.Job`).

    Raises:
        KeyError, TypeError, ValueError: an object of a shape that cannot be read.
    """
    job = schema.convert(obj, schema.Job)
    meta = job.metadata
    spec = job.spec or schema.EMPTY_JOB_SPEC
    status = job.status or schema.EMPTY_JOB_STATUS
    conditions = {c.type: c for c in status.conditions or ()}

    def holds(kind: str) -> schema.Condition | None:
        condition = conditions.get(kind)
        return condition if condition is not None and condition.status == "True" else None

    final: JobState | None = None
    finished = parse_time(status.completionTime)
    if holds("Complete") or holds("SuccessCriteriaMet"):
        final = JobState.SUCCEEDED
    elif failed := (holds("Failed") or holds("FailureTarget")):
        final = JobState.FAILED
        finished = finished or parse_time(failed.lastTransitionTime)
    elif spec.suspend is True:
        final = JobState.SUSPENDED
    pod_spec = template_spec(spec)
    gpus, mig = gpu_request(pod_devices(pod_spec), pods_at_once(spec))
    cron = owner_of("CronJob", meta)
    template = spec.template
    template_labels = (template.metadata.labels if template is not None and template.metadata is not None else None)
    return JobRecord(
        uid=meta.uid,
        name=meta.name,
        namespace=meta.namespace or "default",
        created=parse_time(meta.creationTimestamp) or 0.0,
        final=final,
        active=_count(status.active or 0),
        ready=_count(status.ready or 0),
        started=parse_time(status.startTime),
        finished=finished if final in FINISHED_STATES else None,
        gpus=gpus,
        mig_profile=mig,
        cronjob=str(cron.name) if cron is not None and cron.name else None,
        image=_first_image(pod_spec),
        owner=_owner_label(meta.labels or _EMPTY, template_labels or _EMPTY),
        controller=training_owner(meta),
    )


def pod_record(obj: Mapping[str, Any] | schema.Pod) -> PodRecord:
    """Read a core/v1 Pod (plain JSON or already decoded as :class:`schema.Pod`).

    Raises:
        KeyError, TypeError, ValueError: an object of a shape that cannot be read.
    """
    pod = schema.convert(obj, schema.Pod)
    meta = pod.metadata
    spec = pod.spec or schema.EMPTY_POD_SPEC
    status = pod.status or schema.EMPTY_POD_STATUS
    labels = meta.labels or _EMPTY
    job = owner_of("Job", meta)
    job_uid = str(job.uid) if job is not None and job.uid else next(
        (labels[k] for k in JOB_UID_LABELS if labels.get(k)), None)
    job_name = str(job.name) if job is not None and job.name else next(
        (labels[k] for k in JOB_NAME_LABELS if labels.get(k)), None)
    unschedulable = None
    for condition in status.conditions or ():
        if condition.type == "PodScheduled" and condition.status == "False":
            unschedulable = str(condition.message or condition.reason or "") or None
    waiting = None
    restarts = sum(_count(cs.restartCount or 0) for cs in status.containerStatuses or ())
    for cs in status.containerStatuses or ():
        wait = cs.state.waiting if cs.state is not None else None
        if wait is not None and wait.reason and wait.reason != "ContainerCreating":
            waiting = f"{wait.reason}: {wait.message}" if wait.message else str(wait.reason)
            break
    devices = pod_devices(spec)
    node = spec.nodeName
    index = labels.get(COMPLETION_INDEX) or (meta.annotations or _EMPTY).get(COMPLETION_INDEX)
    return PodRecord(
        uid=meta.uid,
        name=meta.name,
        namespace=meta.namespace or "default",
        created=parse_time(meta.creationTimestamp) or 0.0,
        phase=str(status.phase or "Pending"),
        node=node if isinstance(node, str) and node else None,
        job_uid=job_uid,
        job_name=job_name,
        gpus=devices.get("", 0),
        mig=tuple(sorted((k, v) for k, v in devices.items() if k)),
        unschedulable=unschedulable,
        waiting=waiting,
        index=_count(index) if index is not None else None,
        controller=training_owner(meta),
        role=next((str(labels[k]).lower() for k in ROLE_LABELS if labels.get(k)), None),
        restarts=restarts,
    )


def _instance_id(provider_id: Any) -> str | None:
    """``aws:///us-east-1a/i-0abc…`` → ``i-0abc…``; an ACK node's ``cn-hangzhou.i-bp1…`` (Alibaba
    Cloud's controller) → ``i-bp1…``; other clouds' ids are not instance ids here."""
    if not isinstance(provider_id, str):
        return None
    if provider_id.startswith("aws://"):
        last = provider_id.rstrip("/").rsplit("/", 1)[-1]
        return last if last.startswith("i-") else None
    region, _, last = provider_id.partition(".")
    return last if region and "/" not in provider_id and last.startswith("i-") and "." not in last else None


def node_record(obj: Mapping[str, Any]) -> NodeRecord | None:
    """Read a core/v1 Node; ``None`` for a node without GPUs (it is not listed).

    Raises:
        KeyError, TypeError, ValueError: an object of a shape that cannot be read.
    """
    meta = _metadata(obj)
    labels = _mapping(meta.get("labels"), "labels")
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    capacity = _mapping(status.get("capacity"), "capacity")
    allocatable = _mapping(status.get("allocatable"), "allocatable")
    mig = tuple(sorted((name[len(MIG_RESOURCE_PREFIX):], _count(value)) for name, value in capacity.items()
                       if isinstance(name, str) and name.startswith(MIG_RESOURCE_PREFIX)))
    gpu_capacity = _count(capacity.get(GPU_RESOURCE, 0))
    product = labels.get(PRODUCT_LABEL)
    if not gpu_capacity and not mig and not product:
        return None
    ready = any(isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
                for c in _items(status.get("conditions"), "conditions"))
    strategy = labels.get(MIG_STRATEGY_LABEL)
    return NodeRecord(Node(
        name=meta["name"],
        gpu_product=str(product or ""),
        gpu_capacity=gpu_capacity,
        gpu_allocatable=_count(allocatable.get(GPU_RESOURCE, 0)),
        gpu_allocated=0,
        instance_id=_instance_id(spec.get("providerID")),
        mig_strategy=str(strategy) if strategy and strategy != "none" else None,
        mig_capacity=mig,
        ready=ready,
    ))


def warning_record(obj: Mapping[str, Any]) -> WarningRecord | None:
    """Read a core/v1 Event; ``None`` unless it says why a pod or a Job is stuck.

    Raises:
        KeyError, TypeError, ValueError: an object of a shape that cannot be read.
    """
    meta = _metadata(obj)
    involved = _mapping(obj.get("involvedObject") or obj.get("regarding"), "involvedObject")
    kind, reason = involved.get("kind"), obj.get("reason")
    if not ((kind == "Pod" and reason in SCHEDULING_REASONS) or (kind == "Job" and reason in JOB_REASONS)):
        return None
    series = _mapping(obj.get("series"), "series")
    at = (parse_time(series.get("lastObservedTime")) or parse_time(obj.get("lastTimestamp"))
          or parse_time(obj.get("eventTime")) or parse_time(obj.get("firstTimestamp"))
          or parse_time(meta.get("creationTimestamp")) or 0.0)
    return WarningRecord(
        kind=str(kind),
        uid=str(involved["uid"]) if involved.get("uid") else None,
        namespace=str(involved.get("namespace") or meta.get("namespace") or "default"),
        name=str(involved.get("name") or ""),
        reason=str(reason),
        message=str(obj.get("message") or reason).strip(),
        at=at,
    )
