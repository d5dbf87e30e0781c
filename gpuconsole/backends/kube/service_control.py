"""Changing inference services on a real cluster: :class:`KubeServiceControl`, the Kubernetes side
of ``ServiceControl``.

Requests go as the job control's do (plain ``dict`` bodies through the official client, answers
read as JSON, a timeout on each, a 403 one ``denied by the cluster: …`` line in the API server's
words):

* scale: a merge patch of the ``scale`` subresource of a Deployment or StatefulSet (what
  ``kubectl scale`` sends); an InferenceService has no such subresource, so its predictor's
  ``minReplicas`` is patched (and ``maxReplicas`` raised to match where it is lower);
* rollout restart: the pod template annotated ``kubectl.kubernetes.io/restartedAt`` (what
  ``kubectl rollout restart`` sends), an InferenceService's predictor annotated the same way;
* a replica's log, and describe: the object as YAML, then its events and its newest pods'.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from gpuconsole.backends.base import BackendError
from gpuconsole.backends.kube.control import KubeJobControl
from gpuconsole.backends.kube.describe import describe_text
from gpuconsole.backends.kube.service_records import (
    COMPONENT_LABEL,
    DEPLOYMENT_MODE,
    INFERENCESERVICE_LABEL,
    INFERENCESERVICES,
    KSERVE_GROUP,
    KSERVE_VERSION,
)

APPS = "/apis/apps/v1/namespaces/{namespace}"
KSERVE = f"/apis/{KSERVE_GROUP}/{KSERVE_VERSION}/namespaces/{{namespace}}"
SERVICE_KINDS = {
    "Deployment": (f"{APPS}/deployments", "apps/v1"),
    "StatefulSet": (f"{APPS}/statefulsets", "apps/v1"),
    "InferenceService": (f"{KSERVE}/{INFERENCESERVICES}", f"{KSERVE_GROUP}/{KSERVE_VERSION}"),
}
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"  # what kubectl sends to built-in kinds


def _collection(kind: str) -> str:
    found = SERVICE_KINDS.get(kind)
    if found is None:
        raise BackendError(f"cannot act on a {kind}: only Deployments, StatefulSets and InferenceServices")
    return found[0]


class KubeServiceControl(KubeJobControl):
    """Scale, rollout restart, a replica's log and describe, through the official client.

    Args:
        api_client_factory, request_timeout, clock: as for :class:`KubeJobControl` (the clock
            also stamps a restart).
    """

    def scale_service(self, kind: str, namespace: str, name: str, replicas: int) -> None:
        where = f"scaling {kind} {namespace}/{name} to {replicas}"
        path = _collection(kind)
        if kind == "InferenceService":
            self._scale_inference_service(path, namespace, name, int(replicas), where)
            return
        self._json("PATCH", f"{path}/{{name}}/scale", where, namespace=namespace, name=name,
                   body={"spec": {"replicas": int(replicas)}}, content_type=MERGE_PATCH)

    def _scale_inference_service(self, path: str, namespace: str, name: str, replicas: int, where: str) -> None:
        found = self._json("GET", path, where, namespace=namespace, name=name)
        meta = found.get("metadata") if isinstance(found, Mapping) else None
        annotations = (meta or {}).get("annotations") or {}
        if annotations.get(DEPLOYMENT_MODE) == "ModelMesh":
            raise BackendError(f"cannot scale InferenceService {namespace}/{name}: ModelMesh places its models, "
                               "so it has no replicas of its own (scale the ServingRuntime's Deployment)")
        predictor = ((found.get("spec") or {}).get("predictor") or {}) if isinstance(found, Mapping) else {}
        patch: dict[str, Any] = {"minReplicas": replicas}
        high = predictor.get("maxReplicas") if isinstance(predictor, Mapping) else None
        if isinstance(high, int) and not isinstance(high, bool) and high < replicas:
            patch["maxReplicas"] = replicas
        self._json("PATCH", path, where, namespace=namespace, name=name, body={"spec": {"predictor": patch}},
                   content_type=MERGE_PATCH)

    def restart_service(self, kind: str, namespace: str, name: str) -> None:
        where = f"restarting {kind} {namespace}/{name}"
        path = _collection(kind)
        at = datetime.fromtimestamp(self.clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if kind == "InferenceService":
            body: dict[str, Any] = {"spec": {"predictor": {"annotations": {RESTARTED_AT: at}}}}
            content_type = MERGE_PATCH
        else:
            body, content_type = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: at}}}}}, STRATEGIC_PATCH
        self._json("PATCH", path, where, namespace=namespace, name=name, body=body, content_type=content_type)

    def describe_service(self, kind: str, namespace: str, name: str) -> str:
        where = f"describing {kind} {namespace}/{name}"
        path = _collection(kind)
        obj = self._json("GET", path, where, namespace=namespace, name=name)
        if not isinstance(obj, Mapping):
            raise BackendError(f"{where}: the API server sent no object")
        obj = {"apiVersion": SERVICE_KINDS[kind][1], "kind": kind, **obj}
        events = self._events(namespace, (obj.get("metadata") or {}).get("uid"), where)
        if kind == "InferenceService":
            selector = f"{INFERENCESERVICE_LABEL}={name},{COMPONENT_LABEL}=predictor"
        else:
            labels = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
        if selector:
            events += self._pod_events(namespace, selector, where)
        return describe_text(obj, events, self.clock())
