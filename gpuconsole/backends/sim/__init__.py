"""The simulated GPU cloud: one deterministic world behind the GPU, job and cloud interfaces.

Demo mode and most tests run on it. ``make_sim`` builds the world and its three faces::

    gpus, jobs, cloud = make_sim(seed=7)
    gpus.poll_gpus()

The names in ``__all__`` are the folder's face: the core and the command line use nothing else
(``render`` writes the world's GPUs as DCGM-exporter metrics, for ``gpuconsole sim-exporter``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from gpuconsole.backends.sim.bench import SimBench
from gpuconsole.backends.sim.exporter import render
from gpuconsole.backends.sim.faults import Fault, FaultMode, FaultPlan
from gpuconsole.backends.sim.sources import (
    SimCloud,
    SimCloudBackend,
    SimGpuSource,
    SimJobBackend,
    SimServicesBackend,
)
from gpuconsole.backends.sim.storms import DEMO_INTERRUPTION_S, STORM_AFTER_S, interrupt_spot
from gpuconsole.backends.sim.world import SimWorld
from gpuconsole.model import SourceKind

__all__ = [
    "DEMO_INTERRUPTION_S",
    "Fault",
    "FaultMode",
    "FaultPlan",
    "SimCloud",
    "SimBench",
    "SimCloudBackend",
    "SimGpuSource",
    "SimJobBackend",
    "SimServicesBackend",
    "SimWorld",
    "make_sim",
    "render",
]


def make_sim(
    seed: int = 7,
    nodes: int | None = None,
    start: float | None = None,
    faults: FaultPlan | None = None,
    clock: Callable[[], float] | None = None,
    jobs: int | None = None,
    interrupt_spot_after: float | None = None,
    serving: bool = False,
    alibaba: bool = False,
    azure: bool = False,
) -> tuple[SimGpuSource, SimJobBackend, SimCloudBackend]:
    """Build a simulated world and the three backend faces that share it.

    Args:
        seed: fixes everything the world does.
        nodes: None for the default demo fleet, N for a scaled fleet of N nodes.
        start: sim time of the first reading; None starts at ``clock()``.
        faults: misbehaviour to inject (``--demo-faults``); None for none.
        clock: what each poll advances the world to; defaults to the wall clock. Tests pass
            a fake clock to step the world exactly.
        jobs: list about this many jobs, the live ones plus static history (``--demo-jobs``).
        interrupt_spot_after: interrupt the oldest spot instance this many seconds after the
            start (the demo's, so its spot recovery acts within minutes); None: only as drawn.
        serving: add the inference pool on nodes of its own (the demo's); its services are read
            through ``SimServicesBackend(gpus.sim)``.
        alibaba: add the demo's Alibaba Cloud region (cn-hangzhou) beside the EC2 fleet.
        azure: add the demo's Azure region (eastus), one of its VMs stopped but not deallocated.
    """
    now = clock if clock is not None else time.time
    world = SimWorld(seed=seed, nodes=nodes, start=math.floor(now()) if start is None else start, jobs=jobs,
                     serving=serving, alibaba=alibaba, azure=azure)
    begin = world._now
    if interrupt_spot_after is not None:
        interrupt_spot(world, begin + interrupt_spot_after, 1)
    storm = faults.get(SourceKind.CLOUD) if faults is not None else None
    if storm is not None and storm.mode is FaultMode.SPOT_STORM:
        interrupt_spot(world, begin + (storm.seconds if storm.seconds is not None else STORM_AFTER_S))
    shared = SimCloud(world, now, faults)
    return SimGpuSource(shared), SimJobBackend(shared), SimCloudBackend(shared)
