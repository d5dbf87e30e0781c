"""Queueing objects as the Kubernetes API server returns them, for the Kubernetes API test server
(tests/kube_server.py): Kueue's ``kueue.x-k8s.io`` ResourceFlavors, ClusterQueues, LocalQueues and
Workloads (with the status Kueue's controllers write), and Volcano's ``scheduling.volcano.sh/v1beta1``
Queues and PodGroups and ``batch.volcano.sh/v1alpha1`` Jobs.

Kueue's v1beta2 names a ClusterQueue's cohort ``spec.cohortName``; v1beta1 names it ``spec.cohort``.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.kube_server import (
    INSUFFICIENT_GPU,
    KUEUE_GROUP,
    VOLCANO_BATCH,
    VOLCANO_SCHEDULING,
    _pod_spec,
    stamp,
)

GPU = "nvidia.com/gpu"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"  # a pod's Volcano PodGroup


def _uid() -> str:
    return str(uuid.uuid4())


def _condition(kind: str, status: bool, reason: str, message: str = "", at: float | None = None) -> dict[str, Any]:
    """A metav1.Condition, as Kueue and Volcano write them."""
    return {"type": kind, "status": "True" if status else "False", "reason": reason, "message": message,
            "lastTransitionTime": stamp(at), "observedGeneration": 1}


def resource_flavor(name: str = "a100", version: str = "v1beta2", *, product: str = "NVIDIA-A100-SXM4-80GB"
                    ) -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE_GROUP}/{version}", "kind": "ResourceFlavor",
            "metadata": {"name": name, "uid": _uid()},
            "spec": {"nodeLabels": {"nvidia.com/gpu.product": product}}}


def cluster_queue(name: str, *, gpus: int = 16, cohort: str | None = None, flavor: str = "a100",
                  borrowing: int | None = None, lending: int | None = None, used: int = 0, borrowed: int = 0,
                  reserved: int | None = None, pending: int = 0, admitted: int = 0, version: str = "v1beta2",
                  resource: str = GPU) -> dict[str, Any]:
    """A ClusterQueue with one resource group (cpu, memory and ``resource``) of one flavor, and the
    status Kueue writes: ``used`` GPUs admitted, ``borrowed`` of them over the nominal quota."""
    quota: dict[str, Any] = {"name": resource, "nominalQuota": str(gpus)}
    if borrowing is not None:
        quota["borrowingLimit"] = str(borrowing)
    if lending is not None:
        quota["lendingLimit"] = str(lending)
    spec: dict[str, Any] = {
        "namespaceSelector": {}, "queueingStrategy": "BestEffortFIFO",
        "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
        "resourceGroups": [{"coveredResources": ["cpu", "memory", resource], "flavors": [{"name": flavor, "resources": [
            {"name": "cpu", "nominalQuota": "512"}, {"name": "memory", "nominalQuota": "4Ti"}, quota]}]}],
    }
    if cohort:
        spec["cohortName" if version == "v1beta2" else "cohort"] = cohort

    def usage(total: int) -> list[dict[str, Any]]:
        return [{"name": flavor, "resources": [{"name": "cpu", "total": str(8 * total), "borrowed": "0"},
                                               {"name": resource, "total": str(total), "borrowed": str(borrowed)}]}]

    return {
        "apiVersion": f"{KUEUE_GROUP}/{version}", "kind": "ClusterQueue",
        "metadata": {"name": name, "uid": _uid(), "generation": 1},
        "spec": spec,
        "status": {"conditions": [_condition("Active", True, "Ready", "Can admit new workloads")],
                   "flavorsUsage": usage(used), "flavorsReservation": usage(used if reserved is None else reserved),
                   "pendingWorkloads": pending, "reservingWorkloads": admitted, "admittedWorkloads": admitted},
    }


def local_queue(name: str, namespace: str, cluster: str, *, pending: int = 0, admitted: int = 0,
                version: str = "v1beta2") -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE_GROUP}/{version}", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace, "uid": _uid()},
            "spec": {"clusterQueue": cluster},
            "status": {"conditions": [_condition("Active", True, "Ready", "Can submit new workloads to localQueue")],
                       "pendingWorkloads": pending, "reservingWorkloads": admitted, "admittedWorkloads": admitted}}


def queued(job_obj: dict[str, Any], queue: str) -> dict[str, Any]:
    """``job_obj`` as Kueue's webhook leaves it: labelled with its LocalQueue, created suspended."""
    job_obj["metadata"]["labels"][QUEUE_LABEL] = queue
    job_obj["spec"]["suspend"] = True
    job_obj["status"] = {"terminating": 0, "uncountedTerminatedPods": {}}
    return job_obj


def workload(job_obj: dict[str, Any], queue: str, *, state: str = "pending", cluster: str | None = None,
             message: str | None = None, priority: int = 0, active: bool = True, check: str | None = None,
             version: str = "v1beta2", created: float | None = None, flavor: str = "a100") -> dict[str, Any]:
    """The Workload Kueue makes for a batch/v1 Job, owned by it. ``state``: pending (no quota
    reserved), checks (quota reserved, an admission check pending), admitted, or preempted
    (evicted to make room, waiting again)."""
    meta = job_obj["metadata"]
    spec = job_obj["spec"]
    count = int(spec.get("parallelism") or 1)
    now = time.time()
    conditions: list[dict[str, Any]] = []
    status: dict[str, Any] = {"conditions": conditions}
    admission = {"clusterQueue": cluster, "podSetAssignments": [{
        "name": "main", "flavors": {"cpu": flavor, "memory": flavor, GPU: flavor}, "count": count,
        "resourceUsage": {GPU: str(count * _gpus(spec))}}]}
    if state == "pending":
        conditions.append(_condition("QuotaReserved", False, "Pending", message or (
            f"couldn't assign flavors to pod set main: insufficient unused quota for {GPU} in flavor {flavor}, "
            f"{count * _gpus(spec)} more needed")))
    elif state == "checks":
        status["admission"] = admission
        conditions.append(_condition("QuotaReserved", True, "QuotaReserved", f"Quota reserved in ClusterQueue {cluster}"))
        conditions.append(_condition("Admitted", False, "NoChecks", "The workload has not all checks ready"))
        status["admissionChecks"] = [{"name": check or "dws-prov", "state": "Pending", "lastTransitionTime": stamp(),
                                      "message": message or "Waiting for the ProvisioningRequest to be Provisioned"}]
    elif state == "admitted":
        status["admission"] = admission
        conditions.append(_condition("QuotaReserved", True, "QuotaReserved", f"Quota reserved in ClusterQueue {cluster}"))
        conditions.append(_condition("Admitted", True, "Admitted", "The workload is admitted"))
    elif state == "preempted":
        conditions.append(_condition("QuotaReserved", False, "Pending", "couldn't assign flavors to pod set main: "
                                     f"insufficient unused quota for {GPU} in flavor {flavor}"))
        conditions.append(_condition("Evicted", True, "Preempted", message or (
            "Preempted to accommodate a workload (UID: 5bd2, JobUID: 9c1e) due to prioritization in the ClusterQueue")))
        conditions.append(_condition("Preempted", True, "InClusterQueue", "Preempted to accommodate a higher "
                                     "priority workload"))
        conditions.append(_condition("Requeued", True, "Preempted", "Preempted"))
    else:
        raise ValueError(state)
    return {
        "apiVersion": f"{KUEUE_GROUP}/{version}", "kind": "Workload",
        "metadata": {"name": f"job-{meta['name']}-{uuid.uuid4().hex[:5]}", "namespace": meta["namespace"],
                     "uid": _uid(), "creationTimestamp": stamp(now - 300 if created is None else created),
                     "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                          "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"active": active, "queueName": queue, "priority": priority,
                 "podSets": [{"name": "main", "count": count, "template": spec["template"]}]},
        "status": status,
    }


def _gpus(job_spec: dict[str, Any]) -> int:
    limits = job_spec["template"]["spec"]["containers"][0]["resources"]["limits"]
    return int(limits.get(GPU, "0"))


# --------------------------------------------------------------------------- Volcano


def volcano_queue(name: str, *, gpus: int | None = 16, allocated: int = 0, deserved: int | None = None,
                  guarantee: int | None = None, state: str = "Open", running: int = 0, pending: int = 0,
                  inqueue: int = 0) -> dict[str, Any]:
    """A Volcano Queue: ``capability`` caps it at ``gpus`` (None: no cap), ``allocated`` in use."""
    spec: dict[str, Any] = {"weight": 1, "reclaimable": True}
    if gpus is not None:
        spec["capability"] = {"cpu": "512", GPU: str(gpus)}
    if deserved is not None:
        spec["deserved"] = {GPU: str(deserved)}
    if guarantee is not None:
        spec["guarantee"] = {"resource": {GPU: str(guarantee)}}
    return {"apiVersion": VOLCANO_SCHEDULING, "kind": "Queue", "metadata": {"name": name, "uid": _uid()},
            "spec": spec,
            "status": {"state": state, "running": running, "pending": pending, "inqueue": inqueue, "unknown": 0,
                       "completed": 0, "allocated": {"cpu": str(8 * allocated), GPU: str(allocated)}}}


def pod_group(owner: dict[str, Any], *, min_member: int, queue: str = "default", phase: str = "Inqueue",
              schedulable: int | None = None, running: int = 0, gpus_each: int = 1,
              reason: str = "NotEnoughResources") -> dict[str, Any]:
    """The PodGroup Volcano keeps for ``owner`` (a batch/v1 Job or a Volcano Job): with
    ``schedulable`` set, the gang does not fit and says so in the scheduler's words."""
    meta = owner["metadata"]
    conditions: list[dict[str, Any]] = []
    if schedulable is not None:
        waiting = min_member - running
        conditions.append({
            "type": "Unschedulable", "status": "True", "reason": reason, "transitionID": _uid(),
            "lastTransitionTime": stamp(),
            "message": (f"{waiting}/{min_member} tasks in gang unschedulable: pod group is not ready, {waiting} Pending, "
                        f"{min_member} minAvailable; Pending: {waiting - schedulable} Unschedulable, "
                        f"{schedulable} Schedulable")})
    api = owner.get("apiVersion", "batch/v1")
    name = f"{meta['name']}-{meta['uid']}" if api == VOLCANO_BATCH else f"podgroup-{meta['uid']}"
    return {"apiVersion": VOLCANO_SCHEDULING, "kind": "PodGroup",
            "metadata": {"name": name, "namespace": meta["namespace"], "uid": _uid(),
                         "ownerReferences": [{"apiVersion": api, "kind": owner["kind"], "name": meta["name"],
                                              "uid": meta["uid"], "controller": True}]},
            "spec": {"minMember": min_member, "queue": queue,
                     "minResources": {GPU: str(min_member * gpus_each), "cpu": str(8 * min_member)}},
            "status": {"phase": phase, "conditions": conditions, "running": running, "succeeded": 0, "failed": 0}}


def volcano_job(name: str, namespace: str = "default", *, replicas: int = 4, gpus: int = 1, queue: str = "default",
                phase: str = "Pending", min_available: int | None = None, created: float | None = None
                ) -> dict[str, Any]:
    """A Volcano ``batch.volcano.sh/v1alpha1`` Job of one task (``replicas`` workers)."""
    template = {"metadata": {}, "spec": dict(_pod_spec(gpus, None, "nvcr.io/nvidia/pytorch:24.05-py3"),
                                             schedulerName="volcano", restartPolicy="OnFailure")}
    running = replicas if phase == "Running" else 0
    return {"apiVersion": VOLCANO_BATCH, "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "uid": _uid(),
                         "creationTimestamp": stamp(time.time() - 300 if created is None else created)},
            "spec": {"schedulerName": "volcano", "queue": queue, "minAvailable": min_available or replicas,
                     "tasks": [{"name": "worker", "replicas": replicas, "template": template}],
                     "policies": [{"event": "PodEvicted", "action": "RestartJob"}], "maxRetry": 3},
            "status": {"state": {"phase": phase, "lastTransitionTime": stamp()}, "minAvailable": min_available or replicas,
                       "pending": replicas - running, "running": running, "succeeded": 0, "failed": 0,
                       "version": 1, "retryCount": 0}}


def gang_pod(owner: dict[str, Any], group: dict[str, Any], index: int, *, node: str | None = None) -> dict[str, Any]:
    """A pod of a Volcano Job's task (annotated with its PodGroup), scheduled or waiting."""
    meta = owner["metadata"]
    spec = dict(owner["spec"]["tasks"][0]["template"]["spec"])
    conditions = []
    if node:
        spec["nodeName"] = node
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp()})
    else:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "message": INSUFFICIENT_GPU, "lastTransitionTime": stamp()})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{meta['name']}-worker-{index}", "namespace": meta["namespace"], "uid": _uid(),
                         "creationTimestamp": stamp(time.time() - 200),
                         "annotations": {GROUP_ANNOTATION: group["metadata"]["name"],
                                         "volcano.sh/job-name": meta["name"], "volcano.sh/task-index": str(index)},
                         "labels": {"volcano.sh/job-name": meta["name"], "volcano.sh/job-namespace": meta["namespace"]},
                         "ownerReferences": [{"apiVersion": VOLCANO_BATCH, "kind": "Job", "name": meta["name"],
                                              "uid": meta["uid"], "controller": True}]},
            "spec": spec, "status": {"phase": "Running" if node else "Pending", "conditions": conditions}}

