"""Inference services through the core: scale, rollout restart, a replica's log, describe, history.

The UI, the command line and the autopilot change services only through :class:`ServiceOps`
(``console.services.service_ops``). A scale or a restart is an
:class:`~gpuconsole.core.ops.actions.ActionRequest` run by :func:`~gpuconsole.core.ops.actions.run_action`:
the login's role and namespaces are checked, then the cluster's RBAC decides (a 403 is one
``denied by the cluster`` line), and the audit log records it either way. Every method blocks
(it calls the cluster): call it from a worker thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from gpuconsole.backends.base import BackendError, ServiceControl, ServiceHistory
from gpuconsole.core.ops.actions import (
    ActionError,
    ActionKind,
    ActionLog,
    ActionRequest,
    ActionResult,
    autopilot_confirmation,
    log_lines,
    one_line,
    run_action,
)
from gpuconsole.model import Service

T = TypeVar("T")

NOT_A_CLUSTER = "this console cannot change services (no Kubernetes cluster or demo is connected)"
NO_HISTORY = "this services source keeps no history (the charts need Prometheus or the demo)"
MAX_REPLICAS = 1000
LOG_TAIL = 1000


class ServiceOps:
    """What the console can do with the inference services of the cluster it watches.

    Args:
        backend: returns the services source of now (the simulator, the Kubernetes adapter, a stand-in).
        clock: the console's clock.
        log: where every action's result is recorded.
    """

    def __init__(self, backend: Callable[[], Any], clock: Callable[[], float] = time.time,
                 log: ActionLog | None = None) -> None:
        self._backend = backend
        self.clock = clock
        self.log = log if log is not None else ActionLog()

    @property
    def control(self) -> ServiceControl | None:
        backend = self._backend()
        return backend if isinstance(backend, ServiceControl) else None

    @property
    def available(self) -> bool:
        return self.control is not None

    def scale(self, service: Service | tuple[str, str, str], replicas: int, *, rule: str | None = None,
              reason: str = "") -> ActionResult:
        """Set a service's replicas (the ``scale`` subresource).

        Args:
            service: the service, or ``(kind, namespace, name)``.
            rule: the autopilot rule that decided it (the audit names ``autopilot:<rule>``).
            reason: why, for the record (a rule's figures).

        Raises:
            ActionError: a bad count, denied (role, namespace, RBAC), or the cluster failed.
        """
        kind, namespace, name, current = _named(service)
        if not 0 <= replicas <= MAX_REPLICAS:
            raise ActionError(f"replicas must be a whole number from 0 to {MAX_REPLICAS}, got {replicas}")
        params: list[tuple[str, str]] = [("kind", kind), ("namespace", namespace), ("replicas", str(replicas))]
        if current is not None:
            params.append(("from", str(current)))
        confirmation = ""
        if rule is not None:
            params.append(("rule", rule))
            confirmation = autopilot_confirmation(rule)
        if reason:
            params.append(("figures" if rule is not None else "reason", reason))
        request = ActionRequest(ActionKind.SCALE_SERVICE, f"{namespace}/{name}", confirmation=confirmation,
                                params=tuple(params))

        def do() -> str:
            self._control().scale_service(kind, namespace, name, replicas)
            return f"scaled {kind} {namespace}/{name} to {replicas} replica{'s' if replicas != 1 else ''}"

        return run_action(request, do, self.log, self.clock)

    def restart(self, service: Service | tuple[str, str, str]) -> ActionResult:
        """``kubectl rollout restart``: every replica replaced, a few at a time."""
        kind, namespace, name, _current = _named(service)
        request = ActionRequest(ActionKind.RESTART_SERVICE, f"{namespace}/{name}",
                                params=(("kind", kind), ("namespace", namespace)))

        def do() -> str:
            self._control().restart_service(kind, namespace, name)
            return f"restarted {kind} {namespace}/{name}"

        return run_action(request, do, self.log, self.clock)

    def logs(self, namespace: str, pod: str, *, tail_lines: int = LOG_TAIL, follow: bool = False,
             stop: threading.Event | None = None) -> Iterator[str]:
        """A replica's log lines as they come; a failure ends them with :class:`ActionError`."""
        control = self._call(self._control)
        yield from log_lines(control.service_logs(namespace, pod, tail_lines=tail_lines, follow=follow, stop=stop))

    def describe(self, kind: str, namespace: str, name: str) -> str:
        """The service (``kind`` ``Deployment`` …) as YAML, then its recent events."""
        return self._call(lambda: self._control().describe_service(kind, namespace, name))

    def history(self, service: Service, figure: str, seconds: float = 3600.0,
                step: float = 30.0) -> tuple[tuple[float, float], ...]:
        """``(time, value)`` of one figure of ``service`` over the last ``seconds``."""
        backend = self._backend()
        if not isinstance(backend, ServiceHistory):
            raise ActionError(NO_HISTORY)
        now = self.clock()
        pods = tuple(r.pod for r in service.replicas)
        return self._call(lambda: backend.service_history(service.namespace, pods, figure, now - seconds, now, step))

    def _control(self) -> ServiceControl:
        control = self.control
        if control is None:
            raise BackendError(NOT_A_CLUSTER)
        return control

    def _call(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except BackendError as exc:
            raise ActionError(one_line(exc)) from exc


def _named(service: Service | tuple[str, str, str]) -> tuple[str, str, str, int | None]:
    if isinstance(service, Service):
        return service.kind.value, service.namespace, service.name, service.replicas_desired
    kind, namespace, name = service
    return kind, namespace, name, None
