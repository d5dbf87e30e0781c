"""How things change over simulated time: jobs arrive, start, finish or fail; CronJobs fire;
instances start, stop, are reclaimed by EC2 and replaced.

Timed changes go through one event heap keyed by sim time, so a step costs nothing for the
thousands of jobs that are not due, and a jump over a long gap still settles each change at
the moment it was due (a job that ended during the gap reports its real finish time).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from array import array
from datetime import UTC, datetime
from typing import Any

from cronsim import CronSim

from gpuconsole.backends.sim import catalog
from gpuconsole.backends.sim.fleet import attach_gpus, new_instance
from gpuconsole.backends.sim.ids import IdFactory
from gpuconsole.backends.sim.kueue import SimKueue
from gpuconsole.backends.sim.processes import job_process
from gpuconsole.backends.sim.scheduler import Scheduler
from gpuconsole.backends.sim.state import SimCronJob, SimGpu, SimInstance, SimJob
from gpuconsole.backends.sim.workload import TEAMS, TEMPLATES
from gpuconsole.model import InstanceState, JobState, Market

FINISHED_TTL_S = 3600.0  # finished jobs are listed this long, as a TTL controller would
TERMINATED_TTL_S = 600.0  # EC2 keeps listing terminated instances for a while
# Mean life of a spot instance before EC2 reclaims it: with the default fleet's four spot
# instances, one interruption every three hours or so.
SPOT_MEAN_LIFE_S = 12 * 3600.0
EVICTED_FAIL_P = 0.3  # share of evicted pods whose Job has no retries left
HISTORY_LEN = 120
SPOT_INTERRUPTION = "Server.SpotInstanceTermination: Spot instance termination"


# The macros a CronJob's schedule may use, as the CronJob controller reads them.
CRON_MACROS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
               "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *"}


def cron_next(schedule: str, ts: float) -> float:
    """First schedule time strictly after ``ts`` (UTC, as the CronJob controller runs)."""
    return next(CronSim(CRON_MACROS.get(schedule, schedule), datetime.fromtimestamp(ts, UTC))).timestamp()


def cron_prev(schedule: str, ts: float) -> float:
    """Last schedule time strictly before ``ts``."""
    return next(CronSim(CRON_MACROS.get(schedule, schedule), datetime.fromtimestamp(ts, UTC), reverse=True)).timestamp()


def poisson(rng: random.Random, lam: float) -> int:
    """A Poisson draw (Knuth's method; ``lam`` is small, at most a few per second)."""
    limit = math.exp(-lam)
    k = 0
    p = rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


class Lifecycle:
    """The time-driven part of :class:`~gpuconsole.backends.sim.world.SimWorld`."""

    _rng: random.Random
    _ids: IdFactory
    _now: float
    _instances: dict[str, SimInstance]
    _gpus: list[SimGpu]
    _gpu_by_uuid: dict[str, SimGpu]
    _jobs: dict[str, SimJob]
    _gangs: list[Any]  # distributed jobs (sim.distributed.SimGang), their replicas in _jobs
    _pending: dict[str, SimJob]
    _cronjobs: list[SimCronJob]
    _events: list[tuple[float, int, str, Any, int]]
    _seq: itertools.count[int]
    _scheduler: Scheduler
    _spot_prices: dict[tuple[str, str], float]
    _products: tuple[str, ...]
    _clouds: list[Any]  # the world's regions on other clouds (cloud_region.CloudRegion)
    _cum_weights: list[float]
    _arrival_rate: float
    _pending_target: int
    _kueue: SimKueue | None = None  # the demo's Kueue (sim.kueue): what holds Jobs that name a LocalQueue

    def _at(self, ts: float, kind: str, obj: Any, token: int = 0) -> None:
        heapq.heappush(self._events, (ts, next(self._seq), kind, obj, token))

    def _handle(self, kind: str, obj: Any, token: int, ts: float) -> None:
        """Apply one due event; events made stale by a later change are ignored."""
        if kind == "job-end":
            if obj.state is JobState.RUNNING and obj.run == token:
                self._finish(obj, ts)
        elif kind == "resume":
            if obj.state is JobState.SUSPENDED and obj.run == token:
                obj.give_up_at = max(obj.give_up_at, ts + 3 * 3600.0)
                self._make_pending(obj)
        elif kind == "running":
            if obj.state is InstanceState.PENDING:
                obj.set_state(InstanceState.RUNNING, ts)
                self._join(obj, ts)
        elif kind == "stopped":
            if obj.state is InstanceState.STOPPING:
                obj.set_state(InstanceState.STOPPED, ts)
                self._scheduler.remove_node(obj)
        elif kind == "terminated":
            if obj.state is InstanceState.SHUTTING_DOWN:
                obj.set_state(InstanceState.TERMINATED, ts)
                self._scheduler.remove_node(obj)
                obj.gone_at = ts + TERMINATED_TTL_S
                self._at(obj.gone_at, "vanish", obj)
                if obj.replace:
                    self._at(ts + self._rng.randint(120, 600), "replace", obj)
        elif kind == "vanish":
            self._instances.pop(obj.instance_id, None)
        elif kind == "interrupt":
            if obj.state is InstanceState.RUNNING and obj.interrupt_at == ts and obj.persistent:
                self._stop(obj, ts)  # a persistent request with the stop behaviour: stopped, kept
            elif obj.state is InstanceState.RUNNING and obj.interrupt_at == ts:
                obj.replace = obj.managed
                obj.reason = SPOT_INTERRUPTION
                self._shut_down(obj, ts)
        elif kind == "replace":
            self._replace(obj, ts)

    # ----------------------------------------------------------------- instances

    def _price(self, instance_type: str, az: str, market: Market) -> float:
        if market is Market.SPOT:
            return self._spot_prices[(instance_type, az)]
        return catalog.INSTANCE_TYPE_BY_NAME[instance_type].on_demand_price

    def _join(self, inst: SimInstance, ts: float) -> None:
        """A running instance's node registers with the cluster and its GPUs appear."""
        region = self._cloud_of(inst)
        if region is not None:
            region.join(inst, ts)
            self._gpu_by_uuid.update((g.uuid, g) for g in inst.gpus)
            return
        attach_gpus(self._ids, self._rng, inst, born=ts)
        for g in inst.gpus:
            g.hist = array("f", bytes(16 * HISTORY_LEN))
            self._gpus.append(g)
            self._gpu_by_uuid[g.uuid] = g
        self._scheduler.add_node(inst)
        if inst.market is Market.SPOT:
            life = self._rng.expovariate(1.0 / SPOT_MEAN_LIFE_S)
            inst.interrupt_at = float(math.floor(max(ts, self._now) + life))
            self._at(inst.interrupt_at, "interrupt", inst)

    def _leave(self, inst: SimInstance, ts: float) -> None:
        """The node goes NotReady, its pods are evicted and its GPUs stop reporting."""
        self._scheduler.cordon(inst)
        for job in [j for j in self._jobs.values() if j.node is inst and j.state is JobState.RUNNING]:
            self._evict(job, ts)
        region = self._cloud_of(inst)
        if region is not None:
            region.leave(inst)
        elif inst.gpus:
            gone = {id(g) for g in inst.gpus}
            self._gpus = [g for g in self._gpus if id(g) not in gone]
            for g in inst.gpus:
                self._gpu_by_uuid.pop(g.uuid, None)

    def _cloud_of(self, inst: SimInstance) -> Any:
        """The region of another cloud that holds ``inst``, or None for the EC2 fleet's own."""
        for region in self._clouds:
            if region.owns(inst):
                return region
        return None

    def _shut_down(self, inst: SimInstance, ts: float) -> None:
        inst.set_state(InstanceState.SHUTTING_DOWN, ts)
        self._leave(inst, ts)
        self._at(ts + self._rng.randint(30, 90), "terminated", inst)

    def _stop(self, inst: SimInstance, ts: float) -> None:
        """Stop so that compute stops billing (deallocate, on Azure), a stopped VM still billed too."""
        inst.set_state(InstanceState.STOPPING, ts)
        inst.stopped_bills = False
        self._leave(inst, ts)
        self._at(ts + self._rng.randint(20, 60), "stopped", inst)

    def _launch(self, instance_type: str, az: str, market: Market, ts: float, name: str,
                owner: str, project: str, mig_gpu: int | None = None) -> SimInstance:
        price = self._price(instance_type, az, market)
        inst = new_instance(self._ids, instance_type, az, market, price, ts, name, owner, project, mig_gpu)
        self._instances[inst.instance_id] = inst
        self._at(ts + self._rng.randint(40, 90), "running", inst)
        return inst

    def _replace(self, old: SimInstance, ts: float) -> None:
        """The node group launches a like-for-like instance, in any zone of the region."""
        tags = dict(old.tags)
        az = self._rng.choice(catalog.REGIONS[old.region])
        self._launch(old.itype.name, az, old.market, ts, old.name, tags.get("Owner", ""),
                     tags.get("Project", ""), old.mig_gpu)

    # ----------------------------------------------------------------- jobs

    def _new_job(self, now: float) -> SimJob:
        """A submission drawn from the team templates."""
        rng = self._rng
        t = rng.choices(TEMPLATES, cum_weights=self._cum_weights)[0]
        gpus = 1 if t.mig_profile else rng.choice(t.gpus)
        product = t.product if t.product in self._products else None
        owner = rng.choice(TEAMS[t.namespace])
        minutes = math.exp(rng.uniform(math.log(t.minutes[0]), math.log(t.minutes[1])))
        job = SimJob(self._ids.uuid4(), f"{t.base}-{self._ids.suffix()}", t.namespace, now, gpus,
                     t.mig_profile, product, round(minutes * 60.0), t.image, owner, self._ids.uuid4())
        job.give_up_at = now + rng.uniform(3600.0, 5 * 3600.0)
        job.queue = self._kueue.local_queue(t.namespace) if self._kueue is not None else None
        return job

    def _cron_job(self, cj: SimCronJob, ts: float) -> SimJob:
        """The Job a CronJob creates for its run scheduled at ``ts``."""
        minutes = self._rng.uniform(*cj.minutes)
        product = cj.product if cj.product in self._products else None
        job = SimJob(self._ids.uuid4(), f"{cj.name}-{int(ts // 60)}", cj.namespace, ts, cj.gpus,
                     cj.mig_profile, product, round(minutes * 60.0), cj.image, cj.owner,
                     self._ids.uuid4(), cronjob=cj.name)
        job.queue = self._kueue.local_queue(cj.namespace) if self._kueue is not None else None
        return job

    def _add_job(self, job: SimJob) -> None:
        self._jobs[job.uid] = job
        if job.state is JobState.PENDING:
            self._enqueue(job)

    def _make_pending(self, job: SimJob) -> None:
        job.state = JobState.PENDING
        job.node = None
        job.started = None
        job.finished = None
        job.view = None
        self._enqueue(job)

    def _enqueue(self, job: SimJob) -> None:
        """A Job that wants to run goes to the scheduler, or to Kueue when it names a LocalQueue
        that has not admitted it (suspended until it does)."""
        if self._kueue is not None and self._kueue.hold(job):
            return
        self._pending[job.uid] = job
        self._scheduler.submitted(job)

    def _admit_queued(self, now: float) -> None:
        """Kueue's pass: what its queues admit goes to the scheduler; what waited too long is deleted."""
        if self._kueue is None:
            return
        admitted, gave_up = self._kueue.admit(now)
        for job in admitted:
            self._make_pending(job)
        for job in gave_up:
            self._jobs.pop(job.uid, None)
            job.run = -1

    def _start(self, job: SimJob, ts: float, progress: float = 0.0) -> None:
        """The pod of a job just bound to a node starts; ``progress`` backdates it."""
        rng = self._rng
        self._pending.pop(job.uid, None)
        job.state = JobState.RUNNING
        job.run += 1
        job.pending_reason = None
        job.view = None
        job.fails = rng.random() < 0.1
        job.stalled = rng.random() < 0.1
        job.util_base = rng.uniform(60.0, 97.0)
        job.mem_frac = rng.uniform(0.45, 0.95)
        job.pid = rng.randrange(10_000, 3_000_000)
        length = max(60.0, job.duration * (rng.uniform(0.05, 0.8) if job.fails else 1.0))
        job.started = float(math.floor(ts - length * progress))
        job.end_at = job.started + length
        for g in job.devices:
            g.proc_mem = int(job.mem_frac * g.total)
            g.mem = g.idle_mem + g.proc_mem
            g.procs = (job_process(job, g.uuid, g.rank, g.proc_mem),)
        if job.slice is not None:
            job.slice.mem = int(job.mem_frac * job.slice.memory_total)
        self._at(job.end_at, "job-end", job, job.run)

    def _finish(self, job: SimJob, ts: float) -> None:
        self._scheduler.release(job)
        job.state = JobState.FAILED if job.fails else JobState.SUCCEEDED
        job.finished = ts
        job.view = None

    def _evict(self, job: SimJob, ts: float) -> None:
        """The job's node went away: the pod is recreated (pending) or the Job gives up."""
        self._scheduler.release(job)
        job.view = None
        if self._rng.random() < EVICTED_FAIL_P:
            job.state = JobState.FAILED
            job.finished = ts
        else:
            job.pod_uid = self._ids.uuid4()
            job.give_up_at = max(job.give_up_at, ts + 2 * 3600.0)
            self._make_pending(job)

    def _arrivals(self, now: float) -> None:
        """Poisson submissions: more while GPUs sit free, fewer while the queue is long."""
        sched = self._scheduler
        waiting = len(self._pending)
        target = self._pending_target
        free_share = sched.free_slots / sched.slots if sched.slots else 0.0
        if waiting >= 2 * target:
            factor = 0.5 if free_share > 0.2 else 0.0
        elif free_share > 0.15:
            factor = 2.5
        else:
            factor = 1.0 if waiting < target else 0.4
        for _ in range(poisson(self._rng, self._arrival_rate * factor)):
            job = self._new_job(now)
            if self._rng.random() < 0.03:
                job.state = JobState.SUSPENDED
                self._at(now + self._rng.randint(1800, 4 * 3600), "resume", job, job.run)
            self._add_job(job)

    def _purge(self, now: float) -> None:
        """Drop jobs finished over an hour ago and those whose owners gave up waiting."""
        cutoff = now - FINISHED_TTL_S
        stale = [u for u, j in self._jobs.items()
                 if (j.finished is not None and j.finished < cutoff)
                 or (j.state is JobState.PENDING and j.give_up_at <= now)]
        for uid in stale:
            job = self._jobs.pop(uid)
            self._pending.pop(uid, None)
            job.run = -1

    def _cron_tick(self, now: float) -> None:
        for cj in self._cronjobs:
            due = cj.next
            if due is not None and due <= now and not cj.suspended:
                cj.next = cron_next(cj.schedule, now)
                if cj.policy != "Allow":
                    active = [j for j in self._jobs.values() if j.cronjob == cj.name and j.namespace == cj.namespace
                              and j.state in (JobState.PENDING, JobState.RUNNING)]
                    if active and cj.policy == "Forbid":
                        continue  # the run is skipped while the last one is still going
                    for job in active:  # Replace: the running one makes way for the new one
                        self._jobs.pop(job.uid, None)
                        self._pending.pop(job.uid, None)
                        if job.state is JobState.RUNNING:
                            self._scheduler.release(job)
                        job.run = -1
                cj.last = due
                job = self._cron_job(cj, due)
                job.workers = cj.workers
                self._add_job(job)
