"""A simulated benchmark cluster: experiment Jobs run on the instance type they are pinned to.

A Job pinned by ``nodeSelector`` (``node.kubernetes.io/instance-type``) runs at once on a node of
that type for as long as the workload takes there (public ResNet-50 throughputs, scaled by GPUs
and MIG share, a few per cent of noise; a spot run is now and then evicted). Its own clock
(:meth:`SimBench.advance`) runs an hour of benchmarks in no time, deterministic for a seed.
"""

from __future__ import annotations

import hashlib
import math
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from msgspec.structs import replace as struct_replace

from gpuconsole.backends.base import BackendError, NotSupported
from gpuconsole.model import Job, JobsReading, JobState

INSTANCE_LABEL = "node.kubernetes.io/instance-type"
# ResNet-50 training, images/s per GPU (mixed precision): relative figures of public benchmarks.
GPU_THROUGHPUT = {"H100": 5100.0, "A100": 2900.0, "L40S": 1650.0, "V100": 1400.0, "A10G": 830.0, "L4": 780.0,
                  "T4": 260.0}
# The GPU of each instance family, and how many GPUs a type has.
FAMILY_GPU = {"p5": "H100", "p5e": "H100", "p5en": "H100", "p4d": "A100", "p4de": "A100", "g6e": "L40S",
              "p3": "V100", "p3dn": "V100", "g5": "A10G", "g6": "L4", "gr6": "L4", "g4dn": "T4"}
NOISE_SIGMA = 0.03
EVICTION_CHANCE = 0.12
START_DELAY_S = 45.0  # pulling the image, starting the container
SCALING_LOSS = 0.04  # per doubling of GPUs


def gpu_of(instance_type: str) -> str | None:
    return FAMILY_GPU.get(instance_type.split(".", 1)[0])


def throughput(instance_type: str, gpus: int, mig_share: float = 1.0) -> float:
    """Images/s of ResNet-50 training on ``gpus`` GPUs of ``instance_type`` (0 when unknown)."""
    gpu = gpu_of(instance_type)
    if gpu is None:
        return 0.0
    n = max(gpus, 1)
    return GPU_THROUGHPUT[gpu] * n * (1.0 - SCALING_LOSS) ** math.log2(n) * mig_share


@dataclass(frozen=True, slots=True)
class _BenchJob:
    job: Job
    work: float  # samples
    rate: float
    ends: float
    evicted_at: float | None
    label: str


class SimBench:
    """A cluster of every GPU instance type, for experiment Jobs."""

    name = "sim-bench"

    def __init__(self, seed: int = 7, start: float = 0.0) -> None:
        self.seed = seed
        self.now = start
        self._jobs: dict[tuple[str, str], _BenchJob] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ time
    def clock(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds

    # ------------------------------------------------------------------ jobs
    def poll_jobs(self) -> JobsReading:
        with self._lock:
            jobs = tuple(self._state(b) for b in self._jobs.values())
        return JobsReading(jobs=jobs, cronjobs=(), nodes=(), taken_at=self.now)

    def _state(self, b: _BenchJob) -> Job:
        job = b.job
        if b.evicted_at is not None and self.now >= b.evicted_at:
            return replace_job(job, state=JobState.FAILED, finished=b.evicted_at,
                               pending_reason="Evicted: the spot instance was reclaimed")
        if self.now >= b.ends:
            return replace_job(job, state=JobState.SUCCEEDED, finished=b.ends)
        if job.started is not None and self.now >= job.started:
            return replace_job(job, state=JobState.RUNNING)
        return job

    def submit(self, manifests: list[dict[str, Any]], *, dry_run: bool = False) -> list[str]:
        created = []
        with self._lock:
            for manifest in manifests:
                if manifest.get("kind") != "Job":
                    raise BackendError(f"the benchmark cluster runs Jobs only, not a {manifest.get('kind')}")
                meta = manifest["metadata"]
                key = (meta["namespace"], meta["name"])
                if key in self._jobs:
                    raise BackendError(f'jobs.batch "{meta["name"]}" already exists')
                if not dry_run:
                    self._jobs[key] = self._start(manifest)
                created.append(f"Job {key[0]}/{key[1]}")
        return created

    def _start(self, manifest: dict[str, Any]) -> _BenchJob:
        meta = manifest["metadata"]
        pod = manifest["spec"]["template"]["spec"]
        itype = str((pod.get("nodeSelector") or {}).get(INSTANCE_LABEL, "g5.xlarge"))
        spot = (pod.get("nodeSelector") or {}).get("karpenter.sh/capacity-type") == "spot"
        limits = ((pod["containers"][0].get("resources") or {}).get("limits") or {})
        gpus, share = 1, 1.0
        for resource, count in limits.items():
            if resource == "nvidia.com/gpu":
                gpus = int(count)
            elif resource.startswith("nvidia.com/mig-"):
                gpus, share = 1, int(count) * int(resource.split("-", 1)[1].split("g", 1)[0]) / 7.0
        env = {e["name"]: e.get("value", "") for e in pod["containers"][0].get("env", [])}
        work = float(env.get("BENCH_WORK", "1281167"))
        rng = random.Random(_seed(self.seed, meta["name"]))
        speedup = float(env.get("BENCH_SPEEDUP", "1"))  # inference runs faster than training
        rate = throughput(itype, gpus, share) * speedup * math.exp(rng.gauss(0.0, NOISE_SIGMA))
        rate = max(rate, 1.0)
        started = self.now + START_DELAY_S * (0.5 + rng.random())
        ends = started + work / rate
        evicted = started + (ends - started) * rng.uniform(0.2, 0.9) if spot and rng.random() < EVICTION_CHANCE \
            else None
        job = Job(uid=hashlib.sha1(meta["name"].encode()).hexdigest()[:16], name=meta["name"],
                  namespace=meta["namespace"], state=JobState.PENDING, created=self.now, gpus=gpus,
                  node=f"ip-10-0-{rng.randrange(1, 250)}-{rng.randrange(1, 250)}.{itype}", started=started,
                  image=pod["containers"][0].get("image", ""), owner=(meta.get("labels") or {}).get("owner"),
                  pod=f"{meta['name']}-{rng.randrange(16**5):05x}")
        return _BenchJob(job, work, rate, ends, evicted, env.get("BENCH_LABEL", "samples/s"))

    def delete(self, kind: str, namespace: str, name: str) -> None:
        with self._lock:
            if self._jobs.pop((namespace, name), None) is None:
                raise BackendError(f'jobs.batch "{name}" not found')

    def suspend(self, kind: str, namespace: str, name: str, suspended: bool) -> None:
        raise NotSupported("the benchmark cluster does not suspend jobs")

    def trigger(self, namespace: str, cronjob: str) -> str:
        raise NotSupported("the benchmark cluster has no CronJobs")

    def logs(self, namespace: str, pod: str, *, tail_lines: int = 1000, follow: bool = False,
             stop: threading.Event | None = None) -> Iterator[str]:
        with self._lock:
            found = next((b for b in self._jobs.values() if b.job.pod == pod and b.job.namespace == namespace), None)
        if found is None:
            raise BackendError(f'pods "{pod}" not found')
        yield from _log(found, self.now)[-tail_lines:] if tail_lines else []

    def describe(self, kind: str, namespace: str, name: str) -> str:
        with self._lock:
            b = self._jobs.get((namespace, name))
        if b is None:
            raise BackendError(f'jobs.batch "{name}" not found')
        return f"Job {namespace}/{name} on {b.job.node}: {b.rate:.1f} samples/s"

    def close(self) -> None:
        return None


def replace_job(job: Job, **changes: Any) -> Job:
    return struct_replace(job, **changes)


def _seed(seed: int, name: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{name}".encode()).digest()[:8], "big")


def _log(b: _BenchJob, now: float) -> list[str]:
    """What the benchmark prints: progress every tenth, then the rate when it finishes."""
    started = b.job.started or now
    if now < started:
        return []
    end = min(now, b.evicted_at if b.evicted_at is not None else b.ends)
    lines = [f"benchmark on {b.job.node}: {b.job.gpus} GPU(s), {b.work:.0f} samples"]
    total = b.ends - started
    for k in range(1, 11):
        at = started + total * k / 10
        if at > end:
            break
        lines.append(f"step {k * 10}% loss {2.2 * math.exp(-k / 6):.3f}")
    if b.evicted_at is not None and now >= b.evicted_at:
        lines.append("received SIGTERM: spot interruption")
    elif now >= b.ends:
        lines.append(f"{b.label}: {b.rate:.1f}")
    return lines



