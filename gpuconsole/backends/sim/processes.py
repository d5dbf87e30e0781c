"""What a simulated job runs on its GPUs: one worker per GPU under its launcher, as on a node.

A PyTorch or NeMo job is ``torchrun`` with one ``python`` worker per GPU, inside its pod's
``containerd-shim``; an inference server's model instances are ``python`` workers under
``tritonserver`` or ``text-generation-launcher`` (vLLM's is its own); a research job is started
by hand in a shell over SSH, so ``bash`` and ``sshd`` sit above its launcher.

Every figure is derived from the job's pid (drawn when its pod starts) and the worker's rank,
never drawn from the world's generators: the world stays deterministic for a seed, and adding a
fact here does not move any other draw.
"""

from __future__ import annotations

import zlib

import msgspec

from gpuconsole.backends.sim import workload
from gpuconsole.backends.sim.state import SimJob
from gpuconsole.model import GpuProcess

SHIM = "containerd-shim"
WORKER = "python"  # every simulated worker is a Python process, as the images run them
TORCHRUN = ("torchrun", "python -u train.py --run {job} --local-rank {rank}")
# image → (the launcher above the workers, or None; a worker's command line)
LAUNCHERS: dict[str, tuple[str | None, str]] = {
    workload.TRITON: ("tritonserver", "python model.py --model-repository=/models --instance {rank}"),
    workload.VLLM: (None, "python -m vllm.entrypoints.openai.api_server --model /models/{job}"),
    workload.TGI: ("text-generation-launcher", "python -m text_generation_server serve /data/{job} --rank {rank}"),
}
INTERACTIVE = frozenset({"research"})  # namespaces whose jobs someone starts from a shell


def job_process(job: SimJob, gpu_uuid: str, rank: int, memory_mib: int, mig_uuid: str | None = None) -> GpuProcess:
    """The worker of ``job`` with ``rank`` on one GPU (or MIG device), its CPU % at rest."""
    launcher, command = LAUNCHERS.get(job.image, TORCHRUN)
    pid = job.pid + rank
    parents: list[tuple[int, str]] = []
    if launcher is not None:
        parents.append((job.pid - 1, launcher))
    if job.namespace in INTERACTIVE:
        parents += [(job.pid - 7, "bash"), (job.pid - 9, "sshd")]
    else:
        parents.append((job.pid - 12, SHIM))
    spread = zlib.crc32(f"{pid}:{rank}".encode())
    cpu = 0.5 + spread % 35 / 10.0 if job.stalled else 60.0 + spread % 180
    rss = 1536.0 + spread % 6656
    return GpuProcess(pid, gpu_uuid, WORKER, memory_mib, mig_uuid, job.owner, job.pod_uid,
                      command=command.format(job=job.name, rank=rank), cpu_percent=cpu,
                      ppid=parents[0][0], rss_mib=rss, started=job.started, parents=tuple(parents))


def at_utilization(proc: GpuProcess, util: float) -> GpuProcess:
    """``proc`` (as :func:`job_process` made it) this second: its SMs as busy as its GPU, and a
    CPU share that follows the GPU's (a trainer's input pipeline works as hard as its kernels)."""
    base = proc.cpu_percent or 0.0
    return msgspec.structs.replace(proc, sm_utilization=util, cpu_percent=round(base * (0.7 + util * 0.003), 1))
