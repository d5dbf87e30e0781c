"""An ``autoscaling/v2`` HorizontalPodAutoscaler read as the service it scales and its metrics in words.

Each metric reads as ``kubectl get hpa`` shows it, its current value before its target where the
HPA has measured it: ``cpu 45%/80%``, ``pods vllm:num_requests_waiting 4/10``,
``external queue_depth 30``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuconsole.backends.kube.service_records import HpaRecord
from gpuconsole.model import ServiceHpa

_SOURCES = {"Resource": "resource", "Pods": "pods", "Object": "object", "External": "external",
            "ContainerResource": "containerResource"}


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _amount(value: Mapping[str, Any]) -> str | None:
    """A target or current value: ``80%`` for a utilization, else the quantity as written."""
    if value.get("averageUtilization") is not None:
        return f"{value['averageUtilization']}%"
    for key in ("averageValue", "value"):
        if value.get(key) is not None:
            return str(value[key])
    return None


def _metric_name(kind: str, source: Mapping[str, Any]) -> str:
    if kind in ("Resource", "ContainerResource"):
        name = str(source.get("name") or "?")
        return f"{name} of {source['container']}" if kind == "ContainerResource" and source.get("container") else name
    name = str(_map(source.get("metric")).get("name") or "?")
    if kind == "Object":
        described = _map(source.get("describedObject"))
        return f"{str(described.get('kind') or '').lower()}/{described.get('name') or '?'} {name}"
    return f"{kind.lower()} {name}"


def metric_texts(spec_metrics: Any, current_metrics: Any) -> tuple[str, ...]:
    """Each metric of ``spec.metrics`` in words, with its ``status.currentMetrics`` value."""
    current: dict[tuple[str, str], str] = {}
    for metric in current_metrics if isinstance(current_metrics, list) else ():
        kind = str(_map(metric).get("type") or "")
        source = _map(_map(metric).get(_SOURCES.get(kind, "")))
        amount = _amount(_map(source.get("current")))
        if amount is not None:
            current[(kind, _metric_name(kind, source))] = amount
    texts = []
    for metric in spec_metrics if isinstance(spec_metrics, list) else ():
        kind = str(_map(metric).get("type") or "")
        source = _map(_map(metric).get(_SOURCES.get(kind, "")))
        if not source:
            continue
        name = _metric_name(kind, source)
        target = _amount(_map(source.get("target"))) or "?"
        now = current.get((kind, name))
        texts.append(f"{name} {now}/{target}" if now is not None else f"{name} {target}")
    return tuple(texts)


def hpa_record(obj: Mapping[str, Any]) -> HpaRecord:
    """Read an autoscaling/v2 HorizontalPodAutoscaler.

    Raises:
        KeyError, TypeError, ValueError: an object of a shape that cannot be read.
    """
    meta = obj["metadata"]
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str):
        raise ValueError("metadata without a name")
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    target = _map(spec.get("scaleTargetRef"))
    high = spec.get("maxReplicas")
    if not isinstance(high, int) or isinstance(high, bool):
        raise ValueError(f"maxReplicas is not a count: {high!r}")

    def count(value: Any) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    hpa = ServiceHpa(name=meta["name"], min_replicas=count(spec.get("minReplicas")), max_replicas=high,
                     current_replicas=count(status.get("currentReplicas")),
                     desired_replicas=count(status.get("desiredReplicas")),
                     metrics=metric_texts(spec.get("metrics"), status.get("currentMetrics")))
    return HpaRecord(str(meta.get("namespace") or "default"), str(target.get("kind") or ""),
                     str(target.get("name") or ""), hpa)
