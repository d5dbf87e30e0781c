"""Inference workloads reduced to records: Deployments, StatefulSets, KServe InferenceServices, the
``autoscaling/v2`` HPAs that target them and the GPU pods that serve them.

Pure functions over the JSON the API server sends (an object that cannot be read raises alone,
and the listing skips it). A Deployment or StatefulSet whose pod template asks for no GPU and no
MIG device reads as None: it is not an inference service to this console. A pod that holds none
reads as None too, so the caches keep only the pods a service can have.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from msgspec import Struct

from gpuconsole.backends.kube import schema
from gpuconsole.backends.kube.records import PodRecord, container_devices, gpu_request, parse_time, pod_devices, pod_record
from gpuconsole.model import Rollout, ServiceHpa, ServiceKind, mig_share

# KServe labels an InferenceService's pods (and the Deployment of its predictor, in raw mode).
INFERENCESERVICE_LABEL = "serving.kserve.io/inferenceservice"
COMPONENT_LABEL = "component"
DEPLOYMENT_MODE = "serving.kserve.io/deploymentMode"
KSERVE_GROUP, KSERVE_VERSION, INFERENCESERVICES = "serving.kserve.io", "v1beta1", "inferenceservices"


class _Part(Struct, frozen=True, gc=False):
    """Fields absent from the JSON are ``None``."""


class Expression(_Part):
    key: Any = None
    operator: Any = None
    values: list[Any] | None = None


class LabelSelector(_Part):
    matchLabels: dict[str, Any] | None = None
    matchExpressions: list[Expression] | None = None


class WorkloadSpec(_Part):
    replicas: Any = None
    selector: LabelSelector | None = None
    template: schema.PodTemplate | None = None
    updateStrategy: Any = None


class WorkloadStatus(_Part):
    replicas: Any = None
    readyReplicas: Any = None
    availableReplicas: Any = None
    updatedReplicas: Any = None
    currentReplicas: Any = None
    observedGeneration: Any = None
    currentRevision: Any = None
    updateRevision: Any = None
    conditions: list[schema.Condition] | None = None


class Workload(_Part):
    metadata: schema.Metadata
    spec: WorkloadSpec | None = None
    status: WorkloadStatus | None = None


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class Selector:
    """A label selector: ``matchLabels`` and ``matchExpressions`` (In, NotIn, Exists, DoesNotExist)."""

    labels: tuple[tuple[str, str], ...]
    expressions: tuple[tuple[str, str, frozenset[str]], ...] = ()

    def matches(self, labels: Mapping[str, Any]) -> bool:
        if not self.labels and not self.expressions:
            return False  # an empty selector selects everything; no controller has one
        for key, value in self.labels:
            if labels.get(key) != value:
                return False
        for key, operator, values in self.expressions:
            found = labels.get(key)
            if ((operator == "In" and found not in values) or (operator == "NotIn" and found in values)
                    or (operator == "Exists" and key not in labels) or (operator == "DoesNotExist" and key in labels)):
                return False
        return True


@dataclass(frozen=True, slots=True)
class WorkloadRecord:
    """What a Deployment, StatefulSet or InferenceService itself says; the compose adds its pods."""

    kind: ServiceKind
    uid: str
    namespace: str
    name: str
    created: float | None
    labels: tuple[tuple[str, str], ...]
    selector: Selector
    desired: int
    ready: int | None  # None: count the ready pods
    available: int | None
    per_replica: float  # GPUs a replica asks for (a MIG device as its compute share); 0: the pods say
    mig_profile: str | None
    image: str
    rollout: Rollout
    rollout_message: str
    inference_service: str | None = None  # the InferenceService this Deployment runs (KServe's label)


@dataclass(frozen=True, slots=True)
class HpaRecord:
    namespace: str
    target_kind: str
    target_name: str
    hpa: ServiceHpa


@dataclass(frozen=True, slots=True)
class ReplicaRecord:
    """A pod that holds GPUs: what the job mapping reads of it, and what a service needs more."""

    pod: PodRecord
    labels: Mapping[str, Any]
    ready: bool
    started: float | None
    gpus: float
    mig_profile: str | None


# --------------------------------------------------------------------------- small readers


def _int(value: Any, default: int | None = 0) -> int | None:
    if isinstance(value, bool) or value is None:
        return default
    if isinstance(value, int):
        return value
    raise ValueError(f"not a count: {value!r}")


def gpu_share(devices: Mapping[str, int]) -> tuple[float, str | None]:
    """GPUs a pod holds, a MIG device counting as its compute share, and its main MIG profile."""
    count, profile = gpu_request(devices)
    if profile is None:
        return float(count), None
    return sum(n * mig_share(p) for p, n in devices.items() if p), profile


def selector_record(selector: LabelSelector | None) -> Selector:
    if selector is None:
        return Selector(())
    labels = tuple(sorted((str(k), str(v)) for k, v in (selector.matchLabels or {}).items()))
    expressions = tuple((str(e.key), str(e.operator), frozenset(str(v) for v in e.values or ()))
                        for e in selector.matchExpressions or ())
    return Selector(labels, expressions)


def _labels(meta: schema.Metadata) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in (meta.labels or {}).items()))


def _first_image(spec: schema.PodSpec) -> str:
    return next((c.image for c in spec.containers or () if isinstance(c.image, str)), "")


def _condition(status: WorkloadStatus, kind: str) -> schema.Condition | None:
    return next((c for c in status.conditions or () if c.type == kind), None)


# --------------------------------------------------------------------------- rollouts


def deployment_rollout(name: str, generation: int | None, desired: int, status: WorkloadStatus) -> tuple[Rollout, str]:
    """Where a Deployment's rollout stands, as ``kubectl rollout status`` says it: stalled when its
    Progressing condition says ``ProgressDeadlineExceeded``, else by its replica counts."""
    progressing = _condition(status, "Progressing")
    if progressing is not None and progressing.reason == "ProgressDeadlineExceeded":
        return Rollout.STALLED, str(progressing.message or f'deployment "{name}" exceeded its progress deadline')
    observed = _int(status.observedGeneration, None)
    if generation is not None and observed is not None and observed < generation:
        return Rollout.PROGRESSING, "Waiting for deployment spec update to be observed..."
    updated, replicas = _int(status.updatedReplicas) or 0, _int(status.replicas) or 0
    available = _int(status.availableReplicas) or 0
    waiting = f'Waiting for deployment "{name}" rollout to finish: '
    if updated < desired:
        return Rollout.PROGRESSING, f"{waiting}{updated} out of {desired} new replicas have been updated..."
    if replicas > updated:
        return Rollout.PROGRESSING, f"{waiting}{replicas - updated} old replicas are pending termination..."
    if available < updated:
        return Rollout.PROGRESSING, f"{waiting}{available} of {updated} updated replicas are available..."
    return Rollout.COMPLETE, str(progressing.message or "") if progressing is not None else ""


def statefulset_rollout(generation: int | None, desired: int, spec: WorkloadSpec,
                        status: WorkloadStatus) -> tuple[Rollout, str]:
    """Where a StatefulSet's rolling update stands, in ``kubectl rollout status`` words."""
    strategy = spec.updateStrategy if isinstance(spec.updateStrategy, Mapping) else {}
    if strategy.get("type") == "OnDelete":
        return Rollout.UNKNOWN, "the OnDelete update strategy: pods are replaced only when deleted"
    observed = _int(status.observedGeneration, None)
    if generation is not None and observed is not None and observed < generation:
        return Rollout.PROGRESSING, "Waiting for statefulset spec update to be observed..."
    ready = _int(status.readyReplicas) or 0
    if ready < desired:
        return Rollout.PROGRESSING, f"Waiting for {desired - ready} pods to be ready..."
    if status.updateRevision and status.updateRevision != status.currentRevision:
        return Rollout.PROGRESSING, (f"waiting for statefulset rolling update to complete "
                                     f"{_int(status.updatedReplicas) or 0} pods at revision {status.updateRevision}...")
    return Rollout.COMPLETE, ""


# --------------------------------------------------------------------------- objects → records


def workload_record(kind: ServiceKind, obj: Mapping[str, Any]) -> WorkloadRecord | None:
    """An apps/v1 Deployment or StatefulSet; None when its pods ask for no GPU.

    Raises:
        KeyError, TypeError, ValueError: an object of a shape that cannot be read.
    """
    workload = schema.convert(obj, Workload)
    meta, spec = workload.metadata, workload.spec or WorkloadSpec()
    status = workload.status or WorkloadStatus()
    template = spec.template.spec if spec.template is not None and spec.template.spec is not None else None
    devices = pod_devices(template) if template is not None else {}
    if not devices:
        return None
    per_replica, profile = gpu_share(devices)
    desired = _int(spec.replicas, 1) or 0
    generation = _int(meta.generation, None)
    if kind is ServiceKind.DEPLOYMENT:
        rollout, message = deployment_rollout(meta.name, generation, desired, status)
    else:
        rollout, message = statefulset_rollout(generation, desired, spec, status)
    labels = meta.labels or {}
    return WorkloadRecord(
        kind=kind, uid=meta.uid, namespace=meta.namespace or "default", name=meta.name,
        created=parse_time(meta.creationTimestamp), labels=_labels(meta), selector=selector_record(spec.selector),
        desired=desired, ready=_int(status.readyReplicas), available=_int(status.availableReplicas),
        per_replica=per_replica, mig_profile=profile, image=_first_image(template or schema.EMPTY_POD_SPEC),
        rollout=rollout, rollout_message=message,
        inference_service=str(labels[INFERENCESERVICE_LABEL]) if labels.get(INFERENCESERVICE_LABEL) else None,
    )


def deployment_record(obj: Mapping[str, Any]) -> WorkloadRecord | None:
    return workload_record(ServiceKind.DEPLOYMENT, obj)


def statefulset_record(obj: Mapping[str, Any]) -> WorkloadRecord | None:
    return workload_record(ServiceKind.STATEFULSET, obj)


def _predictor_containers(predictor: Mapping[str, Any]) -> list[schema.Container]:
    """The containers of a predictor: its ``containers``, and its ``model`` (or framework) spec,
    each of which is the serving container itself."""
    found = [schema.convert(c, schema.Container) for c in predictor.get("containers") or () if isinstance(c, Mapping)]
    for key, value in predictor.items():
        if key != "containers" and isinstance(value, Mapping) and ("resources" in value or key == "model"):
            found.append(schema.convert({"image": value.get("image"), "resources": value.get("resources")},
                                        schema.Container))
    return found


def _inference_rollout(status: Mapping[str, Any]) -> tuple[Rollout, str]:
    conditions = {c.get("type"): c for c in status.get("conditions") or () if isinstance(c, Mapping)}
    ready = conditions.get("Ready")
    if ready is None:
        return Rollout.UNKNOWN, ""
    if ready.get("status") == "True":
        return Rollout.COMPLETE, ""
    predictor = conditions.get("PredictorReady") or {}
    if predictor.get("reason") == "ProgressDeadlineExceeded":
        return Rollout.STALLED, str(predictor.get("message") or "the predictor exceeded its progress deadline")
    waiting = next((c for c in conditions.values() if c.get("status") != "True" and c.get("message")), ready)
    return Rollout.PROGRESSING, str(waiting.get("message") or waiting.get("reason") or "")


def inference_service_record(obj: Mapping[str, Any]) -> WorkloadRecord:
    """A serving.kserve.io/v1beta1 InferenceService: its predictor's replicas and GPUs (0 when
    its runtime asks for them: its pods say), selected by KServe's pod labels.

    Raises:
        KeyError, TypeError, ValueError: an object of a shape that cannot be read.
    """
    meta = schema.convert(obj["metadata"], schema.Metadata)
    spec = obj.get("spec") if isinstance(obj.get("spec"), Mapping) else {}
    predictor = spec.get("predictor") if isinstance(spec.get("predictor"), Mapping) else {}
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    devices: dict[str, int] = {}
    image = ""
    for container in _predictor_containers(predictor):
        for key, count in container_devices(container).items():
            devices[key] = devices.get(key, 0) + count
        image = image or (container.image if isinstance(container.image, str) else "")
    model = predictor.get("model") if isinstance(predictor.get("model"), Mapping) else {}
    if not image and model:
        fmt = model.get("modelFormat") if isinstance(model.get("modelFormat"), Mapping) else {}
        image = " ".join(str(p) for p in (fmt.get("name"), model.get("storageUri")) if p)
    per_replica, profile = gpu_share(devices)
    rollout, message = _inference_rollout(status)
    selector = Selector(((COMPONENT_LABEL, "predictor"), (INFERENCESERVICE_LABEL, meta.name)))
    return WorkloadRecord(
        kind=ServiceKind.INFERENCESERVICE, uid=meta.uid, namespace=meta.namespace or "default", name=meta.name,
        created=parse_time(meta.creationTimestamp), labels=_labels(meta), selector=selector,
        desired=_int(predictor.get("minReplicas"), 1) or 0, ready=None, available=None, per_replica=per_replica,
        mig_profile=profile, image=image, rollout=rollout, rollout_message=message,
    )


def replica_record(obj: Mapping[str, Any] | schema.Pod) -> ReplicaRecord | None:
    """A core/v1 Pod that holds GPUs and has not finished; None for any other pod.

    Raises:
        KeyError, TypeError, ValueError: an object of a shape that cannot be read.
    """
    pod = schema.convert(obj, schema.Pod)
    devices = pod_devices(pod.spec or schema.EMPTY_POD_SPEC)
    if not devices:
        return None
    record = pod_record(pod)
    if record.terminated:
        return None
    status = pod.status or schema.EMPTY_POD_STATUS
    ready = any(c.type == "Ready" and c.status == "True" for c in status.conditions or ())
    gpus, profile = gpu_share(devices)
    return ReplicaRecord(record, dict(pod.metadata.labels or {}), ready, parse_time(status.startTime), gpus, profile)
