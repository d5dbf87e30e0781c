"""One way to ask NVML anything: a field the driver cannot give reads as N/A, never an exception.

Every NVML call of the adapter goes through :func:`query`. ``NotSupported`` and ``NoPermission``
become :data:`NA`; ``FunctionNotFound`` (an older driver than the bindings) becomes :data:`NA`
and is logged once per function; a versioned function whose newer form the driver lacks is
resolved to the older form once (:class:`Versioned`). Errors that say the whole device or driver
is gone (``GpuIsLost``, ``DriverNotLoaded``, ``Uninitialized``, …) propagate, so the poll can
say so in one line.

Functions are looked up on the ``pynvml`` module at call time, which is what lets the tests
install a fake NVML layer by replacing ``pynvml.nvml*`` functions.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Sequence
from typing import Any

import pynvml

from gpuconsole.backends.base import BackendError
from gpuconsole.model import MigMode, VgpuInstance

log = logging.getLogger(__name__)


class _NotAvailable:
    """The typed N/A: falsy, prints as ``N/A``, one instance."""

    _instance: _NotAvailable | None = None

    def __new__(cls) -> _NotAvailable:  # noqa: PYI034 - always the one instance
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "N/A"

    __str__ = __repr__


NA: Any = _NotAvailable()

# What the driver says when a field does not exist on this board or needs root: shown as N/A.
_NA_ERRORS: tuple[type[BaseException], ...] = (pynvml.NVMLError_NotSupported, pynvml.NVMLError_NoPermission)
# What says the device or the driver is gone: the poll fails with a clear line.
FATAL_ERRORS: tuple[type[BaseException], ...] = (
    pynvml.NVMLError_GpuIsLost,
    pynvml.NVMLError_DriverNotLoaded,
    pynvml.NVMLError_Uninitialized,
    pynvml.NVMLError_LibRmVersionMismatch,
    pynvml.NVMLError_ResetRequired,
    pynvml.NVMLError_LibraryNotFound,
)

_logged: set[str] = set()
_logged_lock = threading.Lock()


def _log_once(key: str, message: str, *args: object) -> None:
    with _logged_lock:
        if key in _logged:
            return
        _logged.add(key)
    log.info(message, *args)


def query(name: str, *args: Any, unsupported: set[tuple[Any, ...]] | None = None) -> Any:
    """``pynvml.<name>(*args)``, or :data:`NA` where the driver cannot say.

    Args:
        unsupported: where to remember ``(name, *args)`` calls the board answered NotSupported,
            so they are not asked again (a board does not gain a sensor while it runs).

    Raises:
        pynvml.NVMLError: one of :data:`FATAL_ERRORS`, or ``NotFound`` (the caller decides what a
            missing object means: a process that exited, an empty MIG slot).
    """
    if unsupported is not None and (name, *args) in unsupported:
        return NA
    try:
        return getattr(pynvml, name)(*args)
    except pynvml.NVMLError_NotSupported:
        if unsupported is not None:
            unsupported.add((name, *args))
        return NA
    except pynvml.NVMLError_NoPermission:
        return NA
    except pynvml.NVMLError_FunctionNotFound:
        _log_once(name, "NVML: %s is not in this driver; shown as N/A", name)
        return NA
    except (*FATAL_ERRORS, pynvml.NVMLError_NotFound):
        raise
    except pynvml.NVMLError as exc:
        _log_once(f"{name}:{type(exc).__name__}", "NVML: %s failed (%s); shown as N/A", name, exc)
        return NA


class Versioned:
    """A field with newer and older NVML functions: the first the driver has is used from then on.

    Args:
        calls: ``(function name, extra args, extra kwargs)`` from newest to oldest.
    """

    def __init__(self, *calls: tuple[str, tuple[Any, ...], dict[str, Any]]) -> None:
        self._calls = list(calls)

    def __call__(self, handle: Any) -> Any:
        while True:
            name, args, kwargs = self._calls[0]
            try:
                return getattr(pynvml, name)(handle, *args, **kwargs)
            except _NA_ERRORS:
                return NA
            except (pynvml.NVMLError_FunctionNotFound, pynvml.NVMLError_ArgumentVersionMismatch, TypeError):
                if len(self._calls) == 1:
                    _log_once(name, "NVML: %s is not in this driver; shown as N/A", name)
                    return NA
                _log_once(name, "NVML: %s is not in this driver; using %s", name, self._calls[1][0])
                self._calls.pop(0)
            except (*FATAL_ERRORS, pynvml.NVMLError_NotFound):
                raise
            except pynvml.NVMLError as exc:
                _log_once(f"{name}:{type(exc).__name__}", "NVML: %s failed (%s); shown as N/A", name, exc)
                return NA


def text(value: Any) -> str:
    """NVML strings arrive as ``str`` or ``bytes`` depending on the bindings' version."""
    if value is NA or value is None:
        return ""
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def number(value: Any, scale: float = 1.0) -> float | None:
    """``value / scale``, or None for N/A."""
    if value is NA or value is None:
        return None
    return float(value) / scale


def integer(value: Any, scale: int = 1) -> int | None:
    if value is NA or value is None:
        return None
    return int(value) // scale


# --------------------------------------------------------------------------- enumerations

VIRTUALIZATION = {
    pynvml.NVML_GPU_VIRTUALIZATION_MODE_NONE: "none",
    pynvml.NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH: "passthrough",
    pynvml.NVML_GPU_VIRTUALIZATION_MODE_VGPU: "vgpu",
    pynvml.NVML_GPU_VIRTUALIZATION_MODE_HOST_VGPU: "host_vgpu",
    pynvml.NVML_GPU_VIRTUALIZATION_MODE_HOST_VSGA: "host_vsga",
}

COMPUTE_MODES = {
    pynvml.NVML_COMPUTEMODE_DEFAULT: "default",
    pynvml.NVML_COMPUTEMODE_EXCLUSIVE_THREAD: "exclusive_thread",
    pynvml.NVML_COMPUTEMODE_PROHIBITED: "prohibited",
    pynvml.NVML_COMPUTEMODE_EXCLUSIVE_PROCESS: "exclusive_process",
}

# Clock event ("throttle") reasons, in the words nvidia-smi -q uses, lower-cased.
THROTTLE_REASONS: Sequence[tuple[int, str]] = (
    (0x001, "gpu_idle"),
    (0x002, "applications_clocks"),
    (0x004, "sw_power_cap"),
    (0x008, "hw_slowdown"),
    (0x010, "sync_boost"),
    (0x020, "sw_thermal_slowdown"),
    (0x040, "hw_thermal_slowdown"),
    (0x080, "hw_power_brake_slowdown"),
    (0x100, "display_clocks"),
)


def throttle_names(mask: Any) -> tuple[str, ...]:
    if mask is NA or mask is None:
        return ()
    return tuple(name for bit, name in THROTTLE_REASONS if int(mask) & bit)


def cuda_version(value: Any) -> str:
    """``12040`` → ``12.4`` (NVML encodes the CUDA driver version as 1000 × major + 10 × minor)."""
    if value is NA or value is None:
        return ""
    major, rest = divmod(int(value), 1000)
    return f"{major}.{rest // 10}"


_PROFILE_IN_NAME = re.compile(r"\bMIG\s+(\S+)")


def mig_profile(device_name: str, gi_slices: int | None, ci_slices: int | None, memory_mib: float | None) -> str:
    """The MIG profile of a MIG device: ``1g.10gb`` (``1c.2g.20gb`` when the compute instance is
    smaller than its GPU instance).

    The driver names a MIG device ``NVIDIA A100-SXM4-80GB MIG 1g.10gb``; where it does not, the
    name is rebuilt from the slice counts and the memory, rounded up to whole GiB as NVIDIA's
    profile names are (9.5 GiB is ``10gb``, 39.25 GiB is ``40gb``).
    """
    found = _PROFILE_IN_NAME.search(device_name)
    if found:
        return found.group(1)
    if not gi_slices:
        return "mig"
    gb = math.ceil((memory_mib or 0) / 1024)
    base = f"{gi_slices}g.{gb}gb"
    return f"{ci_slices}c.{base}" if ci_slices and ci_slices != gi_slices else base


def mig_modes(modes: Any) -> tuple[MigMode, MigMode | None]:
    """``nvmlDeviceGetMigMode``'s ``[current, pending]`` as (current, pending where it differs)."""
    if modes is NA or not modes:
        return MigMode.NOT_SUPPORTED, None
    current = MigMode.ENABLED if int(modes[0]) == pynvml.NVML_DEVICE_MIG_ENABLE else MigMode.DISABLED
    pending = MigMode.ENABLED if int(modes[1]) == pynvml.NVML_DEVICE_MIG_ENABLE else MigMode.DISABLED
    return current, (pending if pending is not current else None)


def vgpu_instances(handle: Any) -> tuple[VgpuInstance, ...]:
    """A vGPU host's active vGPUs on one GPU: type, VM and framebuffer used."""
    ids = query("nvmlDeviceGetActiveVgpus", handle)
    out = []
    for vgpu in ids or ():
        type_id = query("nvmlVgpuInstanceGetType", vgpu)
        type_name = text(query("nvmlVgpuTypeGetName", type_id)) if type_id is not NA else ""
        vm = query("nvmlVgpuInstanceGetVmID", vgpu)
        vm_id = text(vm[0]) if isinstance(vm, (tuple, list)) and vm else ""
        used = query("nvmlVgpuInstanceGetFbUsage", vgpu)
        out.append(VgpuInstance(int(vgpu), type_name or "vGPU", vm_id, integer(used, 1024 * 1024)))
    return tuple(out)


def poll_error(exc: BaseException, which: str) -> BackendError:
    """One line for an NVML failure that stops a poll."""
    if isinstance(exc, pynvml.NVMLError_GpuIsLost):
        return BackendError(f"{which} is lost: it no longer answers the driver; reset it (nvidia-smi -r) or reboot, "
                            "and see the kernel log for its Xid error")
    if isinstance(exc, pynvml.NVMLError_ResetRequired):
        return BackendError(f"{which} needs a reset (nvidia-smi -r) before it can be read")
    if isinstance(exc, (pynvml.NVMLError_DriverNotLoaded, pynvml.NVMLError_Uninitialized)):
        return BackendError("the NVIDIA driver went away (unloaded or restarting); retrying")
    if isinstance(exc, pynvml.NVMLError_LibRmVersionMismatch):
        return BackendError("the NVIDIA driver and its NVML library differ in version: reboot the host")
    return BackendError(f"NVML failed reading {which}: {exc}")
