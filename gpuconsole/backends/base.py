"""The three interfaces every backend implements, the optional features some have, typed errors.

A backend is a thin, stateless translator between one protocol and :mod:`gpuconsole.model`.
It never imports ``gpuconsole.core`` or ``textual``; the Hub in ``core`` polls it in a worker
thread with a timeout, so a backend may block, but must raise one of the errors below rather
than anything protocol-specific. A feature only some backends have (billing reports, a GPU
history, kubeconfig contexts, poll hints, …) is a ``runtime_checkable`` Protocol below, found
with ``isinstance``: the core asks, it never probes for attribute names.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Iterator
from typing import Any, Protocol, runtime_checkable

from gpuconsole.model import (
    CloudReading,
    CostLine,
    GpuReading,
    GpuSample,
    Instance,
    InstanceType,
    JobsReading,
    KeyPair,
    LaunchSpec,
    MachineImage,
    RegionPrice,
    SecurityGroup,
    SpotPrice,
    Subnet,
    Volume,
    Workload,
)
# What a services source may do (re-exported here, beside the other sources' protocols).
from gpuconsole.backends.service_protocols import ServiceControl as ServiceControl
from gpuconsole.backends.service_protocols import ServiceHistory as ServiceHistory
from gpuconsole.backends.cloud_protocols import RoleCredentials as RoleCredentials


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


class AuthorizationDenied(BackendPermissionDenied):
    """The system that owns the resource refused this identity this action (a cluster's RBAC):
    the action path records it as denied, in that system's own words."""


class NotSupported(BackendError):
    """The backend has no such capability."""


class BackendThrottled(BackendError):
    """The service asked us to slow down (EC2 ``RequestLimitExceeded``) even after retries."""


class CapacityError(BackendError):
    """No capacity for this type in this zone (EC2 ``InsufficientInstanceCapacity``)."""


class DryRunFailed(BackendError):
    """A ``DryRun=True`` request was refused; the message says why (permissions, parameters)."""


def one_line(exc: BaseException) -> str:
    """The first line of an error's message, or its type's name when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
class ProcessControl(Protocol):
    """A GPU source that can signal the processes it reports (NVML on this host, the simulator)."""

    def kill_process(self, gpu_uuid: str, pid: int, sig: int) -> str:
        """Send ``sig`` (SIGTERM or SIGKILL) to process ``pid`` seen on GPU ``gpu_uuid``; returns one
        line saying what was done. Raises :class:`BackendPermissionDenied` when the operating
        system refuses, :class:`BackendError` when the process is not (or no longer) there."""
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


@runtime_checkable
class Provisioner(Protocol):
    """A cloud that can list what it offers and launch and control instances.

    Every method may block and raises :class:`BackendError` subclasses only. ``region`` is always
    explicit: a console may watch several regions at once.
    """

    name: str
    regions: tuple[str, ...]

    def instance_types(self, region: str) -> tuple[InstanceType, ...]:
        """GPU instance types offered in ``region`` (``on_demand_price`` 0 where unknown)."""
        ...

    def on_demand_prices(self, regions: tuple[str, ...]) -> tuple[RegionPrice, ...]:
        """Linux on-demand prices of GPU types (the Pricing API where there is one)."""
        ...

    def spot_prices(self, region: str, instance_types: tuple[str, ...], since: float) -> tuple[SpotPrice, ...]:
        """Spot price history (Linux/UNIX) since ``since`` for the given types."""
        ...

    def offerings(self, region: str, instance_types: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        """Which availability zones offer each type: ``{type: (az, ...)}``."""
        ...

    def subnets(self, region: str) -> tuple[Subnet, ...]:
        ...

    def security_groups(self, region: str) -> tuple[SecurityGroup, ...]:
        ...

    def key_pairs(self, region: str) -> tuple[KeyPair, ...]:
        ...

    def default_image(self, region: str, workload: Workload) -> MachineImage:
        """The Deep Learning AMI for the region, from its public SSM parameter."""
        ...

    def launch(self, spec: LaunchSpec, *, dry_run: bool = False) -> tuple[Instance, ...]:
        """Launch ``spec``; with ``dry_run`` return ``()`` when EC2 says the request would pass.

        Raises:
            DryRunFailed: the dry run was refused.
            CapacityError: no capacity in the zone.
            BackendThrottled, BackendPermissionDenied, BackendError: as for any call.
        """
        ...

    def start(self, region: str, instance_id: str) -> None:
        ...

    def stop(self, region: str, instance_id: str) -> None:
        ...

    def reboot(self, region: str, instance_id: str) -> None:
        ...

    def terminate(self, region: str, instance_id: str) -> None:
        ...


@runtime_checkable
class QueueControl(Protocol):
    """A job's place in its queue (Kueue), before admission: raises :class:`BackendError` in one line."""

    def move_to_queue(self, namespace: str, name: str, queue: str) -> None:
        """Move a pending Job to another LocalQueue of its namespace."""
        ...

    def set_workload_active(self, namespace: str, name: str, active: bool) -> None:
        """Deactivate (or reactivate) a pending Job's Workload (``spec.active``)."""
        ...


@runtime_checkable
class JobControl(Protocol):
    """Changes to Kubernetes-style jobs: create from manifests, delete, suspend, trigger, read logs.

    Manifests are plain ``dict`` objects as ``kubectl apply`` would send them (``batch/v1`` Job and
    CronJob, ``v1`` Service). ``kind`` is ``"Job"`` or ``"CronJob"``. Every method may block and
    raises :class:`BackendError` subclasses only, with the API server's message in one line
    (:class:`BackendPermissionDenied` for 401/403, :class:`BackendTimeout` for no answer).
    """

    def submit(self, manifests: list[dict[str, Any]], *, dry_run: bool = False) -> list[str]:
        """Create each object in order; ``"Kind namespace/name"`` per object created.

        With ``dry_run`` the server checks every object (``dryRun=All``) and stores nothing.
        A Service that follows a Job or CronJob of the same name is owned by it, so deleting
        the workload removes the Service too.
        """
        ...

    def delete(self, kind: str, namespace: str, name: str) -> None:
        """Delete a Job or CronJob and what it owns (``propagationPolicy: Background``)."""
        ...

    def suspend(self, kind: str, namespace: str, name: str, suspended: bool) -> None:
        """Set ``spec.suspend`` (a merge patch). A suspended Job's pods are stopped."""
        ...

    def trigger(self, namespace: str, cronjob: str) -> str:
        """Run a CronJob now (``kubectl create job --from=cronjob/…``); the new Job's name."""
        ...

    def logs(self, namespace: str, pod: str, *, tail_lines: int = 1000, follow: bool = False,
             stop: threading.Event | None = None) -> Iterator[str]:
        """The last ``tail_lines`` lines of a pod's log; with ``follow``, then each new line until
        the container exits or ``stop`` is set."""
        ...

    def describe(self, kind: str, namespace: str, name: str) -> str:
        """The object as YAML, then its recent events (for a Job, its pods' too)."""
        ...


# ---------------------------------------------------------------------- optional features


@runtime_checkable
class IntervalHint(Protocol):
    """A source polled no faster than ``min_interval`` seconds (a rate-limited cloud API)."""

    min_interval: float


@runtime_checkable
class TimeoutHint(Protocol):
    """A source whose poll may take up to ``poll_timeout`` seconds (many regions, first lists)."""

    poll_timeout: float


@runtime_checkable
class SetupHint(Protocol):
    """A source nobody has set up: ``reason`` says what is missing, ``hint`` how to set it up."""

    reason: str
    hint: str


@runtime_checkable
class BillingReports(Protocol):
    """A cloud that reports its billed spend (Cost Explorer)."""

    name: str

    def cost_and_usage(self, start: float, end: float, group_by_tag: str | None = None) -> tuple[CostLine, ...]:
        """Billed spend between ``start`` and ``end``, per tag value of ``group_by_tag``."""
        ...


@runtime_checkable
class ResourceCosts(Protocol):
    """A cloud that bills per resource and says so: ``(resource id, UTC day, dollars)`` rows."""

    def resource_costs(self, start: float, end: float) -> tuple[tuple[str, str, float], ...]:
        ...


@runtime_checkable
class GpuHistory(Protocol):
    """A GPU source that keeps its own history (Prometheus: ``query_range``), where its
    capabilities include :attr:`Capability.HISTORY`."""

    name: str
    capabilities: frozenset[Capability]

    def history(self, uuid: str, since: float, until: float, step: float) -> tuple[GpuSample, ...]:
        ...


@runtime_checkable
class InstanceHistory(Protocol):
    """A cloud that can say when an instance ran: ``(time, running)`` changes (CloudTrail)."""

    def instance_history(self, region: str, instance_id: str, since: float,
                         until: float) -> tuple[tuple[float, bool], ...]:
        ...


@runtime_checkable
class VolumeListing(Protocol):
    """A cloud whose block volumes bill on their own (EBS), listed per region."""

    def volumes(self, region: str) -> tuple[Volume, ...]:
        ...


@runtime_checkable
class Regional(Protocol):
    """A cloud that watches a known set of regions."""

    regions: tuple[str, ...]


@runtime_checkable
class CredentialSwitching(Protocol):
    """A cloud that can make its calls with other credentials (a role session of ``[aws.roles]``)."""

    def use_credentials(self, refresh: Callable[[], dict[str, str]] | None) -> None:
        ...


@runtime_checkable
class CallerIdentity(Protocol):
    """A cloud that says whom its calls run as (Alibaba Cloud's STS GetCallerIdentity):
    ``account``, ``caller`` (the principal's ARN) and ``identity_type``."""

    name: str

    def caller_identity(self) -> dict[str, str]:
        ...


@runtime_checkable
class NamedProfile(Protocol):
    """A cloud that uses a named credentials profile (``None``: the default chain)."""

    profile: str | None


@runtime_checkable
class AccessKeys(Protocol):
    """A cloud that lists the login's access keys: ``(key id, created, active, used recently)``."""

    def access_keys(self) -> tuple[tuple[str, float, bool, bool], ...]:
        ...


@runtime_checkable
class KubeconfigContexts(Protocol):
    """A job source that reads a kubeconfig: which file, which context, which namespaces.

    Such a source can be rebuilt for another context of the same file (like ``kubectl config
    use-context``); the registry lists the contexts and builds the new source.
    """

    name: str
    kubeconfig: str | None
    context: str | None
    namespaces: tuple[str, ...]


@runtime_checkable
class OffersJobControl(Protocol):
    """A job source whose changes go through a :class:`JobControl` of its own (same API client)."""

    job_control: JobControl


@runtime_checkable
class AccessReview(Protocol):
    """A job control that asks the cluster what the credentials may do (SelfSubjectAccessReview)."""

    def review(self, verb: str, namespace: str) -> tuple[bool, str]:
        ...


@runtime_checkable
class CronJobSuspension(Protocol):
    """A job source that suspends a CronJob by its uid (the simulator)."""

    def suspend_cronjob(self, uid: str, suspended: bool = True) -> object:
        ...


@runtime_checkable
class Lease(Protocol):
    """Leadership shared by the replicas of one cluster (a ``coordination.k8s.io`` Lease)."""

    identity: str

    def acquire(self) -> bool:
        ...

    def holder(self) -> str:
        ...

    def release(self) -> None:
        ...
