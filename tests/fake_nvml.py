"""A fake NVML layer installed at the ``pynvml`` function level.

:meth:`FakeNvml.install` replaces the ``pynvml.nvml*`` functions the adapter calls (and the
library loader) with ones that answer from plain Python objects, using the real module's
structures and error classes, so the adapter runs exactly as on a host with a driver. It can
reproduce what real drivers do to an adapter: fields NotSupported per device, permissions
missing, functions an older driver lacks, a MIG topology with several profiles, vGPU modes,
processes that exit between two calls, a GPU that falls off the bus, a call that hangs, and no
library at all.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pynvml

MIB = 1024 * 1024
GONE_PID_BASE = 90_000_000  # above any Linux pid_max: psutil never finds these


@dataclass
class FakeProcess:
    pid: int
    used_mib: int
    name: str = "python"
    kind: str = "compute"  # "compute", "graphics" or "both"
    vanishes: bool = False  # NVML lists it, but it has exited by the time anyone asks about it


@dataclass(eq=False)
class FakeMig:
    uuid: str
    gi_id: int
    ci_id: int
    profile: str
    total_mib: int
    used_mib: int = 0
    processes: list[FakeProcess] = field(default_factory=list)
    named: bool = True  # the driver names it "... MIG <profile>"
    slices: tuple[int, int] = (1, 1)  # GPU instance and compute instance slice counts
    parent: FakeGpu | None = None
    not_supported: set[str] = field(default_factory=lambda: {"nvmlDeviceGetUtilizationRates"})
    no_permission: set[str] = field(default_factory=set)


@dataclass(eq=False)
class FakeGpu:
    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    bus_id: str = "00000000:1B:00.0"
    util: tuple[int, int] = (87, 41)
    total_mib: int = 81559
    used_mib: int = 40000
    temp: int = 61
    power_mw: int = 412_000
    limit_mw: int = 700_000
    sm_clock: int = 1980
    mem_clock: int = 2619
    fan: int = 0
    pcie: tuple[int, int] = (1200, 800)  # KB/s rx, tx
    ecc: int = 0
    persistence: int = 1
    compute_mode: int = pynvml.NVML_COMPUTEMODE_DEFAULT
    throttle: int = 0
    mig: tuple[int, int] | None = (0, 0)  # current, pending; None: not supported
    virtualization: int = pynvml.NVML_GPU_VIRTUALIZATION_MODE_NONE
    vgpus: list[tuple[int, str, str, int]] = field(default_factory=list)  # id, type name, VM id, MiB used
    processes: list[FakeProcess] = field(default_factory=list)
    sm_samples: list[tuple[int, int, int]] = field(default_factory=list)  # pid, timestamp µs, SM %
    migs: list[FakeMig] = field(default_factory=list)
    max_mig: int = 7
    not_supported: set[str] = field(default_factory=set)
    no_permission: set[str] = field(default_factory=set)
    lost: bool = False

    def __post_init__(self) -> None:
        for mig in self.migs:
            mig.parent = self


def mig_gpu(uuid: str = "GPU-a100-mig", processes: dict[str, list[FakeProcess]] | None = None) -> FakeGpu:
    """An A100 80GB in MIG mode: 3g.40gb, 2g.20gb, 1g.10gb and a 1c.2g.20gb the driver leaves unnamed."""
    processes = processes or {}
    layout = [("3g.40gb", 1, 0, 40192, (3, 3)), ("2g.20gb", 2, 0, 19968, (2, 2)), ("1g.10gb", 9, 0, 9728, (1, 1)),
              ("1c.2g.20gb", 5, 1, 19968, (2, 1))]
    migs = []
    for n, (profile, gi, ci, total, slices) in enumerate(layout):
        procs = processes.get(profile, [])
        migs.append(FakeMig(f"MIG-{uuid[4:]}-{n}", gi, ci, profile, total, sum(p.used_mib for p in procs), procs,
                            named=profile != "1c.2g.20gb", slices=slices))
    return FakeGpu(uuid, name="NVIDIA A100-SXM4-80GB", bus_id="00000000:3B:00.0", util=(0, 0),
                   used_mib=sum(m.used_mib for m in migs), mig=(1, 1), migs=migs, max_mig=7,
                   not_supported={"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetProcessUtilization"})


class FakeNvml:
    """The host NVML would describe; every answer is read from these objects at call time.

    Attributes:
        gpus: the devices, in index order.
        library: False plays a host without ``libnvidia-ml.so.1``.
        driver_loaded: False plays a library without a loaded kernel driver.
        missing: functions the "driver" lacks (FunctionNotFound).
        hang_on: a function that blocks until ``release`` is set.
        calls: how often each function was called.
    """

    def __init__(self, gpus: list[FakeGpu] | None = None) -> None:
        self.gpus: list[FakeGpu] = gpus if gpus is not None else []
        self.library = True
        self.driver_loaded = True
        self.missing: set[str] = set()
        self.hang_on: str | None = None
        self.release = threading.Event()
        self.hanging = threading.Event()
        self.calls: Counter[str] = Counter()
        self.initialised = 0
        self.driver = "550.54.15"
        self.cuda = 12040
        self.library_version = "12.550.54.15"

    # ------------------------------------------------------------------ installing
    def install(self, monkeypatch: Any) -> FakeNvml:
        for name in dir(self):
            if (name.startswith("nvml") and callable(getattr(self, name))) or name == "_LoadNvmlLibrary":
                monkeypatch.setattr(pynvml, name, self._wrap(name, getattr(self, name)))
        return self

    def _wrap(self, name: str, impl: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            if name in self.missing:
                raise pynvml.NVMLError_FunctionNotFound()
            if self.hang_on == name:
                self.hanging.set()
                self.release.wait()
            if name not in ("_LoadNvmlLibrary", "nvmlInit", "nvmlShutdown") and not self.initialised:
                raise pynvml.NVMLError_Uninitialized()
            dev = args[0] if args and isinstance(args[0], (FakeGpu, FakeMig)) else None
            if dev is not None:
                gpu = dev if isinstance(dev, FakeGpu) else dev.parent
                if gpu is not None and gpu.lost:
                    raise pynvml.NVMLError_GpuIsLost()
                if name in dev.not_supported:
                    raise pynvml.NVMLError_NotSupported()
                if name in dev.no_permission:
                    raise pynvml.NVMLError_NoPermission()
            return impl(*args, **kwargs)

        return call

    # ------------------------------------------------------------------ library and system
    def _LoadNvmlLibrary(self) -> None:
        if not self.library:
            raise pynvml.NVMLError_LibraryNotFound()

    def nvmlInit(self) -> None:
        self._LoadNvmlLibrary()
        if not self.driver_loaded:
            raise pynvml.NVMLError_DriverNotLoaded()
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        if not self.initialised:
            raise pynvml.NVMLError_Uninitialized()
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda

    def nvmlSystemGetNVMLVersion(self) -> str:
        return self.library_version

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        for proc in self._all_processes():
            if proc.pid == pid and not proc.vanishes:
                return proc.name
        raise pynvml.NVMLError_NotFound()

    def _all_processes(self) -> list[FakeProcess]:
        out = []
        for gpu in self.gpus:
            out.extend(gpu.processes)
            for mig in gpu.migs:
                out.extend(mig.processes)
        return out

    # ------------------------------------------------------------------ devices
    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError_InvalidArgument()
        return self.gpus[index]

    def nvmlDeviceGetName(self, dev: FakeGpu | FakeMig) -> str:
        if isinstance(dev, FakeMig):
            parent = dev.parent.name if dev.parent else "NVIDIA"
            return f"{parent} MIG {dev.profile}" if dev.named else parent
        return dev.name

    def nvmlDeviceGetUUID(self, dev: FakeGpu | FakeMig) -> str:
        return dev.uuid

    def nvmlDeviceGetPciInfo(self, dev: FakeGpu) -> Any:
        info = pynvml.nvmlPciInfo_t()
        info.busId = dev.bus_id.encode()
        return info

    def nvmlDeviceGetUtilizationRates(self, dev: FakeGpu) -> Any:
        return pynvml.c_nvmlUtilization_t(gpu=dev.util[0], memory=dev.util[1])

    def nvmlDeviceGetMemoryInfo(self, dev: FakeGpu | FakeMig, version: int | None = None) -> Any:
        total, used = dev.total_mib * MIB, dev.used_mib * MIB
        if version:
            return pynvml.c_nvmlMemory_v2_t(version=version, total=total, reserved=512 * MIB,
                                            free=total - used - 512 * MIB, used=used)
        return pynvml.c_nvmlMemory_t(total=total, free=total - used, used=used)

    def nvmlDeviceGetTemperature(self, dev: FakeGpu, sensor: int) -> int:
        return dev.temp

    def nvmlDeviceGetPowerUsage(self, dev: FakeGpu) -> int:
        return dev.power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, dev: FakeGpu) -> int:
        return dev.limit_mw

    def nvmlDeviceGetClockInfo(self, dev: FakeGpu, clock: int) -> int:
        return dev.sm_clock if clock == pynvml.NVML_CLOCK_SM else dev.mem_clock

    def nvmlDeviceGetFanSpeed(self, dev: FakeGpu) -> int:
        return dev.fan

    def nvmlDeviceGetPcieThroughput(self, dev: FakeGpu, counter: int) -> int:
        return dev.pcie[0] if counter == pynvml.NVML_PCIE_UTIL_RX_BYTES else dev.pcie[1]

    def nvmlDeviceGetTotalEccErrors(self, dev: FakeGpu, error_type: int, counter: int) -> int:
        return dev.ecc

    def nvmlDeviceGetPersistenceMode(self, dev: FakeGpu) -> int:
        return dev.persistence

    def nvmlDeviceGetComputeMode(self, dev: FakeGpu) -> int:
        return dev.compute_mode

    def nvmlDeviceGetCurrentClocksEventReasons(self, dev: FakeGpu) -> int:
        return dev.throttle

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, dev: FakeGpu) -> int:
        return dev.throttle

    def nvmlDeviceGetVirtualizationMode(self, dev: FakeGpu) -> int:
        return dev.virtualization

    # ------------------------------------------------------------------ MIG
    def nvmlDeviceGetMigMode(self, dev: FakeGpu) -> list[int]:
        if dev.mig is None:
            raise pynvml.NVMLError_NotSupported()
        return list(dev.mig)

    def nvmlDeviceGetMaxMigDeviceCount(self, dev: FakeGpu) -> int:
        return dev.max_mig

    def nvmlDeviceGetMigDeviceHandleByIndex(self, dev: FakeGpu, index: int) -> FakeMig:
        if index < len(dev.migs):
            return dev.migs[index]
        raise pynvml.NVMLError_NotFound()

    def nvmlDeviceGetGpuInstanceId(self, mig: FakeMig) -> int:
        return mig.gi_id

    def nvmlDeviceGetComputeInstanceId(self, mig: FakeMig) -> int:
        return mig.ci_id

    def nvmlDeviceGetAttributes(self, mig: FakeMig) -> Any:
        attrs = pynvml.c_nvmlDeviceAttributes()
        attrs.gpuInstanceSliceCount, attrs.computeInstanceSliceCount = mig.slices
        attrs.memorySizeMB = mig.total_mib
        return attrs

    # ------------------------------------------------------------------ vGPU
    def nvmlDeviceGetActiveVgpus(self, dev: FakeGpu) -> list[int]:
        return [v[0] for v in dev.vgpus]

    def _vgpu(self, vgpu: int) -> tuple[int, str, str, int]:
        for gpu in self.gpus:
            for v in gpu.vgpus:
                if v[0] == vgpu:
                    return v
        raise pynvml.NVMLError_InvalidArgument()

    def nvmlVgpuInstanceGetType(self, vgpu: int) -> int:
        return 1000 + vgpu

    def nvmlVgpuTypeGetName(self, type_id: int) -> str:
        return self._vgpu(type_id - 1000)[1]

    def nvmlVgpuInstanceGetVmID(self, vgpu: int) -> tuple[str, int]:
        return self._vgpu(vgpu)[2], 0

    def nvmlVgpuInstanceGetFbUsage(self, vgpu: int) -> int:
        return self._vgpu(vgpu)[3] * MIB

    # ------------------------------------------------------------------ processes
    def _listed(self, dev: FakeGpu | FakeMig, kind: str) -> list[Any]:
        procs = dev.processes
        if isinstance(dev, FakeGpu) and dev.migs:
            procs = [p for m in dev.migs for p in m.processes]
        out = []
        for p in procs:
            if p.kind in (kind, "both"):
                out.append(pynvml.nvmlFriendlyObject({
                    "pid": p.pid, "usedGpuMemory": p.used_mib * MIB,
                    "gpuInstanceId": dev.gi_id if isinstance(dev, FakeMig) else 0xFFFFFFFF,
                    "computeInstanceId": dev.ci_id if isinstance(dev, FakeMig) else 0xFFFFFFFF}))
        return out

    def nvmlDeviceGetComputeRunningProcesses(self, dev: FakeGpu | FakeMig) -> list[Any]:
        return self._listed(dev, "compute")

    def nvmlDeviceGetGraphicsRunningProcesses(self, dev: FakeGpu | FakeMig) -> list[Any]:
        return self._listed(dev, "graphics")

    def nvmlDeviceGetProcessUtilization(self, dev: FakeGpu, since: int) -> list[Any]:
        samples = [pynvml.c_nvmlProcessUtilizationSample_t(pid, ts, sm, 0, 0, 0)
                   for pid, ts, sm in dev.sm_samples if ts > since]
        if not samples:
            raise pynvml.NVMLError_NotFound()
        return samples


def standard_host() -> FakeNvml:
    """Three GPUs: a busy H100 (two processes), an A100 in MIG mode with processes on two slices,
    and an older board that cannot report power, ECC or clock event reasons, in passthrough."""
    h100 = FakeGpu("GPU-h100-0000", processes=[FakeProcess(GONE_PID_BASE + 1, 30000, "train.py"),
                                              FakeProcess(GONE_PID_BASE + 2, 9000, "Xorg", kind="graphics")],
                   sm_samples=[(GONE_PID_BASE + 1, 1_000, 50), (GONE_PID_BASE + 1, 2_000, 81)],
                   throttle=0x004)
    a100 = mig_gpu("GPU-a100-0001", {"3g.40gb": [FakeProcess(GONE_PID_BASE + 3, 20000, "infer")],
                                     "1g.10gb": [FakeProcess(GONE_PID_BASE + 4, 4000, "notebook")]})
    old = FakeGpu("GPU-t4-0002", name="Tesla T4", bus_id="00000000:5E:00.0", total_mib=15360, used_mib=0, util=(0, 0),
                  mig=None, virtualization=pynvml.NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH,
                  not_supported={"nvmlDeviceGetPowerUsage", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetFanSpeed"},
                  no_permission={"nvmlDeviceGetPcieThroughput"})
    return FakeNvml([h100, a100, old])
