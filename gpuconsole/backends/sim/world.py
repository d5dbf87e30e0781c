"""One simulated GPU cloud — EC2 instances, the Kubernetes cluster on them, and their GPUs.

Everything is driven by the world's own seeded generators and advanced in whole seconds, so a
seed and a sequence of steps fix every reading: demos, snapshot tests and bug reports replay
exactly. Mutable state lives in the slotted classes of :mod:`.state`; frozen model objects are
built only when a reading is taken.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
import time

from gpuconsole.backends.sim import catalog, telemetry
from gpuconsole.backends.sim.actions import instance_model
from gpuconsole.backends.sim.alibaba_region import AlibabaRegion
from gpuconsole.backends.sim.azure_region import AzureRegion
from gpuconsole.backends.sim.fleet import (
    DEFAULT_FLEET,
    InstancePlan,
    new_instance,
    scaled_fleet,
)
from gpuconsole.backends.sim.ids import IdFactory
from gpuconsole.backends.sim.job_api import JobApi
from gpuconsole.backends.sim.kueue import SimKueue
from gpuconsole.backends.sim.lifecycle import HISTORY_LEN
from gpuconsole.backends.sim.provisioning import Provisioning
from gpuconsole.backends.sim.scheduler import Scheduler
from gpuconsole.backends.sim.seeding import Seeding
from gpuconsole.backends.sim.serving_pool import ServingPool
from gpuconsole.backends.sim.serving_readings import Totals, render_serving, services_reading
from gpuconsole.backends.sim.state import SimGpu, SimInstance
from gpuconsole.backends.sim.workload import (
    MEAN_GPUS_PER_JOB,
    MEAN_JOB_SECONDS,
    fleet_cum_weights,
)
from gpuconsole.model import (
    CloudReading,
    CronJob,
    GpuReading,
    GpuSample,
    InstanceState,
    InstanceType,
    JobsReading,
    JobState,
    Node,
    ServicesReading,
    SpotPrice,
)

HISTORY_EVERY_S = 5  # with HISTORY_LEN samples: ten minutes of history


class SimWorld(Provisioning, JobApi, Seeding):
    """A deterministic GPU cloud.

    Args:
        seed: fixes the fleet, the identifiers, the workload and the telemetry noise.
        nodes: None for the default demo fleet (8 instances, 25 GPUs, one MIG GPU); N ≥ 1 for
            a scaled fleet of N nodes of up to 8 GPUs each.
        start: sim time of the first reading (POSIX seconds); None takes the wall clock once.
        jobs: None for the live jobs only; N to list about N jobs, the rest of them history
            that never changes (see :mod:`.archive`).
        serving: add the inference pool (:mod:`.serving_pool`) on nodes of its own; the rest of
            the world is the same with it or without.
        alibaba: add an Alibaba Cloud account's cn-hangzhou region (:mod:`.alibaba_region`);
            the rest of the world is the same with it or without.
        azure: add an Azure subscription's eastus region (:mod:`.azure_region`), likewise apart.
    """

    def __init__(self, seed: int = 7, nodes: int | None = None, start: float | None = None,
                 jobs: int | None = None, serving: bool = False, alibaba: bool = False,
                 azure: bool = False) -> None:
        if nodes is not None and nodes < 1:
            raise ValueError(f"nodes must be at least 1, got {nodes}")
        if jobs is not None and jobs < 0:
            raise ValueError(f"jobs must be 0 or more, got {jobs}")
        self.seed = seed
        self._rng = random.Random(seed)
        self._noise = random.Random(f"{seed}:telemetry")
        self._ids = IdFactory(self._rng)
        self._now = float(math.floor(time.time() if start is None else start))
        self._instances = {}
        self._clouds: list[AlibabaRegion | AzureRegion] = []
        self._gpus = []
        self._gpu_by_uuid = {}
        self._jobs = {}
        self._pending = {}
        self._gangs = []
        self._cronjobs = []
        self._events = []
        self._seq = itertools.count()
        self._scheduler = Scheduler()
        self._hist_ts: list[float] = [-math.inf] * HISTORY_LEN
        self._hist_pos = 0
        self._spot_prices = {
            (t.name, az): round(t.on_demand_price * (1.0 - self._rng.uniform(0.3, 0.7)), 4)
            for t in catalog.INSTANCE_TYPES for az in catalog.ZONES
        }
        plans = DEFAULT_FLEET if nodes is None else scaled_fleet(self._rng, nodes)
        for plan in plans:
            self._build_instance(plan)
        by_product: dict[str, int] = {}
        for inst in self._instances.values():
            by_product[inst.model.label] = by_product.get(inst.model.label, 0) + inst.itype.gpu_count
        self._products = tuple(by_product)
        self._cum_weights = fleet_cum_weights(by_product)
        capacity = sum(by_product.values())
        # Arrivals that would keep ~90 % of the GPUs busy; the pending-queue feedback in
        # :meth:`_arrivals` then holds the queue near its target.
        self._arrival_rate = 0.9 * capacity / (MEAN_GPUS_PER_JOB * MEAN_JOB_SECONDS)
        self._pending_target = 5 if nodes is None else max(5, capacity // 60)
        self._seed_workload(demo=nodes is None)
        self._archive, self._archive_queued, self._archive_view = {}, {}, ()
        if jobs:
            self._seed_archive(jobs)
        self._serving = ServingPool(seed, self._now) if serving else None
        self._serving_totals = Totals()
        if self._serving is not None:
            for inst in self._serving.instances:
                self._instances[inst.instance_id] = inst
            for g in self._serving.gpus:
                self._gpus.append(g)
                self._gpu_by_uuid[g.uuid] = g
            self._serving.step(self._now)
        telemetry.warm_up(self._gpus, self._noise.random)
        if alibaba:
            self._clouds.append(AlibabaRegion(seed, self._now))
        if azure:
            self._clouds.append(AzureRegion(seed, self._now))
        for region in self._clouds:
            self._instances.update((i.instance_id, i) for i in region.instances)
            self._gpu_by_uuid.update((g.uuid, g) for g in region.gpus)
        self._init_provisioning()

    # ----------------------------------------------------------------- time

    @property
    def now(self) -> float:
        """Sim time, POSIX seconds; always a whole second."""
        return self._now

    def step(self, seconds: int = 1) -> None:
        """Advance the world ``seconds`` one-second steps."""
        for _ in range(int(seconds)):
            self._tick()

    def advance_to(self, t: float, max_steps: int = 3600) -> None:
        """Step until sim time reaches ``t``.

        A gap longer than ``max_steps`` (a laptop waking from sleep) is jumped: time is set
        forward and one step settles whatever fell due in between (finished jobs, instance
        transitions, one CronJob run), instead of replaying hours second by second.
        """
        gap = int(math.floor(t) - self._now)
        if gap <= 0:
            return
        if gap > max_steps:
            self._now = float(math.floor(t)) - 1.0
            self._tick()
            self._purge(self._now)
            return
        for _ in range(gap):
            self._tick()

    def _tick(self) -> None:
        now = self._now = self._now + 1.0
        events = self._events
        while events and events[0][0] <= now:
            ts, _, kind, obj, token = heapq.heappop(events)
            self._handle(kind, obj, token, ts)
        self._cron_tick(now)
        self._arrivals(now)
        if now % 60 == 0:
            self._purge(now)
        self._admit_queued(now)
        for job in self._scheduler.schedule(self._pending):
            self._start(job, now)
        if self._serving is not None:
            self._serving.step(now)
            self._serving_totals.add(self._serving, now)
        telemetry.step_gpus(self._gpus, self._noise.random)
        for region in self._clouds:
            region.step()
        if now % HISTORY_EVERY_S == 0:
            self._record_history(now)

    # ----------------------------------------------------------------- readings

    def gpu_reading(self) -> GpuReading:
        view = telemetry.gpu_view
        return GpuReading(tuple([view(g) for g in self._all_gpus()]), self._now)

    def _all_gpus(self) -> list[SimGpu]:
        if not self._clouds:
            return self._gpus
        return self._gpus + [g for region in self._clouds for g in region.gpus]

    def jobs_reading(self) -> JobsReading:
        active: dict[str, int] = {}
        for job in self._jobs.values():
            if job.cronjob is not None and job.state in (JobState.PENDING, JobState.RUNNING):
                active[job.cronjob] = active.get(job.cronjob, 0) + 1
        cronjobs = tuple(
            CronJob(c.uid, c.name, c.namespace, c.schedule, c.created, c.suspended, c.last, c.next,
                    c.gpus, c.mig_profile, active.get(c.name, 0))
            for c in self._cronjobs
        )
        nodes = tuple(
            Node(i.node_name, i.model.label, len(i.whole), len(i.whole), len(i.whole) - i.free,
                 i.instance_id, "mixed" if i.slices else None, i.mig_capacity, i.ready,
                 mig_allocated=_mig_held(i) if i.slices else ())
            for i in self._scheduler.nodes
        )
        if self._serving is not None:
            nodes += self._serving.nodes()
        jobs = tuple([j.to_model() for j in self._jobs.values() if j.gang is None])
        jobs += tuple(sorted((g.to_model() for g in self._gangs), key=lambda j: j.created))
        if self._kueue is None:
            return JobsReading(jobs + self._archive_view, cronjobs, nodes, self._now)
        queued = self._kueue.compose(jobs, self._now, self._gangs, self._scheduler)
        return JobsReading(queued.jobs + self._archive_view, cronjobs, nodes, self._now, queues=queued.queues)

    def queueing(self) -> SimKueue:
        """The cluster's Kueue (ValueError, in the backend's words, where it runs none)."""
        if self._kueue is None:
            raise ValueError("this cluster serves no Kueue (kueue.x-k8s.io)")
        return self._kueue

    def services_reading(self) -> ServicesReading:
        """The inference pool's services and their pods' serving figures (none without a pool)."""
        if self._serving is None:
            return ServicesReading((), self._now)
        return services_reading(self._serving, self._now)

    @property
    def serving_pool(self) -> ServingPool:
        """The inference pool (KeyError when this world has none)."""
        if self._serving is None:
            raise KeyError("this simulated cluster serves no models")
        return self._serving

    def serving_metrics(self) -> str:
        """The pool's servers' ``/metrics`` (vLLM's and Triton's families), for the exporter."""
        return render_serving(self._serving, self._serving_totals) if self._serving is not None else ""

    def scale_service(self, namespace: str, name: str, replicas: int) -> None:
        """Set a pool service's replicas (KeyError for a service the pool does not hold)."""
        if self._serving is None:
            raise KeyError(f"no service {namespace}/{name} in the cluster")
        self._serving.scale(namespace, name, replicas, self._now)

    def restart_service(self, namespace: str, name: str) -> None:
        """Replace every pod of a pool service (a rollout restart)."""
        if self._serving is None:
            raise KeyError(f"no service {namespace}/{name} in the cluster")
        self._serving.restart(namespace, name, self._now)

    def cloud_reading(self) -> CloudReading:
        now = self._now
        return CloudReading(tuple([instance_model(i, now) for i in self._instances.values()]), now)

    def instance_types(self) -> tuple[InstanceType, ...]:
        """The catalog of GPU instance types this cloud offers."""
        return catalog.INSTANCE_TYPES

    def spot_prices(self) -> tuple[SpotPrice, ...]:
        """Current spot price of every catalog type in every zone."""
        return tuple(SpotPrice(t, az, p, self._now) for (t, az), p in self._spot_prices.items())

    def gpu_history(self, uuid: str, since: float | None = None) -> tuple[GpuSample, ...]:
        """Samples of one GPU every 5 s over the last 10 minutes, oldest first.

        Raises:
            KeyError: no such GPU in the fleet now.
        """
        gpu = self._gpu_by_uuid[uuid]
        floor = max(gpu.born, since if since is not None else -math.inf)
        hist = gpu.hist
        out = []
        for k in range(HISTORY_LEN):
            pos = (self._hist_pos + k) % HISTORY_LEN
            ts = self._hist_ts[pos]
            if ts >= floor and hist is not None:
                b = 4 * pos
                out.append(GpuSample(ts, round(hist[b], 1), float(round(hist[b + 1])),
                                     round(hist[b + 2], 1), round(hist[b + 3], 1)))
        return tuple(out)

    def _record_history(self, now: float) -> None:
        pos = self._hist_pos
        self._hist_ts[pos] = now
        b = 4 * pos
        for g in self._all_gpus():
            h = g.hist
            if h is not None:
                h[b] = g.util
                h[b + 1] = g.mem
                h[b + 2] = g.temp
                h[b + 3] = g.power
        self._hist_pos = (pos + 1) % HISTORY_LEN

    # ----------------------------------------------------------------- fleet

    def _build_instance(self, plan: InstancePlan) -> None:
        """Create an instance that has been running since ``age_days`` before the start."""
        rng = self._rng
        launch = math.floor(self._now - plan.age_days * 86400.0 - rng.uniform(0.0, 6 * 3600.0))
        price = self._price(plan.instance_type, plan.az, plan.market)
        inst = new_instance(self._ids, plan.instance_type, plan.az, plan.market, price, launch,
                            plan.name, plan.owner, plan.project, plan.mig_gpu)
        running = launch + rng.randint(40, 90)
        inst.set_state(InstanceState.RUNNING, running)
        if plan.stopped_hours:
            stop = math.floor(launch + (self._now - launch) * rng.uniform(0.3, 0.6))
            inst.set_state(InstanceState.STOPPING, stop)
            inst.set_state(InstanceState.STOPPED, stop + rng.randint(20, 60))
            restart = stop + int(plan.stopped_hours * 3600)
            inst.set_state(InstanceState.PENDING, restart)
            running = restart + rng.randint(40, 90)
            inst.set_state(InstanceState.RUNNING, running)
        self._instances[inst.instance_id] = inst
        self._join(inst, running)


def _mig_held(inst: SimInstance) -> tuple[tuple[str, int], ...]:
    """MIG devices held by jobs on a node, per profile, in the order of its capacity."""
    held: dict[str, int] = {}
    for sl in inst.slices:
        if sl.job is not None:
            held[sl.profile] = held.get(sl.profile, 0) + 1
    return tuple((profile, held.get(profile, 0)) for profile, _count in inst.mig_capacity)
