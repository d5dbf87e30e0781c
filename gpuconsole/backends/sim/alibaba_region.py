"""The demo's second cloud: an Alibaba Cloud account's cn-hangzhou region beside the EC2 fleet.

Two inference nodes (gn7i with an NVIDIA A10, gn6i with a Tesla T4) and an eight-A100 gn7e
training node, each an ACK (Container Service for Kubernetes) node of its own cluster, so the
overview, the instances, the budgets and the calculator show two clouds. Its instances, ids, GPUs
and telemetry noise come from generators of its own (never the world's), so the seeded EC2 part
of the world is the same with the region or without: same instances, prices, spend and jobs
(what every such region shares: :mod:`.cloud_region`).
"""

from __future__ import annotations

import math

from gpuconsole.backends.sim import catalog
from gpuconsole.backends.sim.cloud_region import CloudRegion
from gpuconsole.backends.sim.state import SimInstance
from gpuconsole.backends.sim.workload import NEMO, TRITON
from gpuconsole.model import InstanceState, Market

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


class AlibabaRegion(CloudRegion):
    """The region's instances and GPUs, stepped by the world every second.

    Args:
        seed: the world's seed (the region's generators are drawn from it, apart).
        start: the world's start.
    """

    def __init__(self, seed: int, start: float) -> None:
        super().__init__(seed, "alibaba")
        for name, itype, zone, owner, project, days, image in NODES:
            inst = self._instance(itype, zone, math.floor(start - days * 86400.0 - self.rng.uniform(0, 6 * 3600.0)),
                                  name, owner, project)
            self.join(inst, inst.launch_time)
            for g in inst.gpus:
                self.run(g, inst, image, start)
            self.instances.append(inst)
        self.warm_up()

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
