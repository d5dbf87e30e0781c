"""GPU telemetry that follows the jobs: utilization, memory, power and a lagging temperature.

A GPU held by a healthy job computes at 60–100 % with noise; a *stalled* job holds its memory
while the GPU idles at 0–3 % — the idle-but-billed GPU the console exists to catch. Power
moves between the board's idle draw and its limit with utilization; temperature moves toward a
target set by utilization with a lag of tens of seconds, as a heat sink does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from gpuconsole.backends.sim.catalog import MIG_TOTAL_COMPUTE
from gpuconsole.backends.sim.state import SimGpu, SimJob
from gpuconsole.model import Gpu, GpuProcess, MigMode, MigSlice

_DISABLED = MigMode.DISABLED
_GPU_FIELDS = ("uuid", "node", "index", "name", "utilization", "memory_used_mib", "memory_total_mib",
               "temperature_c", "power_w", "power_limit_w", "mig_mode", "mig_slices", "processes")


def _gpu_factory() -> Callable[..., Gpu]:
    """A positional constructor for :class:`Gpu` (the fields the simulator reports, the rest at
    their defaults) that fills its slots directly.

    A frozen dataclass's ``__init__`` pays an ``object.__setattr__`` call per field (about 30),
    which is most of the cost of a reading of thousands of GPUs. Where ``Gpu`` is the slotted
    class that starts with the fields below and has plain defaults for the others, writing the
    slot descriptors builds the same immutable value several times faster; any other shape of
    ``Gpu`` falls back to its constructor.
    """
    fields = dataclasses.fields(Gpu)
    names = tuple(f.name for f in fields)
    rest = fields[len(_GPU_FIELDS):]
    if (names[:len(_GPU_FIELDS)] != _GPU_FIELDS or "__slots__" not in Gpu.__dict__
            or any(f.default is dataclasses.MISSING for f in rest)):
        return Gpu
    s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12 = (Gpu.__dict__[n].__set__ for n in _GPU_FIELDS)
    defaults = tuple((Gpu.__dict__[f.name].__set__, f.default) for f in rest)
    new = object.__new__

    def make(uuid: str, node: str, index: int, name: str, util: float, mem: int, total: int,
             temp: int, power: float, limit: float, mig_mode: MigMode,
             mig_slices: tuple[MigSlice, ...], processes: tuple[GpuProcess, ...]) -> Gpu:
        gpu = new(Gpu)
        s0(gpu, uuid)
        s1(gpu, node)
        s2(gpu, index)
        s3(gpu, name)
        s4(gpu, util)
        s5(gpu, mem)
        s6(gpu, total)
        s7(gpu, temp)
        s8(gpu, power)
        s9(gpu, limit)
        s10(gpu, mig_mode)
        s11(gpu, mig_slices)
        s12(gpu, processes)
        for setter, value in defaults:
            setter(gpu, value)
        return gpu

    return make


_make_gpu = _gpu_factory()

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
        view = _make_gpu(g.uuid, g.node, g.index, g.model.name, util, g.mem, g.total,
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
            procs.append(GpuProcess(job.pid, g.uuid, PROCESS_NAME, sl.mem, sl.uuid, job.owner,
                                    pod_uid))
    return Gpu(g.uuid, g.node, g.index, g.model.name, round(g.util, 1), g.mem, g.total,
               int(g.temp), round(g.power, 1), g.limit, MigMode.ENABLED, tuple(slices),
               tuple(procs))


def warm_up(gpus: list[SimGpu], rnd: Callable[[], float]) -> None:
    """Start every GPU at the temperature its current load would long since have reached."""
    step_gpus(gpus, rnd)
    for g in gpus:
        g.temp = g.idle_temp + (g.busy_temp - g.idle_temp) * g.util * 0.01
        g.view = None
