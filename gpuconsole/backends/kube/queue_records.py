"""Kueue's and Volcano's objects reduced to small records: queues, workloads, gangs, Volcano Jobs.

Pure functions over the JSON the API server sends, as :mod:`records` does for Jobs and Pods; an
object that cannot be read raises alone (the lister skips it and says so once). GPUs are
``nvidia.com/gpu`` and the ``nvidia.com/mig-*`` devices, counted together.

Kueue (``kueue.x-k8s.io``, v1beta2 or v1beta1: the cohort is ``spec.cohortName`` in the first,
``spec.cohort`` in the other): ClusterQueues, LocalQueues and Workloads. Volcano: Queues and
PodGroups (``scheduling.volcano.sh/v1beta1``) and Jobs (``batch.volcano.sh/v1alpha1``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpuconsole.backends.kube import schema
from gpuconsole.backends.kube.records import (
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    JobRecord,
    _count,
    _items,
    _mapping,
    _metadata,
    gpu_request,
    job_record,
    parse_time,
    pod_devices,
)
from gpuconsole.model import JobState

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSIONS = ("v1beta2", "v1beta1")  # the newest first: current Kueue serves v1beta2
VOLCANO_SCHEDULING = ("scheduling.volcano.sh", "v1beta1")
VOLCANO_BATCH = ("batch.volcano.sh", "v1alpha1")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # a Job's LocalQueue
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"  # a Workload's Job


def is_gpu(resource: Any) -> bool:
    return resource == GPU_RESOURCE or (isinstance(resource, str) and resource.startswith(MIG_RESOURCE_PREFIX))


def gpu_sum(resources: Mapping[str, Any] | None) -> int | None:
    """GPUs in a resource list (``{"nvidia.com/gpu": "8", …}``); None when it names none."""
    found = [_count(v) for k, v in (resources or {}).items() if is_gpu(k)]
    return sum(found) if found else None


def _condition(conditions: Iterable[Any], kind: str) -> Mapping[str, Any] | None:
    for condition in conditions:
        if isinstance(condition, Mapping) and condition.get("type") == kind:
            return condition
    return None


def _holds(condition: Mapping[str, Any] | None) -> bool:
    return condition is not None and condition.get("status") == "True"


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, str) and value else None


# --------------------------------------------------------------------------- Kueue


@dataclass(frozen=True, slots=True)
class ClusterQueueRecord:
    name: str
    cohort: str | None
    quota: int | None  # nominal GPU quota over its flavors; None: it covers no GPU resource
    borrowing_limit: int | None
    lending_limit: int | None
    used: int | None
    reserved: int | None
    borrowed: int | None
    pending: int | None
    admitted: int | None
    flavors: tuple[str, ...]
    active: bool


def _flavor_usage(entries: Any, what: str) -> tuple[int | None, int | None]:
    """GPUs in use and borrowed in ``status.flavorsUsage`` (or ``flavorsReservation``)."""
    total = borrowed = None
    for flavor in _items(entries, what):
        for resource in _items(_mapping(flavor, what).get("resources"), what):
            if is_gpu(resource.get("name")):
                total = (total or 0) + _count(resource.get("total") or 0)
                borrowed = (borrowed or 0) + _count(resource.get("borrowed") or 0)
    return total, borrowed


def cluster_queue_record(obj: Mapping[str, Any]) -> ClusterQueueRecord:
    meta = _metadata(obj)
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    quota: int | None = None
    limits: dict[str, list[int | None]] = {"borrowingLimit": [], "lendingLimit": []}
    flavors: list[str] = []
    for group in _items(spec.get("resourceGroups"), "resourceGroups"):
        for flavor in _items(_mapping(group, "resourceGroup").get("flavors"), "flavors"):
            for resource in _items(_mapping(flavor, "flavor").get("resources"), "resources"):
                if not is_gpu(resource.get("name")):
                    continue
                quota = (quota or 0) + _count(resource.get("nominalQuota") or 0)
                for key, kept in limits.items():
                    kept.append(_count(resource[key]) if resource.get(key) is not None else None)
                if flavor.get("name") not in flavors:
                    flavors.append(str(flavor.get("name")))
    used, borrowed = _flavor_usage(status.get("flavorsUsage"), "flavorsUsage")
    reserved, _ = _flavor_usage(status.get("flavorsReservation"), "flavorsReservation")
    conditions = _items(status.get("conditions"), "conditions")
    active = _condition(conditions, "Active")
    pending, admitted = status.get("pendingWorkloads"), status.get("admittedWorkloads")

    def limit(key: str) -> int | None:
        kept = limits[key]
        return sum(v for v in kept if v is not None) if kept and all(v is not None for v in kept) else None

    return ClusterQueueRecord(
        name=meta["name"],
        cohort=_text(spec.get("cohortName")) or _text(spec.get("cohort")),
        quota=quota,
        borrowing_limit=limit("borrowingLimit"),
        lending_limit=limit("lendingLimit"),
        used=used if quota is not None else None,
        reserved=reserved if quota is not None else None,
        borrowed=borrowed if quota is not None else None,
        pending=_count(pending) if pending is not None else None,
        admitted=_count(admitted) if admitted is not None else None,
        flavors=tuple(flavors),
        active=active is None or _holds(active),
    )


@dataclass(frozen=True, slots=True)
class LocalQueueRecord:
    namespace: str
    name: str
    cluster_queue: str


def local_queue_record(obj: Mapping[str, Any]) -> LocalQueueRecord:
    meta = _metadata(obj)
    spec = _mapping(obj.get("spec"), "spec")
    return LocalQueueRecord(str(meta.get("namespace") or "default"), meta["name"], str(spec["clusterQueue"]))


@dataclass(frozen=True, slots=True)
class WorkloadRecord:
    uid: str
    namespace: str
    name: str
    job_uid: str | None  # the batch/v1 Job it stands for
    queue: str | None  # its LocalQueue
    cluster_queue: str | None  # where it was admitted (or has quota reserved)
    priority: int
    created: float
    active: bool
    quota_reserved: bool
    admitted: bool
    finished: bool
    preempted: str | None  # the eviction's message when it was preempted and waits again
    check: str | None  # "name: message" of the first admission check not ready
    waiting: str | None  # the QuotaReserved=False condition's message
    gpus: int


def workload_record(obj: Mapping[str, Any]) -> WorkloadRecord:
    meta = _metadata(obj)
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    owner = next((r for r in _items(meta.get("ownerReferences"), "ownerReferences")
                  if isinstance(r, Mapping) and r.get("kind") == "Job"
                  and str(r.get("apiVersion", "")).startswith("batch/")), None)
    labels = _mapping(meta.get("labels"), "labels")
    conditions = _items(status.get("conditions"), "conditions")
    reserved = _condition(conditions, "QuotaReserved")
    evicted = _condition(conditions, "Evicted")
    was_preempted = _holds(_condition(conditions, "Preempted")) or (
        _holds(evicted) and evicted is not None and evicted.get("reason") == "Preempted")
    check = None
    for entry in _items(status.get("admissionChecks"), "admissionChecks"):
        if isinstance(entry, Mapping) and entry.get("state") != "Ready":
            check = f"{entry.get('name')}: {entry.get('message') or entry.get('state')}"
            break
    admission = _mapping(status.get("admission"), "admission")
    gpus = 0
    for pod_set in _items(spec.get("podSets"), "podSets"):
        template = schema.convert(_mapping(pod_set, "podSet").get("template") or {}, schema.PodTemplate)
        per_pod, _ = gpu_request(_pod_devices(template))
        gpus += per_pod * _count(pod_set.get("count") or 1)
    priority = spec.get("priority")
    return WorkloadRecord(
        uid=meta["uid"],
        namespace=str(meta.get("namespace") or "default"),
        name=meta["name"],
        job_uid=str(owner["uid"]) if owner is not None and owner.get("uid") else _text(labels.get(JOB_UID_LABEL)),
        queue=_text(spec.get("queueName")),
        cluster_queue=_text(admission.get("clusterQueue")),
        priority=_count(priority) if priority is not None else 0,
        created=parse_time(meta.get("creationTimestamp")) or 0.0,
        active=spec.get("active") is not False,
        quota_reserved=_holds(reserved),
        admitted=_holds(_condition(conditions, "Admitted")),
        finished=_holds(_condition(conditions, "Finished")),
        preempted=str(evicted.get("message") or "preempted") if was_preempted and evicted is not None
        else ("preempted" if was_preempted else None),
        check=check,
        waiting=_text(reserved.get("message")) if reserved is not None and not _holds(reserved) else None,
        gpus=gpus,
    )


def _pod_devices(template: schema.PodTemplate) -> dict[str, int]:
    return pod_devices(template.spec) if template.spec is not None else {}


# --------------------------------------------------------------------------- Volcano


@dataclass(frozen=True, slots=True)
class VolcanoQueueRecord:
    name: str
    capability: int | None  # GPUs it may hold at most; None: not capped
    allocated: int | None
    pending: int | None  # PodGroups pending and inqueue
    running: int | None
    open: bool


def volcano_queue_record(obj: Mapping[str, Any]) -> VolcanoQueueRecord:
    meta = _metadata(obj)
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    capability = gpu_sum(_mapping(spec.get("capability"), "capability"))
    allocated = gpu_sum(_mapping(status.get("allocated"), "allocated"))
    waiting = [status.get(k) for k in ("pending", "inqueue") if status.get(k) is not None]
    return VolcanoQueueRecord(
        name=meta["name"],
        capability=capability,
        allocated=allocated if allocated is not None else (0 if status else None),
        pending=sum(_count(v) for v in waiting) if waiting else None,
        running=_count(status["running"]) if status.get("running") is not None else None,
        open=status.get("state") in (None, "Open"),
    )


@dataclass(frozen=True, slots=True)
class PodGroupRecord:
    uid: str
    namespace: str
    name: str
    owner_uid: str | None
    queue: str
    min_member: int
    gpus: int  # minResources' GPUs
    phase: str
    unschedulable: str | None  # the Unschedulable condition's message
    running: int


def pod_group_record(obj: Mapping[str, Any]) -> PodGroupRecord:
    meta = _metadata(obj)
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    owner = next((r for r in _items(meta.get("ownerReferences"), "ownerReferences")
                  if isinstance(r, Mapping) and r.get("controller")), None)
    condition = _condition(_items(status.get("conditions"), "conditions"), "Unschedulable")
    return PodGroupRecord(
        uid=meta["uid"],
        namespace=str(meta.get("namespace") or "default"),
        name=meta["name"],
        owner_uid=_text(owner.get("uid")) if owner is not None else None,
        queue=str(spec.get("queue") or "default"),
        min_member=_count(spec.get("minMember") or 1),
        gpus=gpu_sum(_mapping(spec.get("minResources"), "minResources")) or 0,
        phase=str(status.get("phase") or "Pending"),
        unschedulable=_text(condition.get("message")) if _holds(condition) and condition is not None else None,
        running=_count(status.get("running") or 0),
    )


@dataclass(frozen=True, slots=True)
class VolcanoJobRecord:
    job: JobRecord  # as a batch/v1 Job's record, so it joins its pods the same way
    queue: str


_VOLCANO_FINAL = {"Completed": JobState.SUCCEEDED, "Failed": JobState.FAILED, "Aborted": JobState.FAILED,
                  "Terminated": JobState.FAILED}


def volcano_job_record(obj: Mapping[str, Any]) -> VolcanoJobRecord:
    """A ``batch.volcano.sh`` Job read as a Job: its tasks' pods at once, its phase as a state."""
    spec = _mapping(obj.get("spec"), "spec")
    status = _mapping(obj.get("status"), "status")
    tasks = [_mapping(t, "task") for t in _items(spec.get("tasks"), "tasks")]
    first = _mapping(tasks[0].get("template"), "template") if tasks else {}
    pods = sum(_count(t.get("replicas") or 1) for t in tasks) or 1
    as_job = {"metadata": obj["metadata"], "spec": {"parallelism": pods, "template": first},
              "status": {"startTime": None}}
    record = job_record(as_job)
    gpus = 0
    for task in tasks:
        template = schema.convert(_mapping(task.get("template"), "template"), schema.PodTemplate)
        per_pod, _ = gpu_request(_pod_devices(template))
        gpus += per_pod * _count(task.get("replicas") or 1)
    phase = _mapping(status.get("state"), "state").get("phase")
    final = _VOLCANO_FINAL.get(str(phase))
    when = parse_time(_mapping(status.get("state"), "state").get("lastTransitionTime"))
    record = replace(record, gpus=gpus or record.gpus, final=final, finished=when if final is not None else None,
                     ready=_count(status.get("running") or 0))
    return VolcanoJobRecord(record, str(spec.get("queue") or "default"))
