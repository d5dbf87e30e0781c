"""What the demo's regions on other clouds share: their own generators, their GPUs and the
processes that keep them busy.

A region beside the EC2 fleet (Alibaba Cloud's cn-hangzhou, Azure's eastus) draws its instances,
ids, GPUs and telemetry noise from generators of its own, never the world's, so the seeded EC2
part of the world is the same with the region or without. Its GPUs are held by the region's own
serving and training processes, not by the EKS cluster's scheduler; the world steps the region
every second and hands it its instances when they start running or stop (:mod:`.lifecycle`).
"""

from __future__ import annotations

import math
import random
from array import array

from gpuconsole.backends.sim import telemetry
from gpuconsole.backends.sim.ids import IdFactory
from gpuconsole.backends.sim.lifecycle import HISTORY_LEN
from gpuconsole.backends.sim.processes import job_process
from gpuconsole.backends.sim.state import SimGpu, SimInstance, SimJob
from gpuconsole.model import JobState


class CloudRegion:
    """One region of another cloud: its instances and GPUs, stepped by the world every second.

    Args:
        seed: the world's seed (the region's generators are drawn from it, apart).
        cloud: the provider's name (``Instance.cloud``), which also names the generators.
    """

    def __init__(self, seed: int, cloud: str) -> None:
        self.cloud = cloud
        self.rng = random.Random(f"{seed}:{cloud}")
        self.noise = random.Random(f"{seed}:{cloud}:telemetry")
        self.ids = IdFactory(self.rng)
        self.instances: list[SimInstance] = []
        self.gpus: list[SimGpu] = []

    def join(self, inst: SimInstance, born: float) -> None:
        """A running instance's GPUs appear (its node joins the region's own cluster or host)."""
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

    def run(self, gpu: SimGpu, inst: SimInstance, image: str, start: float) -> None:
        """The serving or training process that keeps ``gpu`` busy (its owner: the first tag)."""
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

    def warm_up(self) -> None:
        """Telemetry as it would be after a while (called once its instances are built)."""
        telemetry.warm_up(self.gpus, self.noise.random)

    def step(self) -> None:
        telemetry.step_gpus(self.gpus, self.noise.random)

    def owns(self, inst: SimInstance) -> bool:
        return inst.cloud == self.cloud
