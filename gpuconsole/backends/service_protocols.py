"""What a source of inference services may do besides listing them: change a service (scale,
rollout restart), read a replica's log and the service's description, and keep its figures'
history for the service screen's charts. Re-exported by :mod:`gpuconsole.backends.base`."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Protocol, runtime_checkable


@runtime_checkable
class ServiceControl(Protocol):
    """Changes to inference services (Deployments, StatefulSets, InferenceServices) and what a
    user reads of them. ``kind`` is the service's kind (``Deployment`` …). Every method may block
    and raises :class:`BackendError` subclasses only (:class:`AuthorizationDenied` for a 403 from
    the cluster's RBAC, in its own words)."""

    def scale_service(self, kind: str, namespace: str, name: str, replicas: int) -> None:
        """Set the replicas through the ``scale`` subresource."""
        ...

    def restart_service(self, kind: str, namespace: str, name: str) -> None:
        """``kubectl rollout restart``: a new pod template annotation, so every pod is replaced."""
        ...

    def service_logs(self, namespace: str, pod: str, *, tail_lines: int = 1000, follow: bool = False,
                     stop: threading.Event | None = None) -> Iterator[str]:
        """The last lines of one replica's log (then each new one, with ``follow``)."""
        ...

    def describe_service(self, kind: str, namespace: str, name: str) -> str:
        """The object as YAML, then its recent events."""
        ...


@runtime_checkable
class ServiceHistory(Protocol):
    """A services source that keeps its figures' history (Prometheus ``query_range``, the
    simulator's own): ``(time, value)`` of one figure of one service, oldest first. ``figure``
    is ``rps``, ``p99_ms``, ``tokens_per_s`` or ``gpu_util``; ``pods`` the service's pods."""

    def service_history(self, namespace: str, pods: tuple[str, ...], figure: str, since: float, until: float,
                        step: float) -> tuple[tuple[float, float], ...]:
        ...
