"""GPUs at one moment: the physical board, its MIG slices, vGPUs and the processes holding memory.
"""

from __future__ import annotations

import enum
import re

from gpuconsole.model.value import Value

MIG_COMPUTE_SLICES = 7  # an A100 / H100 splits into seven compute slices
_MIG_PROFILE = re.compile(r"^(?:(\d+)c\.)?(\d+)g\.")


def mig_share(profile: str | None) -> float:
    """Share of a GPU's compute a MIG profile holds: ``"3g.40gb"`` → 3/7, a compute instance
    ``"1c.3g.40gb"`` → 1/7. No profile, or one this does not know, counts as the whole GPU."""
    if not profile:
        return 1.0
    match = _MIG_PROFILE.match(profile)
    if match is None:
        return 1.0
    slices = int(match.group(1) or match.group(2))
    return min(1.0, slices / MIG_COMPUTE_SLICES)


class MigMode(str, enum.Enum):
    """MIG mode of a GPU as NVML reports it."""

    DISABLED = "disabled"
    ENABLED = "enabled"
    NOT_SUPPORTED = "n/a"



class MigSlice(Value):
    """One MIG device (GPU instance + compute instance) carved out of a physical GPU."""

    uuid: str  # "MIG-…", what CUDA_VISIBLE_DEVICES takes
    gpu_uuid: str
    gi_id: int
    ci_id: int
    profile: str  # e.g. "1g.10gb"
    memory_total_mib: int
    memory_used_mib: int = 0
    utilization: float | None = None  # percent; None where the driver cannot say
    pod_uid: str | None = None
    pod: str | None = None  # the pod's name, where a metrics exporter maps it
    namespace: str | None = None


class GpuProcess(Value):
    """A process holding GPU memory, and what the host says about it.

    The host's facts (``user`` … ``parents``) are None or empty where the operating system does
    not say (another PID namespace, no permission), never 0. ``parents`` names the process's
    ancestors, nearest first, up to (not including) the init process, so a process tree can be
    drawn from the GPU processes alone, without reading every process of the host.
    """

    pid: int
    gpu_uuid: str
    name: str
    memory_used_mib: int
    mig_uuid: str | None = None
    user: str | None = None
    pod_uid: str | None = None
    kind: str = "compute"  # "compute" or "graphics"
    command: str = ""
    cpu_percent: float | None = None
    sm_utilization: float | None = None  # percent of the GPU's SMs this process kept busy
    container_id: str | None = None
    ppid: int | None = None
    rss_mib: float | None = None  # resident host memory
    started: float | None = None  # epoch seconds the process started
    parents: tuple[tuple[int, str], ...] = ()  # (pid, name) of its ancestors, nearest first


class VgpuInstance(Value):
    """An active vGPU on a host GPU (what a vGPU host's driver reports)."""

    vgpu_id: int
    type_name: str
    vm_id: str = ""
    memory_used_mib: int | None = None
    utilization: float | None = None


class Gpu(Value):
    """One physical GPU at one moment."""

    uuid: str  # "GPU-…"
    node: str
    index: int
    name: str  # model, e.g. "NVIDIA A100-SXM4-80GB"
    utilization: float  # percent of time a kernel ran
    memory_used_mib: int
    memory_total_mib: int
    temperature_c: int
    power_w: float
    power_limit_w: float
    mig_mode: MigMode = MigMode.DISABLED
    mig_slices: tuple[MigSlice, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    # Telemetry a real source may add; None means "N/A" (the driver or exporter cannot say).
    pci_bus_id: str = ""
    memory_utilization: float | None = None  # percent of time memory was read or written
    sm_clock_mhz: int | None = None
    memory_clock_mhz: int | None = None
    fan_percent: int | None = None
    pcie_rx_kbps: int | None = None
    pcie_tx_kbps: int | None = None
    ecc_volatile_errors: int | None = None
    persistence_mode: bool | None = None
    compute_mode: str | None = None  # "default", "exclusive_process", "prohibited"
    throttle_reasons: tuple[str, ...] = ()
    mig_pending: MigMode | None = None  # the mode after the next reset, where it differs
    virtualization: str | None = None  # "none", "passthrough", "vgpu" (guest), "host_vgpu", "host_vsga"
    vgpu_instances: tuple[VgpuInstance, ...] = ()
    xid_errors: int | None = None  # the last XID error reported (0: none)
    gr_engine_active: float | None = None  # percent, DCGM's profiling counter
    pod: str | None = None  # the pod using the whole GPU, where a metrics exporter maps it
    namespace: str | None = None
    # Names of the fields above that must hold a number but that the driver could not report
    # (e.g. "utilization" of a MIG-enabled GPU, "power_w" of a board without a sensor): the
    # number is 0 and the console shows N/A.
    not_reported: tuple[str, ...] = ()

    @property
    def memory_percent(self) -> float:
        return 100.0 * self.memory_used_mib / self.memory_total_mib if self.memory_total_mib else 0.0

    @property
    def busy(self) -> bool:
        """A GPU counts as busy when it computes or holds a job's memory."""
        if self.mig_mode is MigMode.ENABLED:
            return any(s.memory_used_mib > 0 or (s.utilization or 0) >= 5 for s in self.mig_slices)
        return self.utilization >= 5.0 or bool(self.processes)



class GpuSample(Value):
    """One point of a GPU's history (raw or rolled up)."""

    ts: float
    utilization: float
    memory_used_mib: float
    temperature_c: float
    power_w: float

