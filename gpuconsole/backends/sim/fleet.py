"""The instances of the simulated cloud: the default demo fleet, scaled fleets, and how one
instance is created and given its GPUs when its node joins the cluster.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from gpuconsole.backends.sim import catalog
from gpuconsole.backends.sim.ids import IdFactory
from gpuconsole.backends.sim.state import SimGpu, SimInstance, SimSlice
from gpuconsole.model import Market, Tags

_SHORT_MODEL: dict[str, str] = {
    catalog.A100_80GB.name: "a100",
    catalog.A100_40GB.name: "a100",
    catalog.H100_80GB.name: "h100",
    catalog.A10G.name: "a10g",
    catalog.T4.name: "t4",
    catalog.L4.name: "l4",
}

_OWNERS_BY_PROJECT: dict[str, tuple[str, ...]] = {
    "nlp": ("alice", "priya"),
    "vision": ("bob", "chen"),
    "research": ("priya", "alice"),
    "inference": ("chen", "bob"),
}


@dataclass(frozen=True, slots=True)
class InstancePlan:
    """An instance the world starts with.

    Attributes:
        age_days: how long before the world's start it was launched.
        mig_gpu: index of the GPU partitioned with MIG, if any.
        stopped_hours: length of one stop in its past (an instance parked over a weekend),
            so its accrued cost is less than price × age.
    """

    instance_type: str
    az: str
    market: Market
    name: str
    owner: str
    project: str
    age_days: float
    mig_gpu: int | None = None
    stopped_hours: float = 0.0


_OD = Market.ON_DEMAND
_SPOT = Market.SPOT

DEFAULT_FLEET: tuple[InstancePlan, ...] = (
    InstancePlan("p4de.24xlarge", "us-east-1a", _OD, "train-a100-01", "alice", "nlp", 18.0, mig_gpu=7),
    InstancePlan("p5.48xlarge", "us-east-1b", _OD, "train-h100-01", "priya", "research", 9.0),
    InstancePlan("g5.12xlarge", "us-west-2a", _OD, "infer-a10g-01", "chen", "inference", 26.0),
    InstancePlan("g5.xlarge", "us-west-2b", _OD, "dev-a10g-01", "bob", "vision", 34.0, stopped_hours=60.0),
    InstancePlan("g5.xlarge", "us-east-1c", _SPOT, "dev-a10g-02", "chen", "vision", 4.0),
    InstancePlan("g4dn.xlarge", "us-east-1a", _SPOT, "ci-t4-01", "bob", "vision", 6.0),
    InstancePlan("g4dn.xlarge", "us-west-2a", _SPOT, "ci-t4-02", "priya", "nlp", 3.0),
    InstancePlan("g6.xlarge", "us-east-1b", _SPOT, "infer-l4-01", "chen", "inference", 11.0),
)


def scaled_fleet(rng: random.Random, nodes: int) -> list[InstancePlan]:
    """``nodes`` instances: mostly 8-GPU A100/H100 training nodes, some 4- and 1-GPU inference
    nodes. The first node is always an A100 node with a MIG GPU so MIG jobs have a home."""
    plans = []
    counters: dict[str, int] = {}
    for i in range(nodes):
        mig_gpu = None
        if i == 0:
            itype, mig_gpu = "p4de.24xlarge", 7
        else:
            r = rng.random()
            if r < 0.55:
                itype = "p4de.24xlarge"
                mig_gpu = 7 if rng.random() < 0.15 else None
            elif r < 0.88:
                itype = "p5.48xlarge"
            elif r < 0.95:
                itype = rng.choice(("g5.12xlarge", "g6.12xlarge"))
            else:
                itype = rng.choice(("g5.xlarge", "g6.xlarge", "g4dn.xlarge"))
        spec = catalog.INSTANCE_TYPE_BY_NAME[itype]
        spot = rng.random() < (0.1 if spec.gpu_count == 8 else 0.5)
        az = rng.choice(catalog.ZONES)
        project = rng.choice(tuple(_OWNERS_BY_PROJECT))
        owner = rng.choice(_OWNERS_BY_PROJECT[project])
        role = "train" if spec.gpu_count == 8 else "infer"
        key = f"{role}-{_SHORT_MODEL[spec.gpu_model]}"
        counters[key] = counters.get(key, 0) + 1
        plans.append(InstancePlan(itype, az, _SPOT if spot else _OD, f"{key}-{counters[key]:03d}",
                                  owner, project, rng.uniform(1.0, 30.0), mig_gpu))
    return plans


def instance_tags(name: str, owner: str, project: str, itype: str, market: Market, az: str,
                  node: str) -> Tags:
    """The tags a team's launch template puts on a GPU node."""
    family = itype.split(".")[0]
    group = f"{family}-{'spot' if market is Market.SPOT else 'od'}"
    return (
        ("Name", name),
        ("Owner", owner),
        ("Project", project),
        ("eks:cluster-name", catalog.CLUSTER_BY_REGION.get(catalog.region_of(az), "gpu")),
        ("eks:nodegroup-name", group),
        ("Node", node),
    )


def new_instance(ids: IdFactory, instance_type: str, az: str, market: Market, price: float,
                 launch_time: float, name: str, owner: str, project: str,
                 mig_gpu: int | None = None) -> SimInstance:
    """A freshly launched (``pending``) instance; its GPUs appear when it starts running."""
    spec = catalog.INSTANCE_TYPE_BY_NAME[instance_type]
    model = catalog.GPU_MODEL_BY_NAME[spec.gpu_model]
    instance_id = ids.instance_id()
    node = ids.node_name(ids.private_ip(az), az)
    tags = instance_tags(name, owner, project, instance_type, market, az, node)
    inst = SimInstance(instance_id, spec, model, az, market, price, launch_time, name, tags, node)
    if mig_gpu is not None and mig_gpu < spec.gpu_count and model is catalog.A100_80GB:
        inst.mig_gpu = mig_gpu
    return inst


def attach_gpus(ids: IdFactory, rng: random.Random, inst: SimInstance, born: float) -> None:
    """Give a running instance its GPUs (new UUIDs each time) and its node's capacity."""
    inst.gpus = []
    inst.whole = []
    inst.slices = []
    for index in range(inst.itype.gpu_count):
        gpu = SimGpu(ids.gpu_uuid(), inst.node_name, index, inst.model,
                     idle_temp=30.0 + 10.0 * rng.random(), busy_temp=68.0 + 12.0 * rng.random(),
                     idle_mem=rng.randrange(0, 500), born=born)
        inst.gpus.append(gpu)
        if index == inst.mig_gpu:
            gpu.settled = False
            gpu.idle_mem = gpu.mem = 0
            for p in catalog.A100_80GB_MIG_LAYOUT:
                sl = SimSlice(ids.mig_uuid(), gpu, p.gi_id, p.profile, p.compute, p.memory_mib)
                gpu.slices.append(sl)
                inst.slices.append(sl)
        else:
            inst.whole.append(gpu)
    inst.free = len(inst.whole)
    counts: dict[str, int] = {}
    for sl in inst.slices:
        counts[sl.profile] = counts.get(sl.profile, 0) + 1
    inst.mig_capacity = tuple(sorted(counts.items()))
