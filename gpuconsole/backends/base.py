"""The three interfaces every backend implements, with capability flags and typed errors.

A backend is a thin, stateless translator between one protocol and :mod:`gpuconsole.model`.
It never imports ``gpuconsole.core`` or ``textual``; the Hub in ``core`` polls it in a worker
thread with a timeout, so a backend may block, but must raise one of the errors below rather
than anything protocol-specific.
"""

from __future__ import annotations

import enum
from typing import Protocol, runtime_checkable

from gpuconsole.model import CloudReading, GpuReading, JobsReading


class Capability(str, enum.Enum):
    """What a backend can do beyond being polled."""

    MIG = "mig"
    PROCESSES = "processes"
    HISTORY = "history"
    KILL_PROCESS = "kill-process"
    SUBMIT_JOB = "submit-job"
    DELETE_JOB = "delete-job"
    SUSPEND_CRONJOB = "suspend-cronjob"
    LAUNCH = "launch"
    STOP = "stop"
    TERMINATE = "terminate"
    SPOT = "spot"
    PRICES = "prices"


class BackendError(Exception):
    """A backend could not answer. The message is shown to the user as one line."""


class BackendUnavailable(BackendError):
    """The backend is not configured or its driver is missing; ``hint`` says how to set it up."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


class BackendTimeout(BackendError):
    """The backend did not answer in time."""


class BackendPermissionDenied(BackendError):
    """The credentials in use may not do this."""


class NotSupported(BackendError):
    """The backend has no such capability."""


@runtime_checkable
class GpuSource(Protocol):
    """Live GPU telemetry (NVML on a GPU host, DCGM/Prometheus for a fleet, the simulator)."""

    name: str
    capabilities: frozenset[Capability]

    def poll_gpus(self) -> GpuReading:
        """Read every GPU once. May block; raises :class:`BackendError`."""
        ...

    def close(self) -> None:
        """Release drivers and connections. Called once on exit."""
        ...


@runtime_checkable
class JobBackend(Protocol):
    """Kubernetes-style job queues."""

    name: str
    capabilities: frozenset[Capability]

    def poll_jobs(self) -> JobsReading:
        """List jobs, CronJobs and GPU nodes once. May block; raises :class:`BackendError`."""
        ...

    def close(self) -> None:
        ...


@runtime_checkable
class CloudBackend(Protocol):
    """Cloud GPU instances."""

    name: str
    capabilities: frozenset[Capability]

    def poll_instances(self) -> CloudReading:
        """List instances once. May block; raises :class:`BackendError`."""
        ...

    def close(self) -> None:
        ...
