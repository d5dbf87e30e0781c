"""GPU telemetry that follows the jobs: utilization, memory, power and a lagging temperature.

A GPU held by a healthy job computes at 60–100 % with noise; a *stalled* job holds its memory
while the GPU idles at 0–3 % — the idle-but-billed GPU the console exists to catch. Power
moves between the board's idle draw and its limit with utilization; temperature moves toward a
target set by utilization with a lag of tens of seconds, as a heat sink does. Clocks climb from
the board's idle clock to its boost clock with utilization (GDDR memory clocks down only when no
job holds the GPU), the host link carries a trainer's input, and no uncorrected ECC error is
ever counted; the fan stays N/A, as on these fanless boards (see ``catalog.GpuModel``).
"""

from __future__ import annotations

from collections.abc import Callable

from gpuconsole.backends.sim.catalog import GPU_MODEL_BY_NAME, MIG_TOTAL_COMPUTE
from gpuconsole.backends.sim.processes import at_utilization, job_process
from gpuconsole.backends.sim.state import SimGpu, SimJob
from gpuconsole.model import Gpu, MigMode, MigSlice

_DISABLED = MigMode.DISABLED


# Share of the gap to the target temperature closed per second (time constant ≈ 12 s).
TEMP_LAG = 0.08
CLOCK_STEP_MHZ = 15  # clocks move in the driver's 15 MHz steps
PCIE_RX_SHARE = 0.0004  # of the link, per point of utilization: 4 % of it read at full load
PCIE_TX_SHARE = 0.25  # of what is read, written back (losses, checkpoints, logs)

# Per board, what a reading needs: the idle SM clock, its 15 MHz steps per point of utilization,
# the idle and busy memory clocks and the KB/s read over PCIe per point of utilization.
BOARD: dict[str, tuple[int, float, int, int, float]] = {
    m.name: (m.sm_clock_mhz[0], (m.sm_clock_mhz[1] - m.sm_clock_mhz[0]) / CLOCK_STEP_MHZ / 100.0,
             *m.memory_clock_mhz, m.pcie_mb_s * 1024 * PCIE_RX_SHARE)
    for m in GPU_MODEL_BY_NAME.values()
}


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
            procs = tuple([at_utilization(p, util) for p in procs])
        sm, mem, rx = _clocks_and_link(g.model.name, util, procs)
        view = Gpu(g.uuid, g.node, g.index, g.model.name, util, g.mem, g.total, int(g.temp), round(g.power, 1),
                   g.limit, _DISABLED, (), procs, sm_clock_mhz=sm, memory_clock_mhz=mem, pcie_rx_kbps=rx,
                   pcie_tx_kbps=int(rx * PCIE_TX_SHARE), ecc_volatile_errors=0)
    g.view = view
    return view


def _clocks_and_link(board: str, util: float, held: object) -> tuple[int, int, int]:
    """The SM and memory clocks (MHz) and the KB/s read over PCIe at this utilization; ``held``:
    a job's process keeps the memory clocked up even while it stalls."""
    low, steps, idle_mem, busy_mem, read = BOARD[board]
    return low + int(steps * util) * CLOCK_STEP_MHZ, busy_mem if held or util > 0.0 else idle_mem, int(read * util)


def _mig_view(g: SimGpu) -> Gpu:
    slices = []
    procs = []
    for sl in g.slices:
        job = sl.job
        pod_uid = job.pod_uid if job is not None else None
        slices.append(MigSlice(sl.uuid, g.uuid, sl.gi_id, sl.ci_id, sl.profile, sl.memory_total,
                                 sl.mem, round(sl.util, 1), pod_uid))
        if job is not None:
            procs.append(at_utilization(job_process(job, g.uuid, 0, sl.mem, sl.uuid), round(sl.util, 1)))
    util = round(g.util, 1)
    sm, mem, rx = _clocks_and_link(g.model.name, util, procs)
    return Gpu(g.uuid, g.node, g.index, g.model.name, util, g.mem, g.total, int(g.temp), round(g.power, 1),
               g.limit, MigMode.ENABLED, tuple(slices), tuple(procs), sm_clock_mhz=sm, memory_clock_mhz=mem,
               pcie_rx_kbps=rx, pcie_tx_kbps=int(rx * PCIE_TX_SHARE), ecc_volatile_errors=0)


def warm_up(gpus: list[SimGpu], rnd: Callable[[], float]) -> None:
    """Start every GPU at the temperature its current load would long since have reached."""
    step_gpus(gpus, rnd)
    for g in gpus:
        g.temp = g.idle_temp + (g.busy_temp - g.idle_temp) * g.util * 0.01
        g.view = None
