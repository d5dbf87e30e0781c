"""GPU training jobs as Kubernetes manifests: a :class:`JobRequest` into the objects the API
server receives (:func:`manifests`) and the YAML the user reviews (:func:`to_yaml`). Pure: no I/O.

The request and its limits live in :mod:`job_request`, the checks in :mod:`job_checks`; their
names are re-exported here.
"""

from __future__ import annotations

from typing import Any

from gpuconsole.core.ops.job_checks import from_form, memory_bytes, parse_command, parse_env, validate
from gpuconsole.core.ops.job_request import (
    COMPLETION_INDEX,
    CONCURRENCY_POLICIES,
    CONTAINER,
    CRON_MACROS,
    CRONJOB_NAME_MAX,
    DEFAULT_IMAGE,
    DRIVER_CAPABILITIES,
    GPU_RESOURCE,
    INSTANCE_LABEL,
    JOB_NAME_MAX,
    MANAGED_BY,
    MASTER_PORT,
    QUEUE_LABEL,
    MAX_BACKOFF,
    MAX_GPUS,
    MAX_MIG_DEVICES,
    MAX_WORKERS,
    MEDIA_PROFILES,
    MIG_PROFILES,
    MIG_RESOURCE_PREFIX,
    NCCL_DEBUG_LEVELS,
    PRESETS,
    TORCHRUN_VARS,
    JobRequest,
    cron_expression,
    next_runs,
)
from gpuconsole.core.ops.queue_manifest import with_volcano

__all__ = [
    "COMPLETION_INDEX", "CONCURRENCY_POLICIES", "CONTAINER", "CRONJOB_NAME_MAX", "CRON_MACROS", "DEFAULT_IMAGE",
    "DRIVER_CAPABILITIES", "GPU_RESOURCE", "INSTANCE_LABEL", "JOB_NAME_MAX", "MANAGED_BY", "MASTER_PORT",
    "MAX_BACKOFF", "MAX_GPUS", "MAX_MIG_DEVICES", "MAX_WORKERS", "MEDIA_PROFILES", "MIG_PROFILES",
    "MIG_RESOURCE_PREFIX", "NCCL_DEBUG_LEVELS", "PRESETS", "TORCHRUN_VARS", "JobRequest", "cron_expression",
    "from_form", "job_spec", "manifests", "memory_bytes", "next_runs", "parse_command", "parse_env",
    "pod_template", "to_yaml", "validate",
]



def _labels(req: JobRequest) -> dict[str, str]:
    labels = {MANAGED_BY[0]: MANAGED_BY[1]}
    if req.owner:
        labels["owner"] = req.owner
    labels.update(req.labels)
    return labels


def _command(req: JobRequest) -> list[str] | None:
    if isinstance(req.command, str):
        return ["/bin/sh", "-c", req.command] if req.command.strip() else None
    return list(req.command) or None


def _env(req: JobRequest) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = []
    if req.distributed:
        # An Indexed Job whose headless Service is the pods' subdomain: pod i is <job>-<i>.<job>,
        # and NODE_RANK is its completion index. A CronJob's runs are named by the controller,
        # so there the master's address is built from the pod's job-name label.
        if req.kind == "CronJob":
            env.append({"name": "JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['job-name']"}}})
            master = f"$(JOB_NAME)-0.{req.name}"
        else:
            master = f"{req.name}-0.{req.name}"
        env += [
            {"name": "MASTER_ADDR", "value": master},
            {"name": "MASTER_PORT", "value": str(MASTER_PORT)},
            {"name": "WORLD_SIZE", "value": str(req.workers)},
            {"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}},
            {"name": "NPROC_PER_NODE", "value": str(req.gpus if req.gpus and not req.mig_profile else 1)},
        ]
    given = dict(req.presets)
    env += [{"name": name, "value": given[name]} for name in PRESETS if given.get(name)]
    env += [{"name": name, "value": value} for name, value in req.env]
    return env


def _resources(req: JobRequest) -> dict[str, dict[str, Any]]:
    # GPUs are limits (an extended resource is asked for by its limit); CPU is a request only
    # (a CPU limit throttles data loading); memory is both.
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    if req.cpu:
        requests["cpu"] = req.cpu
    if req.memory:
        requests["memory"] = req.memory
        limits["memory"] = req.memory
    if req.mig_profile:
        limits[f"{MIG_RESOURCE_PREFIX}{req.mig_profile}"] = req.gpus
    elif req.gpus:
        limits[GPU_RESOURCE] = req.gpus
    out: dict[str, dict[str, Any]] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def pod_template(req: JobRequest) -> dict[str, Any]:
    """The pod template of each worker."""
    container: dict[str, Any] = {"name": CONTAINER, "image": req.image.strip()}
    command = _command(req)
    if command:
        container["command"] = command
    env = _env(req)
    if env:
        container["env"] = env
    resources = _resources(req)
    if resources:
        container["resources"] = resources
    # A memory-backed /dev/shm: data loaders and NCCL need more than the default 64 MiB.
    container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    # Retries are the Job's backoffLimit, so a crashed run shows as a failed pod.
    spec: dict[str, Any] = {"restartPolicy": "Never"}
    if req.distributed:
        spec["subdomain"] = req.name
    if req.node_selector:
        spec["nodeSelector"] = dict(req.node_selector)
    spec["containers"] = [container]
    spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    labels = _labels(req)
    if req.distributed:
        labels[INSTANCE_LABEL] = req.name
    return {"metadata": {"labels": labels}, "spec": spec}


def job_spec(req: JobRequest) -> dict[str, Any]:
    """The ``spec`` of the Job (of each run, for a CronJob)."""
    spec: dict[str, Any] = {"backoffLimit": req.backoff_limit}
    if req.distributed:
        spec.update(completionMode="Indexed", completions=req.workers, parallelism=req.workers)
    if req.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = req.active_deadline_seconds
    if req.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = req.ttl_seconds_after_finished
    spec["template"] = pod_template(req)
    return spec


def manifests(req: JobRequest) -> list[dict[str, Any]]:
    """The objects to create, in order: the Job or CronJob, then a distributed job's Service."""
    meta = {"name": req.name, "namespace": req.namespace, "labels": _labels(req)}
    queued = {**_labels(req), QUEUE_LABEL: req.queue} if req.queue else _labels(req)  # the Job's, not its pods'
    if req.kind == "CronJob":
        workload: dict[str, Any] = {
            "apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta,
            "spec": {
                "schedule": " ".join(req.schedule.split()),
                "concurrencyPolicy": req.concurrency_policy,
                "successfulJobsHistoryLimit": 3,
                "failedJobsHistoryLimit": 1,
                "jobTemplate": {"metadata": {"labels": queued}, "spec": job_spec(req)},
            },
        }
    else:
        workload = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {**meta, "labels": queued},
                    "spec": job_spec(req)}
    out = [workload]
    if req.distributed:
        out.append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": req.name, "namespace": req.namespace, "labels": _labels(req)},
            "spec": {
                "clusterIP": "None",
                "selector": {INSTANCE_LABEL: req.name},
                "publishNotReadyAddresses": True,
                "ports": [{"name": "torchrun", "port": MASTER_PORT, "targetPort": MASTER_PORT}],
            },
        })
    return with_volcano(out, req)


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """The manifests as one YAML stream (``---`` between objects), keys in Kubernetes order."""
    import yaml  # only when YAML is shown: it is not needed to start

    return yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False, width=100)
