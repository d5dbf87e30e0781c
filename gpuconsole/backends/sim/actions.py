"""What a user can do to the simulated cloud: submit and delete jobs, suspend CronJobs, launch,
stop and terminate instances.

Requests are checked the way the real APIs check them and refused with the real APIs' words
(``jobs.batch "x" already exists``, ``IncorrectInstanceState``), so the console's error paths
are exercised in demo mode too. Refusals raise :class:`ValueError` (bad request) or
:class:`KeyError` (no such object); the backend faces turn both into ``BackendError``.
"""

from __future__ import annotations

import re

from gpuconsole.backends.sim import catalog
from gpuconsole.backends.sim.archive import JobArchive
from gpuconsole.backends.sim.lifecycle import cron_next
from gpuconsole.backends.sim.state import SimInstance, SimJob
from gpuconsole.backends.sim.workload import PYTORCH, TEAMS
from gpuconsole.model import CronJob, Instance, InstanceState, Job, JobState, Market

_RFC1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MIG_PROFILES: frozenset[str] = frozenset(p.profile for p in catalog.A100_80GB_MIG_LAYOUT)


def instance_model(inst: SimInstance, now: float) -> Instance:
    """The frozen view of one instance at ``now``.

    A spot instance says what its request is, as EC2's ``DescribeSpotInstanceRequests`` would:
    one-time and terminated when interrupted (what the launch wizard asks for, and every spot
    instance of the seeded fleet), or persistent and stopped when interrupted.
    """
    if inst.market is not Market.SPOT:
        kind, behaviour = "", ""
    else:
        kind, behaviour = ("persistent", "stop") if inst.persistent else ("one-time", "terminate")
    return Instance(inst.instance_id, inst.itype.name, inst.region, inst.az, inst.market, inst.state,
                    inst.launch_time, inst.price, inst.itype.gpu_count, inst.model.name,
                    round(inst.accrued(now), 4), inst.name, inst.node_name, inst.tags, inst.billing, inst.reason,
                    spot_type=kind, spot_interruption=behaviour, cloud=inst.cloud, currency=inst.itype.currency,
                    stopped_bills=inst.stopped_bills, spot_stoppable=inst.persistent and inst.cloud == "azure")


class Actions(JobArchive):
    """User actions on the world; each takes effect at the current sim time."""

    def submit_job(self, name: str, namespace: str, gpus: int = 1, *, mig_profile: str | None = None,
                   image: str = PYTORCH, owner: str | None = None, product: str | None = None,
                   minutes: float = 60.0) -> Job:
        """Create a Job (it starts pending; the next step schedules it).

        Args:
            gpus: whole GPUs wanted (``nvidia.com/gpu``); ignored with ``mig_profile``.
            mig_profile: one MIG device instead, e.g. ``"1g.10gb"``.
            product: a ``nvidia.com/gpu.product`` node selector, e.g. ``"NVIDIA-A10G"``.
            minutes: how long the simulated workload runs.

        Raises:
            ValueError: invalid name, unknown namespace or profile, or the name is taken.
        """
        if len(name) > 63 or not _RFC1123.match(name):
            raise ValueError(f'Job.batch "{name}" is invalid: metadata.name: must be a lowercase '
                             "RFC 1123 label (a-z, 0-9 and '-', at most 63 characters)")
        if namespace not in TEAMS:
            raise ValueError(f'namespaces "{namespace}" not found')
        if mig_profile is not None and mig_profile not in MIG_PROFILES:
            raise ValueError(f"unknown MIG profile {mig_profile!r}; one of {', '.join(sorted(MIG_PROFILES))}")
        if mig_profile is None and gpus < 1:
            raise ValueError("a GPU job must request at least 1 nvidia.com/gpu")
        if minutes <= 0:
            raise ValueError("minutes must be positive")
        if any(j.name == name and j.namespace == namespace for j in self._jobs.values()):
            raise ValueError(f'jobs.batch "{name}" already exists')
        job = SimJob(self._ids.uuid4(), name, namespace, self._now, 1 if mig_profile else gpus,
                     mig_profile, product, round(minutes * 60.0), image,
                     owner or TEAMS[namespace][0], self._ids.uuid4())
        self._add_job(job)
        return job.to_model()

    def delete_job(self, uid: str) -> Job:
        """Delete a Job and its pod, freeing what it holds; returns its last state.

        Raises:
            KeyError: no job with that UID.
        """
        job = self._jobs.pop(uid, None) or self._drop_archived(uid)
        if job is None:
            raise KeyError(f"no job with uid {uid}")
        view = job.to_model()
        self._pending.pop(uid, None)
        if job.state is JobState.RUNNING:
            self._scheduler.release(job)
        job.run = -1  # any completion or resume still queued for it is now stale
        return view

    def set_cronjob_suspended(self, uid: str, suspended: bool = True) -> CronJob:
        """Suspend or resume a CronJob (by UID or name); a resumed one waits for its next time.

        Raises:
            KeyError: no such CronJob.
        """
        for cj in self._cronjobs:
            if uid in (cj.uid, cj.name):
                cj.suspended = suspended
                cj.next = None if suspended else cron_next(cj.schedule, self._now)
                active = sum(1 for j in self._jobs.values() if j.cronjob == cj.name
                             and j.state in (JobState.PENDING, JobState.RUNNING))
                return CronJob(cj.uid, cj.name, cj.namespace, cj.schedule, cj.created, cj.suspended,
                               cj.last, cj.next, cj.gpus, cj.mig_profile, active)
        raise KeyError(f"no CronJob {uid}")

    def launch_instance(self, instance_type: str, availability_zone: str,
                        market: Market = Market.ON_DEMAND, name: str = "", owner: str = "",
                        project: str = "", *, persistent: bool = False) -> Instance:
        """Launch an instance; it is ``pending`` for about a minute, then joins the cluster.

        ``persistent``: for spot, a persistent request with the ``stop`` interruption behaviour
        (it can be stopped, and an interruption stops it) instead of a one-time one.

        Raises:
            ValueError: unknown instance type or zone.
        """
        if instance_type not in catalog.INSTANCE_TYPE_BY_NAME:
            raise ValueError(f"InvalidParameterValue: Invalid instance type: {instance_type}")
        if availability_zone not in catalog.ZONES:
            raise ValueError(f"InvalidParameterValue: Invalid availability zone: [{availability_zone}]")
        if not name:
            name = f"{instance_type.split('.')[0]}-{self._ids.suffix(4)}"
        inst = self._launch(instance_type, availability_zone, Market(market), self._now, name, owner, project)
        inst.persistent = persistent and inst.market is Market.SPOT
        return instance_model(inst, self._now)

    def stop_instance(self, instance_id: str) -> Instance:
        """Stop an on-demand instance, or a spot one of a persistent request (EC2 refuses to
        stop one-time spot instances); a stopped instance its cloud still bills (an Azure VM shut
        down from inside) is stopped again, so it is deallocated and its compute stops billing.

        Raises:
            KeyError: no such instance.
            ValueError: one-time spot, or not in a state that can be stopped.
        """
        inst = self._instance(instance_id)
        if inst.market is Market.SPOT and not inst.persistent:
            raise ValueError(f"UnsupportedOperation: You can't stop the Spot Instance '{instance_id}' "
                             "because it is associated with a one-time Spot Instance request.")
        if inst.state in (InstanceState.STOPPING, InstanceState.STOPPED) and not inst.bills_stopped:
            return instance_model(inst, self._now)
        if inst.state is not InstanceState.RUNNING and not inst.bills_stopped:
            raise ValueError(f"IncorrectInstanceState: The instance '{instance_id}' is not in a "
                             "state from which it can be stopped.")
        self._stop(inst, self._now)
        return instance_model(inst, self._now)

    def power_off_instance(self, instance_id: str) -> Instance:
        """Power a running Azure VM off without deallocating it: Azure's "stopped", its compute
        still billed until a stop deallocates it (other clouds have no such action).

        Raises:
            KeyError: no such instance.
            ValueError: not an Azure VM, or not running.
        """
        inst = self._instance(instance_id)
        if inst.cloud != "azure":
            raise ValueError("UnsupportedOperation: power-off is not offered by this cloud (Azure only); "
                             f"stop '{instance_id}' instead")
        if inst.state is not InstanceState.RUNNING:
            raise ValueError(f"OperationNotAllowed: the VM '{inst.name}' is not running, so it cannot be powered off")
        self._stop(inst, self._now, allocated=True)
        return instance_model(inst, self._now)

    def terminate_instance(self, instance_id: str) -> Instance:
        """Terminate an instance; nothing replaces it (unlike a spot interruption).

        Raises:
            KeyError: no such instance.
        """
        inst = self._instance(instance_id)
        if inst.state not in (InstanceState.SHUTTING_DOWN, InstanceState.TERMINATED):
            inst.replace = False
            self._shut_down(inst, self._now)
        return instance_model(inst, self._now)

    def kill_process(self, gpu_uuid: str, pid: int, signal_name: str) -> str:
        """End a job's process on a GPU, as SIGTERM or SIGKILL would: the pod's container exits
        with an error, so its Job fails and its GPUs (or MIG device) are free again.

        Raises:
            KeyError: no such GPU, or no such process on it (it has exited).
        """
        gpu = self._gpu_by_uuid.get(gpu_uuid)
        if gpu is None:
            raise KeyError(f"no GPU {gpu_uuid} in the fleet")
        job = gpu.job if gpu.job is not None and any(p.pid == pid for p in gpu.procs) else None
        for sl in gpu.slices:
            if sl.job is not None and sl.job.pid == pid:
                job = sl.job
        if job is None or job.state is not JobState.RUNNING:
            raise KeyError(f"no process {pid} on GPU {gpu_uuid}: it has exited")
        self._scheduler.release(job)
        job.state = JobState.FAILED
        job.finished = self._now
        job.view = None
        gpu.view = None
        return f"sent {signal_name} to pid {pid}: job {job.namespace}/{job.name} failed and freed its GPUs"

    def set_spot_price(self, instance_type: str, availability_zone: str, price: float) -> None:
        """Move the spot price of a type in a zone; the spot instances there are billed at the
        new price from now on, as EC2 bills them.

        Raises:
            KeyError: a type or zone the catalog does not have.
            ValueError: a price that is not positive.
        """
        if (instance_type, availability_zone) not in self._spot_prices:
            raise KeyError(f"no spot market for {instance_type} in {availability_zone}")
        if price <= 0:
            raise ValueError("InvalidParameterValue: a spot price must be positive")
        self._spot_prices[(instance_type, availability_zone)] = price
        for inst in self._instances.values():
            if (inst.market is Market.SPOT and inst.itype.name == instance_type and inst.az == availability_zone
                    and inst.state is not InstanceState.TERMINATED):
                inst.set_price(price, self._now)

    def _instance(self, instance_id: str) -> SimInstance:
        inst = self._instances.get(instance_id)
        if inst is None:
            raise KeyError(f"InvalidInstanceID.NotFound: The instance ID '{instance_id}' does not exist")
        return inst
