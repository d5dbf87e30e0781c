"""What a simulated training pod prints: a header, a step line every few seconds, a last line.

Every line is a pure function of the pod and its line number, so a log reads the same on every
run and on every machine, any tail of it costs only the lines asked for, and following it is
counting how many lines the pod has printed by now.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

LINE_EVERY_S = 15  # one step line per 15 s of training
STEPS_PER_LINE = 50
STEPS_PER_EPOCH = 2500
EVAL_EVERY = 40  # every 40th step line is an evaluation with a checkpoint
HEADER_LINES = 4

FAILURES = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.15 GiB of which 1.02 GiB is free.",
    "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
    "unhandled system error (run with NCCL_DEBUG=INFO for details)",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "RuntimeError: DataLoader worker (pid 412) is killed by signal: Bus error. It is possible that "
    "dataloader's workers are out of shared memory.",
)


@dataclass(frozen=True, slots=True)
class TrainingPod:
    """What decides a pod's log."""

    job: str
    pod_uid: str
    image: str
    gpus: int  # GPUs of this pod (0 with a MIG device)
    mig_profile: str | None
    workers: int
    rank: int
    started: float
    ended: float | None  # when its container exited, None while it runs
    failed: bool

    @property
    def nproc(self) -> int:
        return max(self.gpus, 1)


def _noise(pod: TrainingPod, index: int) -> float:
    """A number in [-1, 1), fixed for the pod and the line."""
    return zlib.crc32(f"{pod.pod_uid}:{pod.rank}:{index}".encode()) / 2**31 - 1.0


def line_count(pod: TrainingPod, now: float) -> int:
    """How many lines the pod has printed by ``now``."""
    until = pod.ended if pod.ended is not None else now
    steps = max(0, int((until - pod.started) // LINE_EVERY_S))
    return HEADER_LINES + steps + (1 if pod.ended is not None and until >= pod.started else 0)


def line(pod: TrainingPod, index: int, count: int) -> str:
    """Line ``index`` of a log that has ``count`` lines."""
    prefix = f"[rank{pod.rank * pod.nproc}]"
    if index == 0:
        return f"=== {pod.image} · {pod.job} · pod {pod.rank + 1} of {pod.workers} ==="
    if index == 1:
        if pod.workers > 1:
            return (f"+ torchrun --nnodes={pod.workers} --nproc_per_node={pod.nproc} --node_rank={pod.rank} "
                    f"--master_addr={pod.job}-0.{pod.job} --master_port=29500 train.py")
        return f"+ torchrun --standalone --nproc_per_node={pod.nproc} train.py"
    if index == 2:
        device = f"1 MIG device {pod.mig_profile}" if pod.mig_profile else f"{pod.nproc} GPU(s) on this pod"
        return f"{prefix} world size {pod.workers * pod.nproc}, {device}, NCCL 2.21.5, bf16 autocast"
    if index == 3:
        return (f"{prefix} dataset: 1,281,167 samples, global batch {256 * pod.workers}, "
                f"{STEPS_PER_EPOCH} steps/epoch")
    if pod.ended is not None and index == count - 1:
        elapsed = max(0, int(pod.ended - pod.started))
        if pod.failed:
            error = FAILURES[zlib.crc32(pod.pod_uid.encode()) % len(FAILURES)]
            return f"{prefix} {error}"
        return (f"{prefix} training finished in {elapsed // 3600}h{elapsed % 3600 // 60:02d}m: "
                f"final loss {_loss(pod, index - HEADER_LINES):.4f}, saved /checkpoints/{pod.job}/final.pt")
    k = index - HEADER_LINES
    step = (k + 1) * STEPS_PER_LINE
    epoch = step // STEPS_PER_EPOCH + 1
    if (k + 1) % EVAL_EVERY == 0:
        return (f"{prefix} eval epoch {epoch} step {step}: val_loss {_loss(pod, k) + 0.08:.4f} "
                f"accuracy {min(99.0, 40 + 55 * (1 - math.exp(-step / 20000))):.1f}% · "
                f"checkpoint /checkpoints/{pod.job}/step-{step}.pt")
    throughput = 310.0 * pod.nproc * pod.workers * (1 + 0.03 * _noise(pod, -k))
    lr = 3e-4 * min(1.0, step / 2000) * (0.5 * (1 + math.cos(math.pi * min(step, 200_000) / 200_000)))
    return (f"{prefix} epoch {epoch} step {step % STEPS_PER_EPOCH or STEPS_PER_EPOCH}/{STEPS_PER_EPOCH} "
            f"loss {_loss(pod, k):.4f} lr {lr:.2e} {throughput:,.1f} samples/s")


def _loss(pod: TrainingPod, k: int) -> float:
    step = (k + 1) * STEPS_PER_LINE
    return 0.35 + 6.5 * math.exp(-step / 6000) + 0.04 * _noise(pod, k)


def lines(pod: TrainingPod, now: float, start: int | None = None,
          tail: int | None = None) -> tuple[list[str], int, bool]:
    """Lines ``start`` … (or the last ``tail``) printed by ``now``; with the count and whether
    the container has exited (nothing more will come)."""
    count = line_count(pod, now)
    first = max(0, count - tail) if start is None and tail is not None else max(0, start or 0)
    return [line(pod, i, count) for i in range(first, count)], count, pod.ended is not None
