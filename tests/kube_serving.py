"""Inference workloads as the Kubernetes API server returns them, for the Kubernetes API test server
(tests/kube_server.py): apps/v1 Deployments and StatefulSets with the status their controllers
write, autoscaling/v2 HPAs, KServe serving.kserve.io/v1beta1 InferenceServices, and their pods."""

from __future__ import annotations

import copy
import time
import uuid
from typing import Any

from tests.kube_server import INSUFFICIENT_GPU, KSERVE, _gpu_resources, stamp

VLLM = "vllm/vllm-openai:v0.6.3"
TRITON = "nvcr.io/nvidia/tritonserver:24.08-py3"
ISVC_LABEL = "serving.kserve.io/inferenceservice"


def _uid() -> str:
    return str(uuid.uuid4())


def _template(labels: dict[str, str], gpus: int, mig: dict[str, int] | None, image: str) -> dict[str, Any]:
    return {"metadata": {"labels": dict(labels), "annotations": {"prometheus.io/scrape": "true"}},
            "spec": {"containers": [{"name": "server", "image": image, "ports": [{"containerPort": 8000}],
                                     "resources": _gpu_resources(gpus, mig)}],
                     "restartPolicy": "Always", "terminationGracePeriodSeconds": 30}}


def deployment(name: str, namespace: str = "serving", *, replicas: int = 2, gpus: int = 1,
               mig: dict[str, int] | None = None, image: str = VLLM, ready: int | None = None,
               rollout: str = "complete", labels: dict[str, str] | None = None) -> dict[str, Any]:
    """An apps/v1 Deployment and the status the deployment controller writes. ``rollout``:
    complete, progressing (a new ReplicaSet coming up) or stalled (ProgressDeadlineExceeded)."""
    selector = {"app.kubernetes.io/name": name}
    ready = replicas if ready is None else ready
    created = time.time() - 3600
    now = stamp()
    replica_set = f"{name}-7c9f8b6d5"
    progressing = {
        "complete": ("True", "NewReplicaSetAvailable", f'ReplicaSet "{replica_set}" has successfully progressed.'),
        "progressing": ("True", "ReplicaSetUpdated", f'ReplicaSet "{replica_set}" is progressing.'),
        "stalled": ("False", "ProgressDeadlineExceeded", f'ReplicaSet "{replica_set}" has timed out progressing.'),
    }[rollout]
    updated = replicas if rollout == "complete" else max(0, replicas - 1)
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "uid": _uid(), "generation": 3,
                     "creationTimestamp": stamp(created), "labels": {**selector, **(labels or {})},
                     "annotations": {"deployment.kubernetes.io/revision": "3"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": selector}, "progressDeadlineSeconds": 600,
                 "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                 "template": _template({**selector, **(labels or {})}, gpus, mig, image)},
        "status": {"observedGeneration": 3, "replicas": replicas, "updatedReplicas": updated, "readyReplicas": ready,
                   "availableReplicas": ready,
                   "conditions": [
                       {"type": "Available", "status": "True" if ready else "False",
                        "reason": "MinimumReplicasAvailable" if ready else "MinimumReplicasUnavailable",
                        "message": "Deployment has minimum availability." if ready
                        else "Deployment does not have minimum availability.",
                        "lastUpdateTime": now, "lastTransitionTime": now},
                       {"type": "Progressing", "status": progressing[0], "reason": progressing[1],
                        "message": progressing[2], "lastUpdateTime": now, "lastTransitionTime": now}]},
    }


def statefulset(name: str, namespace: str = "serving", *, replicas: int = 2, gpus: int = 1,
                mig: dict[str, int] | None = None, image: str = TRITON, ready: int | None = None) -> dict[str, Any]:
    """An apps/v1 StatefulSet and the status its controller writes (rolled out)."""
    selector = {"app": name}
    ready = replicas if ready is None else ready
    revision = f"{name}-5d8f7c6b9"
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": namespace, "uid": _uid(), "generation": 1,
                     "creationTimestamp": stamp(time.time() - 7200), "labels": dict(selector)},
        "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": selector},
                 "podManagementPolicy": "OrderedReady", "updateStrategy": {"type": "RollingUpdate"},
                 "template": _template(selector, gpus, mig, image)},
        "status": {"observedGeneration": 1, "replicas": replicas, "readyReplicas": ready, "currentReplicas": replicas,
                   "updatedReplicas": replicas, "availableReplicas": ready, "currentRevision": revision,
                   "updateRevision": revision, "collisionCount": 0},
    }


def hpa(name: str, target: dict[str, Any], *, low: int = 2, high: int = 8, current: int = 2, desired: int = 3,
        metrics: list[dict[str, Any]] | None = None, current_metrics: list[dict[str, Any]] | None = None
        ) -> dict[str, Any]:
    """An autoscaling/v2 HorizontalPodAutoscaler scaling ``target`` (a Deployment or StatefulSet)."""
    meta = target["metadata"]
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "namespace": meta["namespace"], "uid": _uid(), "creationTimestamp": stamp()},
        "spec": {"scaleTargetRef": {"apiVersion": target["apiVersion"], "kind": target["kind"], "name": meta["name"]},
                 "minReplicas": low, "maxReplicas": high, "metrics": metrics or []},
        "status": {"currentReplicas": current, "desiredReplicas": desired, "currentMetrics": current_metrics or [],
                   "conditions": [{"type": "AbleToScale", "status": "True", "reason": "ReadyForNewScale",
                                   "lastTransitionTime": stamp()}]},
    }


def inference_service(name: str, namespace: str = "models", *, gpus: int = 1, low: int = 1, high: int = 3,
                      ready: bool = True, storage: str = "hf://meta-llama/Llama-3.1-8B-Instruct") -> dict[str, Any]:
    """A KServe serving.kserve.io/v1beta1 InferenceService (raw deployment mode) and its status."""
    now = stamp()
    conditions = [{"type": t, "status": "True" if ready else "False", "lastTransitionTime": now}
                  for t in ("IngressReady", "PredictorReady", "Ready")]
    if not ready:
        conditions[1].update(reason="MinimumReplicasUnavailable", message="Deployment does not have minimum availability.")
    return {
        "apiVersion": KSERVE, "kind": "InferenceService",
        "metadata": {"name": name, "namespace": namespace, "uid": _uid(), "generation": 1,
                     "creationTimestamp": stamp(time.time() - 1800),
                     "annotations": {"serving.kserve.io/deploymentMode": "RawDeployment"}},
        "spec": {"predictor": {"minReplicas": low, "maxReplicas": high, "model": {
            "modelFormat": {"name": "huggingface"}, "storageUri": storage,
            "resources": _gpu_resources(gpus, None)}}},
        "status": {"conditions": conditions, "deploymentMode": "RawDeployment",
                   "url": f"http://{name}-{namespace}.example.com",
                   "components": {"predictor": {"url": f"http://{name}-predictor-{namespace}.example.com"}},
                   "modelStatus": {"transitionStatus": "UpToDate" if ready else "InProgress",
                                   "states": {"activeModelState": "Loaded" if ready else "Pending"}}},
    }


def inference_pod_template(isvc: dict[str, Any], image: str = "kserve/huggingfaceserver:v0.14.0") -> dict[str, Any]:
    """The Deployment-like shape :func:`pod_of` takes for an InferenceService's predictor pods."""
    meta = isvc["metadata"]
    labels = {ISVC_LABEL: meta["name"], "component": "predictor", "app": f"isvc.{meta['name']}-predictor"}
    gpus = int(isvc["spec"]["predictor"]["model"]["resources"]["limits"].get("nvidia.com/gpu", "0"))
    return {"kind": "Deployment", "metadata": {"name": f"{meta['name']}-predictor", "namespace": meta["namespace"],
                                               "uid": _uid()},
            "spec": {"template": _template(labels, gpus, None, image)}}


def pod_of(workload: dict[str, Any], index: int = 0, *, node: str | None = "gpu-node-1", ready: bool = True,
           unschedulable: str | None = None, waiting: tuple[str, str] | None = None) -> dict[str, Any]:
    """A pod of ``workload``'s template, as its controller names and labels it (a Deployment's
    through its ReplicaSet, a StatefulSet's with its ordinal)."""
    meta, template = workload["metadata"], workload["spec"]["template"]
    labels = dict(template["metadata"]["labels"])
    if workload["kind"] == "StatefulSet":
        name, owner = f"{meta['name']}-{index}", {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": meta["name"]}
        labels["statefulset.kubernetes.io/pod-name"] = name
    else:
        labels["pod-template-hash"] = "7c9f8b6d5"
        name = f"{meta['name']}-7c9f8b6d5-{uuid.uuid4().hex[:5]}"
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{meta['name']}-7c9f8b6d5"}
    created = time.time() - 900
    spec = copy.deepcopy(template["spec"])
    conditions: list[dict[str, Any]] = []
    status: dict[str, Any] = {"phase": "Running" if node and ready else "Pending", "conditions": conditions,
                              "qosClass": "Guaranteed"}
    if node is not None:
        spec["nodeName"] = node
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": stamp(created + 1)})
        status["startTime"] = stamp(created + 1)
        state = ({"running": {"startedAt": stamp(created + 30)}} if waiting is None
                 else {"waiting": {"reason": waiting[0], "message": waiting[1]}})
        status["containerStatuses"] = [{"name": "server", "image": spec["containers"][0]["image"], "ready": ready,
                                        "restartCount": 0, "started": ready, "state": state}]
        if waiting is not None:
            status["phase"] = "Pending"
    else:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                           "message": unschedulable or INSUFFICIENT_GPU, "lastTransitionTime": stamp(created + 1)})
    conditions.append({"type": "Ready", "status": "True" if ready and node else "False",
                       "lastTransitionTime": stamp(created + 60)})
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": meta["namespace"], "uid": _uid(), "creationTimestamp": stamp(created),
                         "labels": labels, "ownerReferences": [{**owner, "uid": _uid(), "controller": True,
                                                                "blockOwnerDeletion": True}]},
            "spec": spec, "status": status}
