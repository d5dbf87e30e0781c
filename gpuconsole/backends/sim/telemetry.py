"""GPU telemetry that follows the jobs: utilization, memory, power and a lagging temperature.

A GPU held by a healthy job computes at 60–100 % with noise; a *stalled* job holds its memory
while the GPU idles at 0–3 % — the idle-but-billed GPU the console exists to catch. Power
moves between the board's idle draw and its limit with utilization; temperature moves toward a
target set by utilization with a lag of tens of seconds, as a heat sink does.
"""

from __future__ import annotations

from collections.abc import Callable

from gpuconsole.backends.sim.catalog import MIG_TOTAL_COMPUTE
from gpuconsole.backends.sim.state import SimGpu, SimJob
from gpuconsole.model import Gpu, GpuProcess, MigMode, MigSlice

_DISABLED = MigMode.DISABLED


# Share of the gap to the target temperature closed per second (time constant ≈ 12 s).
TEMP_LAG = 0.08
PROCESS_NAME = "python"


def job_utilization(job: SimJob, rnd: Callable[[], float]) -> float:
    """This second's utilization of a job on one GPU or slice: near 0 when it is stalled,
    otherwise its base level ±8 %, at most 100 %."""
    if job.stalled:
        return 3.0 * rnd()
    util = job.util_base + 16.0 * rnd() - 8.0
    return 100.0 if util > 100.0 else util


def step_gpus(gpus: list[SimGpu], rnd: Callable[[], float]) -> None:
    """Advance every GPU's telemetry by one second.

    Args:
        gpus: the GPUs of running instances.
        rnd: the world's telemetry noise source (``random.Random.random``).
    """
    for g in gpus:
        slices = g.slices
        if slices:
            weighted = 0.0
            mem = g.idle_mem
            for sl in slices:
                job = sl.job
                if job is None:
                    sl.util = 0.0
                    continue
                util = job_utilization(job, rnd)
                sl.util = util
                weighted += util * sl.compute
                mem += sl.mem
            util = weighted / MIG_TOTAL_COMPUTE
            g.mem = mem
        else:
            job = g.job
            if job is None:
                if g.settled:
                    continue
                util = 0.0
            else:
                util = job_utilization(job, rnd)
        g.util = util
        idle = g.idle_power
        if util <= 0.0:
            power = idle
        else:
            power = idle + (g.limit - idle) * util * 0.0092 + g.limit * 0.03 * (rnd() - 0.5)
            power = g.limit if power > g.limit else (idle if power < idle else power)
        g.power = power
        target = g.idle_temp + (g.busy_temp - g.idle_temp) * util * 0.01
        gap = target - g.temp
        if util <= 0.0 and not slices and g.job is None and -0.05 < gap < 0.05:
            g.temp = target
            g.settled = True
        else:
            g.temp += gap * TEMP_LAG
        g.view = None


def gpu_view(g: SimGpu) -> Gpu:
    """The frozen :class:`Gpu` a reading reports; an idle settled GPU reuses its last one."""
    if g.settled and g.view is not None:
        return g.view
    if g.slices:
        view = _mig_view(g)
    else:
        util = round(g.util, 1)
        procs = g.procs
        if procs:  # the job's one process per GPU keeps its SMs as busy as the GPU is
            procs = tuple([GpuProcess(p.pid, p.gpu_uuid, p.name, p.memory_used_mib, p.mig_uuid, p.user, p.pod_uid,
                                      p.kind, p.command, p.cpu_percent, util) for p in procs])
        view = Gpu(g.uuid, g.node, g.index, g.model.name, util, g.mem, g.total,
                         int(g.temp), round(g.power, 1), g.limit, _DISABLED, (), procs)
    g.view = view
    return view


def _mig_view(g: SimGpu) -> Gpu:
    slices = []
    procs = []
    for sl in g.slices:
        job = sl.job
        pod_uid = job.pod_uid if job is not None else None
        slices.append(MigSlice(sl.uuid, g.uuid, sl.gi_id, sl.ci_id, sl.profile, sl.memory_total,
                                 sl.mem, round(sl.util, 1), pod_uid))
        if job is not None:
            procs.append(GpuProcess(job.pid, g.uuid, PROCESS_NAME, sl.mem, sl.uuid, job.owner, pod_uid))
    return Gpu(g.uuid, g.node, g.index, g.model.name, round(g.util, 1), g.mem, g.total,
                    int(g.temp), round(g.power, 1), g.limit, MigMode.ENABLED, tuple(slices), tuple(procs))


def warm_up(gpus: list[SimGpu], rnd: Callable[[], float]) -> None:
    """Start every GPU at the temperature its current load would long since have reached."""
    step_gpus(gpus, rnd)
    for g in gpus:
        g.temp = g.idle_temp + (g.busy_temp - g.idle_temp) * g.util * 0.01
        g.view = None
