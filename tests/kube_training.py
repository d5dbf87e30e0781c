"""Distributed training jobs as the Kubernetes API server returns them, for the Kubernetes API test
server (tests/kube_server.py): MPIJobs (kubeflow.org/v2beta1, the MPI Operator), PyTorchJobs
(kubeflow.org/v1, the Training Operator), TrainJobs (trainer.kubeflow.org/v1alpha1, Kubeflow
Trainer) and JobSets (jobset.x-k8s.io/v1alpha2), with the status their controllers write, and
the objects those controllers create: an MPIJob's launcher Job, a JobSet's child Jobs, a
TrainJob's JobSet, and every pod, owned and labelled the way the controllers do it.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.kube_server import JOBSET, MPIJOB, PYTORCH, PYTORCHJOB, TRAINJOB, _pod_spec, pod_for, stamp
from tests.kube_server import job as batch_job

KUBEFLOW_NAME = "training.kubeflow.org/job-name"
KUBEFLOW_ROLE = "training.kubeflow.org/replica-type"
KUBEFLOW_INDEX = "training.kubeflow.org/replica-index"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOBSET_ROLE = "jobset.sigs.k8s.io/replicatedjob-name"
MPI_IMAGE = "mpioperator/mpi-pi:openmpi"

# The conditions the Kubeflow operators keep, per state: (type, status) in the order they came.
_KUBEFLOW_CONDITIONS = {
    "created": (("Created", "True"),),
    "running": (("Created", "True"), ("Running", "True")),
    "restarting": (("Created", "True"), ("Running", "False"), ("Restarting", "True")),
    "succeeded": (("Created", "True"), ("Running", "False"), ("Succeeded", "True")),
    "failed": (("Created", "True"), ("Running", "False"), ("Failed", "True")),
    "suspended": (("Created", "True"), ("Running", "False"), ("Suspended", "True")),
}


def _uid() -> str:
    return str(uuid.uuid4())


def _meta(name: str, namespace: str, created: float | None, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": _uid(), "generation": 1,
                            "creationTimestamp": stamp(time.time() - 900 if created is None else created),
                            "labels": {}, "annotations": {}}
    if owner is not None:
        meta["ownerReferences"] = [_owner_ref(owner)]
    return meta


def _owner_ref(owner: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def _template(gpus: int, image: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"labels": dict(labels or {})}, "spec": _pod_spec(gpus, None, image)}


def _kubeflow_status(kind: str, state: str, replicas: dict[str, dict[str, int]]) -> dict[str, Any]:
    when = stamp(time.time() - 300)
    conditions = [{"type": t, "status": s, "reason": f"{kind}{t}", "message": f"{kind} is {t.lower()}.",
                   "lastUpdateTime": when, "lastTransitionTime": when} for t, s in _KUBEFLOW_CONDITIONS[state]]
    status: dict[str, Any] = {"conditions": conditions, "replicaStatuses": replicas}
    if state not in ("created", "suspended"):
        status["startTime"] = stamp(time.time() - 800)
    if state in ("succeeded", "failed"):
        status["completionTime"] = stamp(time.time() - 60)
    return status


def _counts(state: str, replicas: int) -> dict[str, int]:
    if state in ("running", "restarting"):
        return {"active": replicas}
    if state == "succeeded":
        return {"succeeded": replicas}
    if state == "failed":
        return {"failed": 1, "active": 0}
    return {}


def mpijob(name: str, namespace: str = "train", *, workers: int = 2, gpus: int = 8, state: str = "running",
           image: str = MPI_IMAGE, created: float | None = None) -> dict[str, Any]:
    """A kubeflow.org/v2beta1 MPIJob: a launcher without GPUs and ``workers`` workers of ``gpus``
    GPUs each (``slotsPerWorker`` = ``gpus``); ``state``: created, running, restarting, succeeded,
    failed or suspended."""
    command = ["mpirun", "-np", str(workers * gpus), "-bind-to", "none", "-map-by", "slot", "python", "train.py"]
    launcher = _template(0, image)
    launcher["spec"]["containers"][0]["command"] = command
    return {
        "apiVersion": MPIJOB, "kind": "MPIJob", "metadata": _meta(name, namespace, created),
        "spec": {"slotsPerWorker": gpus, "runPolicy": {"cleanPodPolicy": "Running", "suspend": state == "suspended"},
                 "sshAuthMountPath": "/root/.ssh", "mpiImplementation": "OpenMPI",
                 "launcherCreationPolicy": "AtStartup",
                 "mpiReplicaSpecs": {"Launcher": {"replicas": 1, "restartPolicy": "OnFailure", "template": launcher},
                                     "Worker": {"replicas": workers, "restartPolicy": "Never",
                                                "template": _template(gpus, image)}}},
        "status": _kubeflow_status("MPIJob", state, {"Launcher": _counts(state, 1), "Worker": _counts(state, workers)}),
    }


def pytorchjob(name: str, namespace: str = "train", *, workers: int = 3, gpus: int = 8, state: str = "running",
               image: str = PYTORCH, created: float | None = None) -> dict[str, Any]:
    """A kubeflow.org/v1 PyTorchJob: one master and ``workers`` workers of ``gpus`` GPUs each."""
    return {
        "apiVersion": PYTORCHJOB, "kind": "PyTorchJob", "metadata": _meta(name, namespace, created),
        "spec": {"runPolicy": {"cleanPodPolicy": "None", "suspend": state == "suspended"}, "nprocPerNode": str(gpus),
                 "pytorchReplicaSpecs": {"Master": {"replicas": 1, "restartPolicy": "OnFailure",
                                                    "template": _template(gpus, image)},
                                         "Worker": {"replicas": workers, "restartPolicy": "OnFailure",
                                                    "template": _template(gpus, image)}}},
        "status": _kubeflow_status("PyTorchJob", state, {"Master": _counts(state, 1), "Worker": _counts(state, workers)}),
    }


def kubeflow_pod(job_obj: dict[str, Any], role: str, index: int = 0, **kwargs: Any) -> dict[str, Any]:
    """A pod of an MPIJob's workers or a PyTorchJob's master or workers: owned by the job,
    labelled with its name and the role (``pod_for``'s keywords: node, phase, unschedulable…)."""
    specs = job_obj["spec"].get("mpiReplicaSpecs") or job_obj["spec"]["pytorchReplicaSpecs"]
    labels = {KUBEFLOW_NAME: job_obj["metadata"]["name"], KUBEFLOW_ROLE: role.lower(), KUBEFLOW_INDEX: str(index),
              "training.kubeflow.org/job-role": role.lower()}
    template = {"metadata": {"labels": labels}, "spec": specs[role]["template"]["spec"]}
    pod = pod_for({"metadata": job_obj["metadata"], "spec": {"template": template}},
                  suffix=f"{role.lower()}-{index}", **kwargs)
    pod["metadata"]["ownerReferences"] = [_owner_ref(job_obj)]
    return pod


def launcher_job(mpi: dict[str, Any], *, state: str = "running") -> dict[str, Any]:
    """The batch/v1 Job the MPI Operator creates for an MPIJob's launcher, owned by the MPIJob."""
    launcher = mpi["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]
    name = mpi["metadata"]["name"]
    obj = batch_job(f"{name}-launcher", mpi["metadata"]["namespace"], gpus=0, state=state,
                    image=launcher["spec"]["containers"][0]["image"])
    obj["metadata"]["ownerReferences"] = [_owner_ref(mpi)]
    obj["spec"]["template"]["metadata"]["labels"].update({KUBEFLOW_NAME: name, KUBEFLOW_ROLE: "launcher",
                                                          "training.kubeflow.org/job-role": "launcher"})
    obj["spec"]["template"]["spec"]["containers"][0]["command"] = launcher["spec"]["containers"][0]["command"]
    return obj


def jobset(name: str, namespace: str = "train", *, roles: tuple[tuple[str, int, int, int], ...] = (("node", 1, 2, 8),),
           state: str = "running", image: str = PYTORCH, owner: dict[str, Any] | None = None,
           restarts: int = 0, created: float | None = None) -> dict[str, Any]:
    """A jobset.x-k8s.io/v1alpha2 JobSet; ``roles``: (replicated job, replicas, pods per Job, GPUs
    per pod); ``state``: running, succeeded, failed, suspended or created (nothing started)."""
    replicated = [{"name": role, "replicas": replicas,
                   "template": {"spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0,
                                         "completionMode": "Indexed", "template": _template(gpus, image)}}}
                  for role, replicas, pods, gpus in roles]
    when = stamp(time.time() - 60)
    condition = {"succeeded": "Completed", "failed": "Failed", "suspended": "Suspended"}.get(state)
    conditions = ([{"type": condition, "status": "True", "reason": f"AllJobs{condition}", "message": f"jobset {condition.lower()}",
                    "lastTransitionTime": when}] if condition else [])
    active = state == "running"
    statuses = [{"name": role, "ready": replicas if active else 0, "active": replicas if active else 0,
                 "succeeded": replicas if state == "succeeded" else 0, "failed": 1 if state == "failed" else 0,
                 "suspended": replicas if state == "suspended" else 0} for role, replicas, _p, _g in roles]
    status: dict[str, Any] = {"restarts": restarts, "restartsCountTowardsMax": restarts, "conditions": conditions}
    if state != "created":
        status["replicatedJobsStatus"] = statuses
    if condition in ("Completed", "Failed"):
        status["terminalState"] = condition
    return {
        "apiVersion": JOBSET, "kind": "JobSet", "metadata": _meta(name, namespace, created, owner),
        "spec": {"replicatedJobs": replicated, "suspend": state == "suspended", "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
                 "successPolicy": {"operator": "All"}, "failurePolicy": {"maxRestarts": 3}, "network": {"enableDNSHostnames": True}},
        "status": status,
    }


def jobset_child(js: dict[str, Any], role: str, index: int = 0, *, state: str = "running") -> dict[str, Any]:
    """The batch/v1 Job the JobSet controller creates for replica ``index`` of ``role``."""
    spec = next(r for r in js["spec"]["replicatedJobs"] if r["name"] == role)["template"]["spec"]
    containers = spec["template"]["spec"]["containers"]
    gpus = int(containers[0]["resources"].get("limits", {}).get("nvidia.com/gpu", 0))
    obj = batch_job(f"{js['metadata']['name']}-{role}-{index}", js["metadata"]["namespace"], gpus=gpus,
                    state=state, image=containers[0]["image"], parallelism=spec["parallelism"])
    labels = {JOBSET_NAME: js["metadata"]["name"], JOBSET_ROLE: role, "jobset.sigs.k8s.io/job-index": str(index)}
    obj["metadata"]["labels"].update(labels)
    obj["metadata"]["ownerReferences"] = [_owner_ref(js)]
    obj["spec"]["template"]["metadata"]["labels"].update(labels)
    return obj


def trainjob(name: str, namespace: str = "train", *, nodes: int | None = 2, gpus: int = 8, state: str = "running",
             image: str = PYTORCH, created: float | None = None) -> dict[str, Any]:
    """A trainer.kubeflow.org/v1alpha1 TrainJob on the ``torch-distributed`` runtime: ``nodes``
    nodes (None: the runtime's default) of ``gpus`` GPUs; ``state``: created, running,
    succeeded, failed or suspended."""
    when = stamp(time.time() - 120)
    condition = {"succeeded": ("Complete", "JobsCompleted"), "failed": ("Failed", "JobsFailed"),
                 "suspended": ("Suspended", "Suspended")}.get(state)
    conditions = [{"type": "Created", "status": "True", "reason": "JobsCreationSucceeded",
                   "message": "Succeeded to create Jobs", "lastTransitionTime": when}]
    if condition:
        conditions.append({"type": condition[0], "status": "True", "reason": condition[1], "message": condition[1],
                           "lastTransitionTime": when})
    trainer: dict[str, Any] = {"image": image, "command": ["torchrun", "train.py"],
                               "resourcesPerNode": {"limits": {"nvidia.com/gpu": str(gpus)}}, "numProcPerNode": "auto"}
    if nodes is not None:
        trainer["numNodes"] = nodes
    running = state == "running"
    status: dict[str, Any] = {"conditions": conditions}
    if state != "created":
        status["jobsStatus"] = [{"name": "node", "ready": 1 if running else 0, "active": 1 if running else 0,
                                 "succeeded": 1 if state == "succeeded" else 0, "failed": 1 if state == "failed" else 0,
                                 "suspended": 1 if state == "suspended" else 0}]
    return {
        "apiVersion": TRAINJOB, "kind": "TrainJob", "metadata": _meta(name, namespace, created),
        "spec": {"runtimeRef": {"name": "torch-distributed", "apiGroup": "trainer.kubeflow.org",
                                "kind": "ClusterTrainingRuntime"},
                 "trainer": trainer, "suspend": state == "suspended"},
        "status": status,
    }


def trainjob_jobset(tj: dict[str, Any], *, nodes: int = 2, state: str = "running") -> dict[str, Any]:
    """The JobSet the Trainer creates for a TrainJob: same name, owned by it, one ``node`` role."""
    gpus = int(tj["spec"]["trainer"]["resourcesPerNode"]["limits"]["nvidia.com/gpu"])
    return jobset(tj["metadata"]["name"], tj["metadata"]["namespace"], roles=(("node", 1, nodes, gpus),),
                  state=state, image=tj["spec"]["trainer"]["image"], owner=tj)


def jobset_pod(child: dict[str, Any], index: int = 0, **kwargs: Any) -> dict[str, Any]:
    """A pod of a JobSet's child Job (index ``index`` of an Indexed Job)."""
    pod = pod_for(child, suffix=f"{index}", **kwargs)
    pod["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"] = str(index)
    return pod
