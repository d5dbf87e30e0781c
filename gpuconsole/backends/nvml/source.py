"""GPU telemetry of this host from NVML (the library behind ``nvidia-smi``), via ``nvidia-ml-py``.

One :class:`NvmlSource` per console: NVML is initialised on the first poll (in the Hub's worker,
under its timeout) and shut down by :meth:`NvmlSource.close`. Handles and fixed facts are read
once, MIG devices and PCIe throughput every few seconds; a field the board or the user's rights
cannot give is None (N/A), never an error.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pynvml

from gpuconsole.backends.base import (
    BackendError,
    BackendUnavailable,
    Capability,
)
from gpuconsole.backends.nvml.procs import (
    ProcessTable,
    SeenProcess,
    SmSamples,
    signal_process,
)
from gpuconsole.backends.nvml.query import (
    COMPUTE_MODES,
    NA,
    VIRTUALIZATION,
    Versioned,
    cuda_version,
    integer,
    mig_modes,
    mig_profile,
    number,
    poll_error,
    query,
    text,
    throttle_names,
    vgpu_instances,
)
from gpuconsole.model import (
    Gpu,
    GpuProcess,
    GpuReading,
    MigMode,
    MigSlice,
)

HINT = "run gpuconsole on a host with the NVIDIA driver, or try it on a simulated fleet: gpuconsole --demo"
MIB = 1024 * 1024
MIG_REFRESH_S = 10.0
PCIE_REFRESH_S = 5.0

send_signal: Callable[[int, int], None] = os.kill  # replaced in tests to play a refusing OS


def library_available() -> bool:
    """Whether the NVML library can be loaded here (no driver call: it cannot hang)."""
    try:
        pynvml._LoadNvmlLibrary()
    except pynvml.NVMLError:
        return False
    except OSError:
        return False
    return True


@dataclass(slots=True)
class _MigDevice:
    handle: Any
    uuid: str
    gi_id: int
    ci_id: int
    profile: str


@dataclass(slots=True)
class _Device:
    """One GPU's handle and the facts that never change while NVML is up."""

    index: int
    handle: Any
    uuid: str
    name: str
    pci_bus_id: str
    mig: list[_MigDevice] = field(default_factory=list)
    mig_listed_at: float = -1e18
    pcie: tuple[int | None, int | None] = (None, None)
    pcie_read_at: float = -1e18
    mig_mode: MigMode | None = None


class NvmlSource:
    """The GPUs of this host, read through NVML.

    Args:
        node: the name GPUs are listed under (default: this host's name).
        clock: wall clock for the readings' time.
        proc: where ``/proc`` is (tests point it elsewhere).
    """

    name: str = "nvml"
    capabilities: frozenset[Capability] = frozenset({Capability.MIG, Capability.PROCESSES, Capability.KILL_PROCESS})

    def __init__(self, node: str | None = None, clock: Callable[[], float] = time.time,
                 proc: Path = Path("/proc")) -> None:
        self.node = node or socket.gethostname().split(".", 1)[0]
        self.clock = clock
        self._lock = threading.Lock()
        self._devices: list[_Device] | None = None
        self._versions: tuple[tuple[str, str], ...] = ()
        self._procs = ProcessTable(proc)
        self._sm = SmSamples()
        self._seen: dict[str, dict[int, SeenProcess]] = {}
        self._unsupported: set[tuple[Any, ...]] = set()
        self._memory = Versioned(("nvmlDeviceGetMemoryInfo", (), {"version": pynvml.nvmlMemory_v2}),
                                 ("nvmlDeviceGetMemoryInfo", (), {}))
        self._throttle = Versioned(("nvmlDeviceGetCurrentClocksEventReasons", (), {}),
                                   ("nvmlDeviceGetCurrentClocksThrottleReasons", (), {}))

    # ------------------------------------------------------------------ life cycle
    def _start(self) -> list[_Device]:
        """Initialise NVML and fetch the handles, once (again after the driver went away)."""
        with self._lock:
            if self._devices is not None:
                return self._devices
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError_LibraryNotFound:
                raise BackendUnavailable("no NVIDIA driver found (the NVML library libnvidia-ml is missing)", HINT) from None
            except pynvml.NVMLError_DriverNotLoaded:
                raise BackendUnavailable("the NVIDIA driver is not loaded", HINT) from None
            except pynvml.NVMLError_NoPermission:
                raise BackendUnavailable("no permission to open the NVIDIA devices (/dev/nvidia*)",
                                         "run gpuconsole as a user who may use the GPUs, or try gpuconsole --demo") from None
            except pynvml.NVMLError_LibRmVersionMismatch:
                raise BackendError("the NVIDIA driver and its NVML library differ in version (upgraded without a reboot?): "
                                   "reboot the host") from None
            except pynvml.NVMLError as exc:
                raise BackendError(f"NVML did not start: {exc}") from None
            try:
                self._versions = tuple((k, v) for k, v in (
                    ("driver", text(query("nvmlSystemGetDriverVersion"))),
                    ("cuda", cuda_version(query("nvmlSystemGetCudaDriverVersion"))),
                    ("nvml", text(query("nvmlSystemGetNVMLVersion"))),
                ) if v)
                devices = []
                for index in range(int(query("nvmlDeviceGetCount") or 0)):
                    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                    pci = query("nvmlDeviceGetPciInfo", handle)
                    devices.append(_Device(index, handle, text(query("nvmlDeviceGetUUID", handle)),
                                           text(query("nvmlDeviceGetName", handle)),
                                           text(getattr(pci, "busId", "")) if pci is not NA else ""))
            except pynvml.NVMLError as exc:
                _shutdown_quietly()
                raise poll_error(exc, "a GPU") from None
            self._devices = devices
            return devices

    def close(self) -> None:
        with self._lock:
            if self._devices is None:
                return
            self._devices = None
            self._unsupported = set()
        _shutdown_quietly()

    # ------------------------------------------------------------------ polling
    def poll_gpus(self) -> GpuReading:
        devices = self._start()
        self._procs.begin_poll()
        gpus = []
        seen: dict[str, dict[int, SeenProcess]] = {}
        for dev in devices:
            try:
                gpu = self._read(dev, seen.setdefault(dev.uuid, {}))
            except pynvml.NVMLError as exc:
                if isinstance(exc, (pynvml.NVMLError_DriverNotLoaded, pynvml.NVMLError_Uninitialized)):
                    self.close()  # start again on the next poll
                raise poll_error(exc, _describe(dev)) from None
            gpus.append(gpu)
        self._seen = seen
        self._procs.forget_except({pid for per_gpu in seen.values() for pid in per_gpu})
        return GpuReading(tuple(gpus), self.clock(), self._versions)

    def _read(self, dev: _Device, seen: dict[int, SeenProcess]) -> Gpu:
        h = dev.handle
        missing: list[str] = []
        util = self._q("nvmlDeviceGetUtilizationRates", h)
        mem = self._memory(h)
        temp = self._q("nvmlDeviceGetTemperature", h, pynvml.NVML_TEMPERATURE_GPU)
        power = self._q("nvmlDeviceGetPowerUsage", h)
        limit = self._q("nvmlDeviceGetEnforcedPowerLimit", h)
        for name, value in (("utilization", util), ("memory", mem), ("temperature_c", temp), ("power_w", power),
                            ("power_limit_w", limit)):
            if value is NA:
                missing.append(name)
        mig_modes_answer = self._q("nvmlDeviceGetMigMode", h)
        mig_mode, mig_pending = mig_modes(mig_modes_answer)
        if dev.mig_mode is not None and dev.mig_mode is not mig_mode:
            # Reset into another mode: what the board supports changed (utilization, for one).
            self._unsupported = {k for k in self._unsupported if h not in k}
            dev.mig_listed_at = -1e18
        dev.mig_mode = mig_mode
        virtualization = VIRTUALIZATION.get(self._q("nvmlDeviceGetVirtualizationMode", h))
        slices: list[MigSlice] = []
        processes: list[GpuProcess] = []
        if mig_mode is MigMode.ENABLED:
            for mig in self._mig_devices(dev):
                slice_processes = self._processes(dev.uuid, mig.handle, mig.uuid, None, seen)
                processes.extend(slice_processes)
                slices.append(self._slice(dev.uuid, mig, slice_processes))
        else:
            samples = self._sm_samples(dev.uuid, h)
            processes = self._processes(dev.uuid, h, None, samples, seen)
        rx, tx = self._pcie(dev)
        persistence = self._q("nvmlDeviceGetPersistenceMode", h)
        memory_total = integer(getattr(mem, "total", None), MIB) if mem is not NA else None
        return Gpu(
            uuid=dev.uuid,
            node=self.node,
            index=dev.index,
            name=dev.name,
            utilization=float(util.gpu) if util is not NA else 0.0,
            memory_used_mib=integer(mem.used, MIB) or 0 if mem is not NA else 0,
            memory_total_mib=memory_total or 0,
            temperature_c=int(temp) if temp is not NA else 0,
            power_w=number(power, 1000.0) or 0.0,
            power_limit_w=number(limit, 1000.0) or 0.0,
            mig_mode=mig_mode,
            mig_slices=tuple(slices),
            processes=tuple(processes),
            pci_bus_id=dev.pci_bus_id,
            memory_utilization=float(util.memory) if util is not NA else None,
            sm_clock_mhz=integer(self._q("nvmlDeviceGetClockInfo", h, pynvml.NVML_CLOCK_SM)),
            memory_clock_mhz=integer(self._q("nvmlDeviceGetClockInfo", h, pynvml.NVML_CLOCK_MEM)),
            fan_percent=integer(self._q("nvmlDeviceGetFanSpeed", h)),
            pcie_rx_kbps=rx,
            pcie_tx_kbps=tx,
            ecc_volatile_errors=integer(self._q("nvmlDeviceGetTotalEccErrors", h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                              pynvml.NVML_VOLATILE_ECC)),
            persistence_mode=None if persistence is NA else bool(persistence),
            compute_mode=COMPUTE_MODES.get(self._q("nvmlDeviceGetComputeMode", h)),
            throttle_reasons=throttle_names(self._throttle(h)),
            mig_pending=mig_pending,
            virtualization=virtualization,
            vgpu_instances=vgpu_instances(h) if virtualization == "host_vgpu" else (),
            not_reported=tuple(missing),
        )

    def _q(self, name: str, *args: Any) -> Any:
        """A device field, remembering the ones this board does not support."""
        return query(name, *args, unsupported=self._unsupported)

    def _pcie(self, dev: _Device) -> tuple[int | None, int | None]:
        now = time.monotonic()
        if now - dev.pcie_read_at >= PCIE_REFRESH_S:
            dev.pcie_read_at = now
            dev.pcie = (integer(self._q("nvmlDeviceGetPcieThroughput", dev.handle, pynvml.NVML_PCIE_UTIL_RX_BYTES)),
                        integer(self._q("nvmlDeviceGetPcieThroughput", dev.handle, pynvml.NVML_PCIE_UTIL_TX_BYTES)))
        return dev.pcie

    def _mig_devices(self, dev: _Device) -> list[_MigDevice]:
        now = time.monotonic()
        if now - dev.mig_listed_at < MIG_REFRESH_S:
            return dev.mig
        found = []
        known = {m.uuid: m for m in dev.mig}
        for i in range(int(self._q("nvmlDeviceGetMaxMigDeviceCount", dev.handle) or 0)):
            try:
                handle = self._q("nvmlDeviceGetMigDeviceHandleByIndex", dev.handle, i)
            except pynvml.NVMLError_NotFound:
                continue  # an empty slot
            if handle is NA:
                continue
            uuid = text(self._q("nvmlDeviceGetUUID", handle))
            if uuid in known:
                found.append(known[uuid])  # the same device: keep its handle (and what it lacks)
                continue
            name = text(self._q("nvmlDeviceGetName", handle))
            gi, ci = self._q("nvmlDeviceGetGpuInstanceId", handle), self._q("nvmlDeviceGetComputeInstanceId", handle)
            profile = mig_profile(name, None, None, None)
            if profile == "mig":
                attrs = self._q("nvmlDeviceGetAttributes", handle)
                if attrs is not NA:
                    profile = mig_profile("", attrs.gpuInstanceSliceCount, attrs.computeInstanceSliceCount,
                                          attrs.memorySizeMB)
            found.append(_MigDevice(handle, uuid,
                                    int(gi) if gi is not NA else -1, int(ci) if ci is not NA else -1, profile))
        dev.mig = sorted(found, key=lambda m: (m.gi_id, m.ci_id))
        dev.mig_listed_at = now
        return dev.mig

    def _sm_samples(self, uuid: str, handle: Any) -> dict[int, float] | None:
        try:
            answer = self._q("nvmlDeviceGetProcessUtilization", handle, self._sm.last_seen(uuid))
        except pynvml.NVMLError_NotFound:
            answer = []  # no sample since the last poll: every process was idle
        return self._sm.read(uuid, answer)

    def _processes(self, gpu_uuid: str, handle: Any, mig_uuid: str | None, sm: dict[int, float] | None,
                   seen: dict[int, SeenProcess]) -> list[GpuProcess]:
        kinds: dict[int, tuple[str, int]] = {}
        for kind, fn in (("compute", "nvmlDeviceGetComputeRunningProcesses"),
                         ("graphics", "nvmlDeviceGetGraphicsRunningProcesses")):
            try:
                listed = query(fn, handle)
            except pynvml.NVMLError_NotFound:
                listed = []
            for p in listed or ():
                used = getattr(p, "usedGpuMemory", None)
                mib = int(used) // MIB if isinstance(used, int) else 0
                pid = int(p.pid)
                if pid in kinds:
                    kinds[pid] = ("compute+graphics", max(mib, kinds[pid][1]))
                else:
                    kinds[pid] = (kind, mib)
        out = []
        for pid, (kind, mib) in kinds.items():
            facts = self._procs.facts(pid, _nvml_process_name)
            if facts is None:
                continue  # it exited between NVML's list and now
            seen[pid] = SeenProcess(facts.created, facts.name, facts.user)
            usage = self._procs.usage(pid, facts)
            out.append(GpuProcess(
                pid=pid, gpu_uuid=gpu_uuid, name=facts.name, memory_used_mib=mib, mig_uuid=mig_uuid,
                user=facts.user, pod_uid=facts.pod_uid, kind=kind, command=facts.command,
                cpu_percent=usage.cpu_percent,
                sm_utilization=None if sm is None else sm.get(pid, 0.0),
                container_id=facts.container_id,
                ppid=usage.ppid, rss_mib=usage.rss_mib, started=facts.created, parents=usage.parents,
            ))
        out.sort(key=lambda p: (-p.memory_used_mib, p.pid))
        return out

    def _slice(self, gpu_uuid: str, mig: _MigDevice, processes: list[GpuProcess]) -> MigSlice:
        mem = self._q("nvmlDeviceGetMemoryInfo", mig.handle)
        util = self._q("nvmlDeviceGetUtilizationRates", mig.handle)
        pod = next((p.pod_uid for p in processes if p.pod_uid), None)
        return MigSlice(mig.uuid, gpu_uuid, mig.gi_id, mig.ci_id, mig.profile,
                        integer(getattr(mem, "total", None), MIB) or 0 if mem is not NA else 0,
                        integer(getattr(mem, "used", None), MIB) or 0 if mem is not NA else 0,
                        float(util.gpu) if util is not NA else None, pod)

    # ------------------------------------------------------------------ actions
    def kill_process(self, gpu_uuid: str, pid: int, sig: int) -> str:
        """Send ``sig`` (SIGTERM or SIGKILL) to a process the last poll saw on ``gpu_uuid``.

        The process must still be the one seen (same start time), so a PID reused by another
        program after the process exited is never signalled.

        Raises:
            BackendError: not a process of that GPU, exited, or not visible from here.
            BackendPermissionDenied: the operating system refused.
        """
        seen = self._seen.get(gpu_uuid, {}).get(pid)
        if seen is None:
            raise BackendError(f"pid {pid} is not a process of GPU {gpu_uuid} (as of the last poll)")
        return signal_process(seen, pid, sig, send_signal)


def _nvml_process_name(pid: int) -> str | None:
    """NVML's name for a PID not visible here; None when NVML no longer knows it either."""
    try:
        return text(query("nvmlSystemGetProcessName", pid))
    except pynvml.NVMLError_NotFound:
        return None


def _describe(dev: _Device) -> str:
    return f"GPU {dev.index} ({dev.uuid}{', ' + dev.pci_bus_id if dev.pci_bus_id else ''})"


def _shutdown_quietly() -> None:
    try:
        pynvml.nvmlShutdown()
    except pynvml.NVMLError:
        pass
