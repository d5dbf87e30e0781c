"""What a user reads of the simulated inference pool: a service described, a replica's log, and
each service's figures over the last hour (the pool keeps them, as a Prometheus would)."""

from __future__ import annotations

import math
from typing import Any

from gpuconsole.backends.kube.describe import EventLine, describe_text
from gpuconsole.backends.sim.job_api import stamp
from gpuconsole.backends.sim.serving_pool import ServingPool, SimService
from gpuconsole.backends.sim.serving_readings import is_ready

HISTORY_FIGURES = {"rps": 1, "p99_ms": 2, "tokens_per_s": 3, "gpu_util": 4}


def _resources(service: SimService) -> dict[str, Any]:
    spec = service.spec
    return {f"nvidia.com/mig-{spec.mig_profile}": 1} if spec.mig_profile else {"nvidia.com/gpu": spec.gpus}


def service_object(service: SimService, now: float) -> dict[str, Any]:
    spec = service.spec
    ready = sum(1 for r in service.replicas if is_ready(r, now))
    container = {"name": "server", "image": spec.image, "resources": {"limits": _resources(service)},
                 "ports": [{"containerPort": 8000, "name": "http"}]}
    return {"apiVersion": "apps/v1", "kind": spec.kind,
            "metadata": {"name": spec.name, "namespace": spec.namespace, "uid": service.uid,
                         "creationTimestamp": stamp(service.created),
                         "labels": {"app.kubernetes.io/name": spec.name}},
            "spec": {"replicas": service.desired,
                     "selector": {"matchLabels": {"app.kubernetes.io/name": spec.name}},
                     "template": {"metadata": {"labels": {"app.kubernetes.io/name": spec.name},
                                               "annotations": {"prometheus.io/scrape": str(bool(spec.family)).lower()}},
                                  "spec": {"containers": [container]}}},
            "status": {"replicas": len(service.replicas), "readyReplicas": ready, "availableReplicas": ready}}


def _events(service: SimService) -> list[EventLine]:
    spec = service.spec
    events = []
    for replica in service.replicas:
        if replica.pending_reason:
            events.append(EventLine("Warning", "FailedScheduling", replica.started, "default-scheduler",
                                    replica.pending_reason, about=f"pod/{replica.name}"))
        elif replica.started is not None:
            events.append(EventLine("Normal", "Scheduled", replica.started, "default-scheduler",
                                    f"Successfully assigned {spec.namespace}/{replica.name} to "
                                    f"{replica.node.node_name if replica.node else '?'}", about=f"pod/{replica.name}"))
    return events


def describe(pool: ServingPool, namespace: str, name: str, now: float) -> str:
    """The service as YAML, then its pods' events (KeyError for one the pool does not hold)."""
    service = pool.service(namespace, name)
    return describe_text(service_object(service, now), _events(service), now)


def log_lines(pool: ServingPool, namespace: str, pod: str, now: float, tail: int) -> list[str]:
    """A replica's last log lines, as its server writes them (KeyError for an unknown pod)."""
    for service in pool.services:
        for replica in service.replicas:
            if service.spec.namespace == namespace and replica.name == pod:
                return _server_log(service, replica.started or now, now)[-tail:] if tail else []
    raise KeyError(f"no pod {namespace}/{pod}")


def _server_log(service: SimService, started: float, now: float) -> list[str]:
    spec = service.spec
    lines = [f"{stamp(started)} INFO starting {spec.image} for {spec.name}"]
    if spec.family == "vllm":
        lines.append(f"{stamp(started + 40)} INFO vLLM API server listening on 0.0.0.0:8000")
    elif spec.family == "triton":
        lines.append(f"{stamp(started + 10)} I model '{spec.name}' version 1 loaded; serving on :8000, metrics on :8002")
    else:
        lines.append(f"{stamp(started + 15)} INFO notebook server ready (no metrics endpoint)")
    step = max(60.0, (now - started) / 40.0)
    t = started + 60.0
    load = service.load
    while t <= now:
        lines.append(f"{stamp(t)} INFO {load.served:.1f} req/s, {load.backlog:.0f} waiting")
        t += step
    return lines


def history(pool: ServingPool, namespace: str, pods: tuple[str, ...], figure: str, since: float,
            until: float) -> tuple[tuple[float, float], ...]:
    """One figure of the service holding ``pods`` between ``since`` and ``until``."""
    column = HISTORY_FIGURES.get(figure)
    if column is None:
        raise ValueError(f"no history of {figure!r}")
    wanted = set(pods)
    for service in pool.services:
        if service.spec.namespace == namespace and wanted & {r.name for r in service.replicas}:
            return tuple((row[0], row[column]) for row in service.history
                         if since <= row[0] <= until and not math.isnan(row[column]))
    return ()
