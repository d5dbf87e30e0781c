"""The simulated inference pool: GPU Deployments and a StatefulSet on nodes of their own.

An LLM on H100 with vLLM's figures (and an HPA), an embedding model on L4 with Triton's (its
summaries enabled), a vision model on T4 near the guide's 150 frames a second, a risk model on
H100 MIG slices answering in a few milliseconds, and a notebook server that exposes nothing and
idles. The pool's nodes, GPUs and draws are its own (its own generator, never the world's), so
a world with the pool holds the same jobs as one without. A replica holds its GPUs through a
stand-in job, so telemetry, processes and the GPU panes see it as they see any pod.
"""

from __future__ import annotations

import math
import random
from array import array
from collections import deque

from gpuconsole.backends.sim import catalog
from gpuconsole.backends.sim import serving_traffic as st
from gpuconsole.backends.sim.fleet import attach_gpus, new_instance
from gpuconsole.backends.sim.ids import IdFactory
from gpuconsole.backends.sim.lifecycle import HISTORY_LEN
from gpuconsole.backends.sim.processes import job_process
from gpuconsole.backends.sim.state import SimGpu, SimInstance, SimJob, SimSlice, pod_suffix
from gpuconsole.backends.sim.workload import TRITON, VLLM
from gpuconsole.model import InstanceState, Market, Node

H100_MIG = ("1g.10gb", 1, 9856)  # the profile the pool's MIG GPU is cut into, seven times
# (name, type, zone, group, MIG GPU index)
POOL_NODES = (
    ("serve-h100-01", "p5.48xlarge", "us-east-1b", "h100", 7),
    ("serve-l4-01", "g6.xlarge", "us-east-1a", "l4", None),
    ("serve-l4-02", "g6.xlarge", "us-east-1b", "l4", None),
    ("serve-l4-03", "g6.xlarge", "us-east-1c", "l4", None),
    ("serve-t4-01", "g4dn.xlarge", "us-east-1a", "t4", None),
    ("serve-t4-02", "g4dn.xlarge", "us-east-1c", "t4", None),
)
SPECS: tuple[st.ServiceSpec, ...] = (
    st.ServiceSpec("chat", "vllm-llama3", "Deployment", "vllm", VLLM, "h100", replicas=3, gpus=2, peak_rps=14.0,
                   burst=1.5, capacity=7.5, service_ms=1500.0, tokens=240.0, ttft_ms=90.0, slots=64, queue_s=60.0,
                   hpa=(2, 4, "pods vllm:num_requests_waiting 10")),
    st.ServiceSpec("search", "text-embed", "Deployment", "triton", TRITON, "l4", replicas=2, peak_rps=150.0,
                   burst_rps=230.0, capacity=125.0, service_ms=9.0, batch=8.0, errors=0.002, summaries=True),
    st.ServiceSpec("imaging", "ct-imaging", "Deployment", "triton", TRITON, "t4", replicas=2, peak_rps=160.0,
                   capacity=110.0, service_ms=21.0),
    st.ServiceSpec("risk", "risk-scorer", "StatefulSet", "triton", TRITON, "h100", replicas=2, gpus=1,
                   mig_profile=H100_MIG[0], peak_rps=420.0, capacity=450.0, service_ms=1.1, summaries=True),
    st.ServiceSpec("research", "notebook-llm", "Deployment", "", VLLM, "h100", replicas=1, gpus=1),
)
STARTUP_S = {"vllm": 60.0, "triton": 15.0, "": 20.0}  # until a new replica is ready
HISTORY_EVERY_S = 15  # the pool keeps each service's figures this often, for an hour
HISTORY_POINTS = 240


class SimReplica:
    """One pod of a pool service and what it holds."""

    __slots__ = ("devices", "job", "name", "node", "pending_reason", "ready_at", "slice", "started", "uid")

    def __init__(self, name: str, uid: str, job: SimJob) -> None:
        self.name, self.uid, self.job = name, uid, job
        self.node: SimInstance | None = None
        self.devices: list[SimGpu] = []
        self.slice: SimSlice | None = None
        self.started: float | None = None
        self.ready_at: float | None = None
        self.pending_reason: str | None = None


class SimService:
    """One service of the pool: its spec, desired replicas, pods and load."""

    def __init__(self, spec: st.ServiceSpec, uid: str, created: float, template: str) -> None:
        self.spec, self.uid, self.created, self.template = spec, uid, created, template
        self.desired = spec.replicas
        self.replicas: list[SimReplica] = []
        self.load = st.Load()
        self.rollout_until = 0.0  # a rollout progresses until then
        self.ordinal = 0
        # (time, requests/s, p99 ms, tokens/s, GPU use %) every HISTORY_EVERY_S, the last hour
        self.history: deque[tuple[float, float, float, float, float]] = deque(maxlen=HISTORY_POINTS)


class ServingPool:
    """The pool's nodes and services, stepped by the world every second.

    Args:
        seed: the world's seed (the pool's generator is drawn from it, apart).
        start: the world's start; the burst comes a few minutes after it.
    """

    def __init__(self, seed: int, start: float) -> None:
        self.rng = random.Random(f"{seed}:serving")
        self.ids = IdFactory(self.rng)
        self.start = start
        self.instances: list[SimInstance] = []
        self.gpus: list[SimGpu] = []
        for name, itype, az, group, mig in POOL_NODES:
            spec = catalog.INSTANCE_TYPE_BY_NAME[itype]
            launch = math.floor(start - self.rng.uniform(5.0, 20.0) * 86400.0)
            inst = new_instance(self.ids, itype, az, Market.ON_DEMAND, spec.on_demand_price, launch, name,
                                "chen", "serving")
            inst.set_state(InstanceState.RUNNING, launch + self.rng.randint(40, 90))
            attach_gpus(self.ids, self.rng, inst, born=launch)
            inst.tags = (*inst.tags, ("pool", group))
            if mig is not None:
                self._cut_mig(inst, inst.gpus[mig])
            inst.ready = inst.listed = True
            for g in inst.gpus:
                g.hist = array("f", bytes(16 * HISTORY_LEN))
            self.instances.append(inst)
            self.gpus.extend(inst.gpus)
        self.services = [SimService(spec, self.ids.uuid4(), math.floor(start - self.rng.uniform(2.0, 40.0) * 86400.0),
                                    self.ids.suffix(10)) for spec in SPECS]
        for service in self.services:
            for _ in range(service.desired):
                self._add_replica(service, service.created + self.rng.uniform(60.0, 3600.0), ready=True)
            self._backfill(service)

    def _backfill(self, service: SimService) -> None:
        """The hour before the start, as the daily curve had it (no burst)."""
        spec, load = service.spec, st.Load()
        for k in range(HISTORY_POINTS, 0, -1):
            t = self.start - k * HISTORY_EVERY_S
            arriving = st.arrivals(spec, t, t + 86400.0, self.rng.random()) if spec.family else 0.0
            st.step_load(load, spec, arriving, spec.replicas)
            self._record(service, load, t)

    def _record(self, service: SimService, load: st.Load, t: float) -> None:
        spec = service.spec
        if not spec.family:
            service.history.append((t, math.nan, math.nan, math.nan, 1.0))
            return
        p99 = st.quantile(0.99, load.median_s, load.sigma) * 1000.0 if load.served else math.nan
        service.history.append((t, load.served + load.rejected, p99, load.served * spec.tokens if spec.tokens else math.nan,
                                15.0 + 80.0 * load.utilization))

    def _cut_mig(self, inst: SimInstance, gpu: SimGpu) -> None:
        inst.whole.remove(gpu)
        gpu.settled = False
        gpu.idle_mem = gpu.mem = 0
        profile, compute, memory = H100_MIG
        for gi in range(7):
            sl = SimSlice(self.ids.mig_uuid(), gpu, 7 + gi, profile, compute, memory)
            gpu.slices.append(sl)
            inst.slices.append(sl)
        inst.mig_capacity = ((profile, 7),)

    # ------------------------------------------------------------------ pods
    def _pod_name(self, service: SimService, uid: str) -> str:
        if service.spec.kind == "StatefulSet":
            name = f"{service.spec.name}-{service.ordinal}"
            service.ordinal += 1
            return name
        return f"{service.spec.name}-{service.template}-{pod_suffix(uid, 0)}"

    def _add_replica(self, service: SimService, at: float, *, ready: bool = False) -> SimReplica:
        spec = service.spec
        uid = self.ids.uuid4()
        job = SimJob(service.uid, spec.name, spec.namespace, at, spec.gpus, spec.mig_profile, None, math.inf,
                     spec.image, "chen", uid)
        job.pid = self.rng.randrange(10_000, 3_000_000)
        job.started = at
        replica = SimReplica(self._pod_name(service, uid), uid, job)
        service.replicas.append(replica)
        self._place(service, replica, at)
        if ready and replica.node is not None:
            replica.ready_at = at
        return replica

    def _place(self, service: SimService, replica: SimReplica, at: float) -> None:
        spec = service.spec
        group = [i for i in self.instances if ("pool", spec.node_group) in i.tags]
        if spec.mig_profile:
            free_slices = [sl for i in group for sl in i.slices if sl.job is None and sl.profile == spec.mig_profile]
            if free_slices:
                self._hold(replica, service, free_slices[0].gpu.node, [], free_slices[0], at)
                return
            want = f"nvidia.com/mig-{spec.mig_profile}"
        else:
            for inst in group:
                free = [g for g in inst.whole if g.job is None]
                if len(free) >= spec.gpus:
                    self._hold(replica, service, inst.node_name, free[:spec.gpus], None, at)
                    return
            want = "nvidia.com/gpu"
        nodes = sum(1 for _ in self.instances)
        replica.pending_reason = f"0/{nodes} nodes are available: {nodes} Insufficient {want}."

    def _hold(self, replica: SimReplica, service: SimService, node: str, gpus: list[SimGpu], part: SimSlice | None,
              at: float) -> None:
        job = replica.job
        replica.node = next(i for i in self.instances if i.node_name == node)
        replica.pending_reason = None
        replica.started = at
        replica.ready_at = at + STARTUP_S[service.spec.family]
        job.util_base = 0.0
        job.mem_frac = 0.85 if service.spec.family == "vllm" else 0.3
        for rank, g in enumerate(gpus):
            g.job, g.rank, g.settled, g.view = job, rank, False, None
            g.proc_mem = int(job.mem_frac * g.total)
            g.mem = g.idle_mem + g.proc_mem
            g.procs = (job_process(job, g.uuid, rank, g.proc_mem),)
        replica.devices = list(gpus)
        if part is not None:
            part.job = job
            part.mem = int(job.mem_frac * part.memory_total)
            replica.slice = part

    def _release(self, replica: SimReplica) -> None:
        for g in replica.devices:
            g.job, g.procs, g.proc_mem, g.mem, g.settled, g.view = None, (), 0, g.idle_mem, False, None
        if replica.slice is not None:
            replica.slice.job, replica.slice.mem, replica.slice.util = None, 0, 0.0
        replica.devices, replica.slice, replica.node = [], None, None

    # ------------------------------------------------------------------ actions
    def service(self, namespace: str, name: str) -> SimService:
        found = next((s for s in self.services if s.spec.namespace == namespace and s.spec.name == name), None)
        if found is None:
            raise KeyError(f"no service {namespace}/{name} in the cluster")
        return found

    def scale(self, namespace: str, name: str, replicas: int, now: float) -> None:
        """Set the desired replicas: new pods are placed (or wait), the newest go first."""
        if replicas < 0:
            raise ValueError("replicas must be 0 or more")
        service = self.service(namespace, name)
        service.desired = replicas
        while len(service.replicas) > replicas:
            self._release(service.replicas.pop())
            if service.spec.kind == "StatefulSet":
                service.ordinal -= 1
        while len(service.replicas) < replicas:
            self._add_replica(service, now)

    def restart(self, namespace: str, name: str, now: float) -> None:
        """``kubectl rollout restart``: every pod replaced by a new one (one at a time, here at once)."""
        service = self.service(namespace, name)
        old = list(service.replicas)
        service.replicas = []
        service.ordinal = 0
        for replica in old:
            self._release(replica)
        for _ in old:
            self._add_replica(service, now)
        service.rollout_until = now + STARTUP_S[service.spec.family] + 30.0

    def step(self, now: float) -> None:
        """One second of traffic: each service's load, and its replicas' GPUs as busy as it."""
        for service in self.services:
            spec = service.spec
            for replica in service.replicas:
                if replica.node is None:
                    self._place(service, replica, now)
            ready = sum(1 for r in service.replicas if r.ready_at is not None and r.ready_at <= now)
            arriving = st.arrivals(spec, now, self.start, self.rng.random()) if spec.family else 0.0
            st.step_load(service.load, spec, arriving, ready)
            busy = 15.0 + 80.0 * service.load.utilization
            for replica in service.replicas:
                serving = bool(spec.family) and replica.ready_at is not None and replica.ready_at <= now
                replica.job.stalled = not serving  # loading its model, or serving nobody: under 3 %
                replica.job.util_base = busy
            if now % HISTORY_EVERY_S == 0:
                self._record(service, service.load, now)

    def nodes(self) -> tuple[Node, ...]:
        """The pool's nodes as the cluster lists them."""
        out = []
        for inst in self.instances:
            held = sum(1 for g in inst.whole if g.job is not None)
            mig_held = sum(1 for sl in inst.slices if sl.job is not None)
            out.append(Node(inst.node_name, inst.model.label, len(inst.whole), len(inst.whole), held,
                            inst.instance_id, "mixed" if inst.slices else None, inst.mig_capacity, True,
                            mig_allocated=((H100_MIG[0], mig_held),) if inst.slices else ()))
        return tuple(out)
