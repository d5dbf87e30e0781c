"""The three backend faces of one simulated world: GPUs, jobs and cloud.

They share a :class:`SimCloud` — the world, the lock that serialises it, the clock that drives
it and the fault plan — so the GPUs a job holds, the node it runs on and the instance billed
for it always agree, as they would on a real fleet polled at the same moment.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from gpuconsole.backends.base import BackendError, Capability
from gpuconsole.backends.sim import catalog, serving_api
from gpuconsole.backends.sim.faults import FaultPlan
from gpuconsole.backends.sim.workload import PYTORCH
from gpuconsole.backends.sim.world import SimWorld
from gpuconsole.model import (
    CloudReading,
    CronJob,
    GpuReading,
    GpuSample,
    Instance,
    InstanceType,
    Job,
    JobsReading,
    KeyPair,
    LaunchSpec,
    MachineImage,
    Market,
    RegionPrice,
    SecurityGroup,
    ServicesReading,
    SourceKind,
    SpotPrice,
    Subnet,
    Workload,
)

T = TypeVar("T")

FOLLOW_EVERY_S = 0.5  # how often a followed log looks for new lines


class SimCloud:
    """One world behind the three faces.

    Every poll first misbehaves as the fault plan says (outside the lock, so a hanging GPU face
    does not stall the job face), then, under the lock, brings the world up to ``clock()`` and
    takes its reading.
    """

    def __init__(self, world: SimWorld, clock: Callable[[], float] = time.time,
                 faults: FaultPlan | None = None) -> None:
        self.world = world
        self.clock = clock
        self.faults = faults if faults is not None else FaultPlan()
        self.lock = threading.Lock()

    def read(self, kind: SourceKind, take: Callable[[SimWorld], T]) -> T:
        self.faults.apply(kind)
        with self.lock:
            self.world.advance_to(self.clock())
            return take(self.world)

    def act(self, do: Callable[[SimWorld], T]) -> T:
        """Run a user action at the current time; refusals become :class:`BackendError`."""
        with self.lock:
            self.world.advance_to(self.clock())
            try:
                return do(self.world)
            except (KeyError, ValueError) as exc:
                raise BackendError(str(exc.args[0]) if exc.args else type(exc).__name__) from exc

    def close(self, kind: SourceKind) -> None:
        self.faults.close(kind)


class SimGpuSource:
    """GPU telemetry of the simulated fleet, MIG devices and processes included."""

    name: str = "sim"
    capabilities: frozenset[Capability] = frozenset({Capability.MIG, Capability.PROCESSES, Capability.HISTORY,
                                                     Capability.KILL_PROCESS})

    def __init__(self, sim: SimCloud) -> None:
        self.sim = sim

    def poll_gpus(self) -> GpuReading:
        return self.sim.read(SourceKind.GPUS, SimWorld.gpu_reading)

    def kill_process(self, gpu_uuid: str, pid: int, sig: int) -> str:
        """End a simulated job's process (its Job fails); see ``SimWorld.kill_process``."""
        name = signal.Signals(sig).name
        return self.sim.act(lambda w: w.kill_process(gpu_uuid, pid, name))

    def gpu_history(self, uuid: str, since: float | None = None) -> tuple[GpuSample, ...]:
        """The last ten minutes of one GPU at 5-second resolution."""
        return self.sim.act(lambda w: w.gpu_history(uuid, since))

    def close(self) -> None:
        self.sim.close(SourceKind.GPUS)


class SimJobBackend:
    """The simulated Kubernetes cluster's Jobs, CronJobs and GPU nodes.

    It is also a :class:`~gpuconsole.backends.base.JobControl`, so demo mode offers the whole
    Jobs pane: submit from manifests (with dry runs), delete, suspend and resume, trigger a
    CronJob, follow a pod's synthetic training log, describe with events
    (see :mod:`gpuconsole.backends.sim.job_api`).
    """

    name: str = "sim"
    capabilities: frozenset[Capability] = frozenset(
        {Capability.SUBMIT_JOB, Capability.DELETE_JOB, Capability.SUSPEND_CRONJOB})

    def __init__(self, sim: SimCloud) -> None:
        self.sim = sim

    def poll_jobs(self) -> JobsReading:
        return self.sim.read(SourceKind.JOBS, SimWorld.jobs_reading)

    def submit_job(self, name: str, namespace: str, gpus: int = 1, *, mig_profile: str | None = None,
                   image: str = PYTORCH, owner: str | None = None, product: str | None = None,
                   minutes: float = 60.0) -> Job:
        return self.sim.act(lambda w: w.submit_job(name, namespace, gpus, mig_profile=mig_profile,
                                                   image=image, owner=owner, product=product,
                                                   minutes=minutes))

    def delete_job(self, uid: str) -> Job:
        return self.sim.act(lambda w: w.delete_job(uid))

    def suspend_cronjob(self, uid: str, suspended: bool = True) -> CronJob:
        return self.sim.act(lambda w: w.set_cronjob_suspended(uid, suspended))

    # ------------------------------------------------------------------ JobControl
    def submit(self, manifests: list[dict[str, Any]], *, dry_run: bool = False) -> list[str]:
        return self.sim.act(lambda w: w.apply_manifests(manifests, dry_run))

    def delete(self, kind: str, namespace: str, name: str) -> None:
        self.sim.act(lambda w: w.delete_object(kind, namespace, name))

    def suspend(self, kind: str, namespace: str, name: str, suspended: bool) -> None:
        self.sim.act(lambda w: w.suspend_object(kind, namespace, name, suspended))

    def trigger(self, namespace: str, cronjob: str) -> str:
        return self.sim.act(lambda w: w.trigger_cronjob(namespace, cronjob))

    def logs(self, namespace: str, pod: str, *, tail_lines: int = 1000, follow: bool = False,
             stop: threading.Event | None = None) -> Iterator[str]:
        """A training pod's log; following it, new lines appear as the world's clock moves, and
        the stream ends when the container exits, the pod is deleted or ``stop`` is set."""
        lines, count, done = self.sim.act(lambda w: w.pod_log(namespace, pod, None, max(0, tail_lines)))
        yield from lines
        while follow and not done:
            if stop is not None:
                if stop.wait(FOLLOW_EVERY_S):
                    return
            else:
                time.sleep(FOLLOW_EVERY_S)
            start = count

            def more(world: SimWorld, start: int = start) -> tuple[list[str], int, bool]:
                return world.pod_log(namespace, pod, start)

            try:
                lines, count, done = self.sim.act(more)
            except BackendError:
                return  # the pod went away (deleted, suspended, evicted): its log ends
            yield from lines

    def describe(self, kind: str, namespace: str, name: str) -> str:
        return self.sim.act(lambda w: w.describe_object(kind, namespace, name))

    # ------------------------------------------------------------------ QueueControl
    def move_to_queue(self, namespace: str, name: str, queue: str) -> None:
        self.sim.act(lambda w: w.queueing().move(namespace, name, queue))

    def set_workload_active(self, namespace: str, name: str, active: bool) -> None:
        self.sim.act(lambda w: w.queueing().set_active(namespace, name, active))

    def close(self) -> None:
        self.sim.close(SourceKind.JOBS)


class SimServicesBackend:
    """The simulated cluster's inference services, with their pods' serving figures.

    A :class:`~gpuconsole.backends.base.ServiceControl` (scale, rollout restart, a replica's
    log, describe) and a :class:`~gpuconsole.backends.base.ServiceHistory` (the last hour).
    """

    name: str = "sim"
    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, sim: SimCloud) -> None:
        self.sim = sim

    def poll_services(self) -> ServicesReading:
        return self.sim.read(SourceKind.SERVICES, SimWorld.services_reading)

    def scale_service(self, kind: str, namespace: str, name: str, replicas: int) -> None:
        self.sim.act(lambda w: w.scale_service(namespace, name, replicas))

    def restart_service(self, kind: str, namespace: str, name: str) -> None:
        self.sim.act(lambda w: w.restart_service(namespace, name))

    def service_logs(self, namespace: str, pod: str, *, tail_lines: int = 1000, follow: bool = False,
                     stop: threading.Event | None = None) -> Iterator[str]:
        yield from self.sim.act(lambda w: serving_api.log_lines(w.serving_pool, namespace, pod, w.now, tail_lines))

    def describe_service(self, kind: str, namespace: str, name: str) -> str:
        return self.sim.act(lambda w: serving_api.describe(w.serving_pool, namespace, name, w.now))

    def service_history(self, namespace: str, pods: tuple[str, ...], figure: str, since: float, until: float,
                        step: float) -> tuple[tuple[float, float], ...]:
        return self.sim.act(lambda w: serving_api.history(w.serving_pool, namespace, pods, figure, since, until))

    def close(self) -> None:
        self.sim.close(SourceKind.SERVICES)


class SimCloudBackend:
    """The simulated EC2 account: GPU instances, their prices and what they have cost.

    It is also a :class:`~gpuconsole.backends.base.Provisioner`, so demo mode offers the whole
    launch wizard: zones, spot price history, subnets, key pairs, dry runs and launches that
    can run out of capacity (``world.no_capacity``).
    """

    name: str = "sim"
    capabilities: frozenset[Capability] = frozenset(
        {Capability.LAUNCH, Capability.STOP, Capability.TERMINATE, Capability.SPOT, Capability.PRICES})
    regions: tuple[str, ...] = tuple(catalog.REGIONS)

    def __init__(self, sim: SimCloud) -> None:
        self.sim = sim

    def poll_instances(self) -> CloudReading:
        return self.sim.read(SourceKind.CLOUD, SimWorld.cloud_reading)

    # ------------------------------------------------------------------ what is offered
    def instance_types(self, region: str | None = None) -> tuple[InstanceType, ...]:
        """GPU types sold in ``region``; with no region, the simulator's whole catalog."""
        if region is None:
            return self.sim.world.instance_types()
        return self.sim.act(lambda w: w.region_types(region))

    def on_demand_prices(self, regions: tuple[str, ...]) -> tuple[RegionPrice, ...]:
        return self.sim.act(lambda w: w.region_prices(tuple(regions)))

    def spot_prices(self, region: str | None = None, instance_types: tuple[str, ...] | None = None,
                    since: float | None = None) -> tuple[SpotPrice, ...]:
        """Spot price history of ``instance_types`` in ``region`` since ``since``; with no
        region, today's price of every type in every zone."""
        if region is None:
            return self.sim.act(SimWorld.spot_prices)
        types = tuple(instance_types) if instance_types is not None else tuple(catalog.INSTANCE_TYPE_BY_NAME)
        return self.sim.act(lambda w: w.spot_history(region, types, w.now - 7 * 86400.0 if since is None else since))

    def offerings(self, region: str, instance_types: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
        return self.sim.act(lambda w: w.zone_offerings(region, tuple(instance_types)))

    def subnets(self, region: str) -> tuple[Subnet, ...]:
        return self.sim.act(lambda w: w.region_subnets(region))

    def security_groups(self, region: str) -> tuple[SecurityGroup, ...]:
        return self.sim.act(lambda w: w.region_security_groups(region))

    def key_pairs(self, region: str) -> tuple[KeyPair, ...]:
        return self.sim.act(lambda w: w.region_key_pairs(region))

    def default_image(self, region: str, workload: Workload) -> MachineImage:
        return self.sim.act(lambda w: w.region_image(region, workload))

    # ------------------------------------------------------------------ launching and actions
    def launch(self, spec: LaunchSpec, *, dry_run: bool = False) -> tuple[Instance, ...]:
        return self.sim.act(lambda w: w.launch_spec(spec, dry_run))

    def start(self, region: str, instance_id: str) -> None:
        self.sim.act(lambda w: w.start_instance(w.checked_id(region, instance_id)))

    def stop(self, region: str, instance_id: str) -> None:
        self.sim.act(lambda w: w.stop_instance(w.checked_id(region, instance_id)))

    def power_off(self, region: str, instance_id: str) -> None:
        """Power an Azure VM off, still billed (Azure's own action beside stop, which deallocates)."""
        self.sim.act(lambda w: w.power_off_instance(w.checked_id(region, instance_id)))

    def reboot(self, region: str, instance_id: str) -> None:
        self.sim.act(lambda w: w.reboot_instance(w.checked_id(region, instance_id)))

    def terminate(self, region: str, instance_id: str) -> None:
        self.sim.act(lambda w: w.terminate_instance(w.checked_id(region, instance_id)))

    def launch_instance(self, instance_type: str, availability_zone: str,
                        market: Market = Market.ON_DEMAND, name: str = "", owner: str = "",
                        project: str = "", *, persistent: bool = False) -> Instance:
        return self.sim.act(lambda w: w.launch_instance(instance_type, availability_zone, market,
                                                        name, owner, project, persistent=persistent))

    def stop_instance(self, instance_id: str) -> Instance:
        return self.sim.act(lambda w: w.stop_instance(instance_id))

    def terminate_instance(self, instance_id: str) -> Instance:
        return self.sim.act(lambda w: w.terminate_instance(instance_id))

    def close(self) -> None:
        self.sim.close(SourceKind.CLOUD)
