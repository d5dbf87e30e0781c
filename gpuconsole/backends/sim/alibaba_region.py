"""The demo's second cloud: an Alibaba Cloud account's cn-hangzhou region beside the EC2 fleet.

Two inference nodes (gn7i with an NVIDIA A10, gn6i with a Tesla T4) and an eight-A100 gn7e
training node, each an ACK (Container Service for Kubernetes) node of its own cluster, so the
overview, the instances, the budgets and the calculator show two clouds. Its instances, ids, GPUs
and telemetry noise come from generators of its own (never the world's), so the seeded EC2 part
of the world is the same with the region or without: same instances, prices, spend and jobs.
The GPUs are held by the region's own serving and training processes, not by the EKS cluster's
scheduler.
"""

from __future__ import annotations

import math
import random
from array import array

from gpuconsole.backends.sim import catalog, telemetry
from gpuconsole.backends.sim.ids import IdFactory
from gpuconsole.backends.sim.lifecycle import HISTORY_LEN
from gpuconsole.backends.sim.processes import job_process
from gpuconsole.backends.sim.state import SimGpu, SimInstance, SimJob
from gpuconsole.backends.sim.workload import NEMO, TRITON
from gpuconsole.model import InstanceState, JobState, Market

REGION = "cn-hangzhou"
ZONES = ("cn-hangzhou-h", "cn-hangzhou-i", "cn-hangzhou-j")
CLUSTER = "gpu-hangzhou"  # the ACK cluster its nodes join
# (name, type, zone, owner, project, days since launch, what runs on it)
# The imaging team serves from Hangzhou (no demo rule or team budget names it); research trains
# there since yesterday (the fleet budget stays under its limit with them).
NODES = (
    ("hz-infer-a10", "ecs.gn7i-c8g1.2xlarge", "cn-hangzhou-h", "chen", "imaging", 9.0, TRITON),
    ("hz-infer-t4", "ecs.gn6i-c4g1.xlarge", "cn-hangzhou-i", "bob", "imaging", 6.0, TRITON),
    ("hz-train-a100", "ecs.gn7e-c16g1.32xlarge", "cn-hangzhou-h", "priya", "research", 1.5, NEMO),
)
_ID_LETTERS = "0123456789abcdefghijklmnopqrstuvwxyz"


class AlibabaRegion:
    """The region's instances and GPUs, stepped by the world every second.

    Args:
        seed: the world's seed (the region's generators are drawn from it, apart).
        start: the world's start.
    """

    def __init__(self, seed: int, start: float) -> None:
        self.rng = random.Random(f"{seed}:alibaba")
        self.noise = random.Random(f"{seed}:alibaba:telemetry")
        self.ids = IdFactory(self.rng)
        self.instances: list[SimInstance] = []
        self.gpus: list[SimGpu] = []
        for name, itype, zone, owner, project, days, image in NODES:
            inst = self._instance(itype, zone, math.floor(start - days * 86400.0 - self.rng.uniform(0, 6 * 3600.0)),
                                  name, owner, project)
            self.join(inst, inst.launch_time)
            for g in inst.gpus:
                self._run(g, inst, image, start)
            self.instances.append(inst)
        telemetry.warm_up(self.gpus, self.noise.random)

    def instance_id(self) -> str:
        """An ECS instance id: ``i-``, the region's ``bp`` and 18 letters and digits."""
        return "i-bp" + "".join(self.rng.choice(_ID_LETTERS) for _ in range(18))

    def _instance(self, itype: str, zone: str, launch: float, name: str, owner: str, project: str) -> SimInstance:
        spec = catalog.INSTANCE_TYPE_BY_NAME[itype]
        ip = f"192.168.{ZONES.index(zone) * 16 + self.rng.randrange(16)}.{self.rng.randrange(4, 255)}"
        node = f"{REGION}.{ip}"  # how ACK names a node
        tags = (("Owner", owner), ("Project", project), ("ack.aliyun.com", CLUSTER), ("Node", node))
        inst = SimInstance(self.instance_id(), spec, catalog.gpu_model_of(itype), zone, Market.ON_DEMAND,
                           spec.on_demand_price, launch, name, tags, node)
        inst.set_state(InstanceState.RUNNING, launch + self.rng.randint(40, 90))
        return inst

    def join(self, inst: SimInstance, born: float) -> None:
        """A running instance's GPUs appear (its node joins the region's own cluster)."""
        inst.gpus = []
        for index in range(inst.itype.gpu_count):
            gpu = SimGpu(self.ids.gpu_uuid(), inst.node_name, index, inst.model,
                         idle_temp=30.0 + 8.0 * self.rng.random(), busy_temp=66.0 + 10.0 * self.rng.random(),
                         idle_mem=self.rng.randrange(0, 400), born=born)
            gpu.hist = array("f", bytes(16 * HISTORY_LEN))
            inst.gpus.append(gpu)
            self.gpus.append(gpu)
        inst.whole = list(inst.gpus)
        inst.ready = inst.listed = True

    def leave(self, inst: SimInstance) -> None:
        """A stopping or terminated instance's GPUs stop reporting."""
        gone = {id(g) for g in inst.gpus}
        self.gpus = [g for g in self.gpus if id(g) not in gone]

    def _run(self, gpu: SimGpu, inst: SimInstance, image: str, start: float) -> None:
        """The serving or training process that keeps ``gpu`` busy."""
        job = SimJob(self.ids.uuid4(), inst.name, "default", start, 1, None, None, math.inf, image,
                     inst.tags[0][1], self.ids.uuid4())
        job.state = JobState.RUNNING
        job.started = inst.state_since
        job.util_base = self.rng.uniform(55.0, 92.0)
        job.mem_frac = self.rng.uniform(0.5, 0.9)
        job.pid = self.rng.randrange(10_000, 3_000_000)
        gpu.job, gpu.rank, gpu.settled = job, gpu.index, False
        gpu.proc_mem = int(job.mem_frac * gpu.total)
        gpu.mem = gpu.idle_mem + gpu.proc_mem
        gpu.procs = (job_process(job, gpu.uuid, gpu.index, gpu.proc_mem),)

    def step(self) -> None:
        telemetry.step_gpus(self.gpus, self.noise.random)

    def owns(self, inst: SimInstance) -> bool:
        return inst.cloud == "alibaba"
