"""The simulated fleet as NVIDIA's DCGM exporter would publish it: Prometheus text format.

``gpuconsole sim-exporter --port N`` serves :func:`render` on ``/metrics`` so a real Prometheus
can scrape the simulated fleet (the bastion demo, the Prometheus tests), with the exporter's
metric names and labels (MIG instances and pods included) and the simulator's unrounded values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpuconsole.model import Gpu, Job, JobsReading, MigSlice

DRIVER_VERSION = "550.54.15"
CONTAINER = "train"  # the simulator's pods run one container of this name

# name, help, type (the exporter's own help texts)
FAMILIES: tuple[tuple[str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W)."),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "Power management limit (in W)."),
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active."),
)
SLICE_FAMILIES = frozenset({"DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"})

IDLE_SM_CLOCK_MHZ = 210
BOOST_SM_CLOCK_MHZ = 1410
MEM_CLOCK_MHZ = 1593


def sm_clock(gpu: Gpu) -> int:
    """The SM clock the exporter reports: the simulator's where it has one, else one that
    follows utilization from the idle clock to the boost clock."""
    if gpu.sm_clock_mhz is not None:
        return gpu.sm_clock_mhz
    if gpu.utilization <= 0.0:
        return IDLE_SM_CLOCK_MHZ
    return int(IDLE_SM_CLOCK_MHZ + (BOOST_SM_CLOCK_MHZ - IDLE_SM_CLOCK_MHZ) * min(gpu.utilization, 100.0) / 100.0)


def memory_clock(gpu: Gpu) -> int:
    return gpu.memory_clock_mhz if gpu.memory_clock_mhz is not None else MEM_CLOCK_MHZ


def memory_copy_util(gpu: Gpu) -> float:
    """What the exporter reports as memory utilization (the simulator's, else a share of the GPU's)."""
    if gpu.memory_utilization is not None:
        return gpu.memory_utilization
    return round(gpu.utilization * 0.4, 1)


def pods_by_uid(jobs: Iterable[Job]) -> dict[str, Job]:
    return {j.pod_uid: j for j in jobs if j.pod_uid and j.pod}


def gpu_pod(gpu: Gpu, pods: Mapping[str, Job]) -> tuple[str, str] | None:
    """``(pod, namespace)`` of the pod holding a whole GPU, as the pod mapping reports it."""
    if gpu.pod:
        return gpu.pod, gpu.namespace or ""
    for proc in gpu.processes:
        job = pods.get(proc.pod_uid or "")
        if job is not None and job.pod:
            return job.pod, job.namespace
    return None


def slice_pod(mig: MigSlice, pods: Mapping[str, Job]) -> tuple[str, str] | None:
    if mig.pod:
        return mig.pod, mig.namespace or ""
    job = pods.get(mig.pod_uid or "")
    return (job.pod, job.namespace) if job is not None and job.pod else None


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if isinstance(value, int):
        return str(value)
    return repr(float(value))


def _labels(gpu: Gpu, pod: tuple[str, str] | None, mig: MigSlice | None = None) -> str:
    parts = [f'gpu="{gpu.index}"', f'UUID="{_escape(gpu.uuid)}"', f'device="nvidia{gpu.index}"',
             f'modelName="{_escape(gpu.name)}"']
    if mig is not None:
        parts.append(f'GPU_I_PROFILE="{_escape(mig.profile)}"')
        parts.append(f'GPU_I_ID="{mig.gi_id}"')
    parts.append(f'Hostname="{_escape(gpu.node)}"')
    parts.append(f'DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}"')
    if pod is not None:
        parts.append(f'container="{CONTAINER}"')
        parts.append(f'namespace="{_escape(pod[1])}"')
        parts.append(f'pod="{_escape(pod[0])}"')
    return "{" + ",".join(parts) + "}"


def gpu_values(gpu: Gpu) -> dict[str, float | int]:
    """The whole-GPU series' values of one GPU, by metric name."""
    values: dict[str, float | int] = {
        "DCGM_FI_DEV_SM_CLOCK": sm_clock(gpu),
        "DCGM_FI_DEV_MEM_CLOCK": memory_clock(gpu),
        "DCGM_FI_DEV_GPU_TEMP": gpu.temperature_c,
        "DCGM_FI_DEV_POWER_USAGE": gpu.power_w,
        "DCGM_FI_DEV_POWER_MGMT_LIMIT": gpu.power_limit_w,
        "DCGM_FI_DEV_GPU_UTIL": gpu.utilization,
        "DCGM_FI_DEV_MEM_COPY_UTIL": memory_copy_util(gpu),
        "DCGM_FI_DEV_XID_ERRORS": gpu.xid_errors or 0,
        "DCGM_FI_DEV_FB_FREE": gpu.memory_total_mib - gpu.memory_used_mib,
        "DCGM_FI_DEV_FB_USED": gpu.memory_used_mib,
    }
    if not gpu.mig_slices:
        active = gpu.gr_engine_active if gpu.gr_engine_active is not None else gpu.utilization
        values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] = round(active / 100.0, 6)
    return values


def slice_values(mig: MigSlice) -> dict[str, float | int]:
    values: dict[str, float | int] = {
        "DCGM_FI_DEV_FB_FREE": mig.memory_total_mib - mig.memory_used_mib,
        "DCGM_FI_DEV_FB_USED": mig.memory_used_mib,
    }
    if mig.utilization is not None:
        values["DCGM_FI_PROF_GR_ENGINE_ACTIVE"] = round(mig.utilization / 100.0, 6)
    return values


def render(gpus: Iterable[Gpu], jobs: JobsReading | None = None) -> str:
    """The text exposition of every GPU (and MIG instance), grouped by metric family."""
    pods = pods_by_uid(jobs.jobs) if jobs is not None else {}
    rows: list[tuple[str, dict[str, float | int]]] = []
    for gpu in gpus:
        rows.append((_labels(gpu, None if gpu.mig_slices else gpu_pod(gpu, pods)), gpu_values(gpu)))
        for mig in gpu.mig_slices:
            rows.append((_labels(gpu, slice_pod(mig, pods), mig), slice_values(mig)))
    out: list[str] = []
    for name, help_text in FAMILIES:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} gauge")
        for labels, values in rows:
            value = values.get(name)
            if value is not None:
                out.append(f"{name}{labels} {_number(value)}")
    out.append("")
    return "\n".join(out)
