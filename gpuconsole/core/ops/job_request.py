"""A GPU training job as the user describes it (:class:`JobRequest`), its limits, and its schedule."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from cronsim import CronSim, CronSimError

DEFAULT_IMAGE = "nvcr.io/nvidia/pytorch:24.10-py3"
CONTAINER = "train"
MASTER_PORT = 29500
MAX_GPUS = 64
MAX_MIG_DEVICES = 7
MAX_WORKERS = 256
MAX_BACKOFF = 100
JOB_NAME_MAX = 63
CRONJOB_NAME_MAX = 52
CONCURRENCY_POLICIES = ("Forbid", "Allow", "Replace")
MANAGED_BY = ("app.kubernetes.io/managed-by", "gpuconsole")
INSTANCE_LABEL = "app.kubernetes.io/instance"  # what a distributed job's Service selects
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"  # the Kueue LocalQueue a Job is submitted to
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
GPU_RESOURCE = "nvidia.com/gpu"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"

# The environment presets of the container deployment practice, in the form's order.
PRESETS = (
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "CUDA_VISIBLE_DEVICES",
    "NCCL_DEBUG",
    "NCCL_SOCKET_IFNAME",
    "NCCL_IB_DISABLE",
)
TORCHRUN_VARS = ("JOB_NAME", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "NODE_RANK", "NPROC_PER_NODE")
DRIVER_CAPABILITIES = ("compute", "utility", "video", "graphics", "display", "compat32", "all")
NCCL_DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "TRACE")

# MIG profiles of the GPUs that have MIG: A30; A100 40/80 GB; H100 80 GB; H100 NVL 94 GB; H200; B200.
MIG_PROFILES: frozenset[str] = frozenset({
    "1g.6gb", "2g.12gb", "4g.24gb",
    "1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb",
    "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",
    "1g.12gb", "1g.24gb", "2g.24gb", "3g.47gb", "4g.47gb", "7g.94gb",
    "1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb",
    "1g.23gb", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb",
})
MEDIA_PROFILES: frozenset[str] = frozenset(f"{p}+me" for p in MIG_PROFILES if p.startswith("1g."))

CRON_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


@dataclass(frozen=True, slots=True)
class JobRequest:
    """A GPU job as the user describes it.

    Attributes:
        command: a list (the container's ``command``), a shell line (run by ``/bin/sh -c``, so
            ``$WORLD_SIZE`` and friends expand), or empty for the image's entrypoint.
        gpus: whole GPUs per pod; with ``mig_profile``, MIG devices of that profile per pod.
        cpu, memory: Kubernetes quantities (``"8"``, ``"500m"``; ``"64Gi"``); empty: none asked.
        presets: values of the :data:`PRESETS` variables, ``(name, value)``; an empty value omits it.
        env: any other variables, ``(name, value)``.
        workers: pods of a distributed run (an Indexed Job); 1 for a plain Job.
        schedule: a cron schedule; non-empty makes the request a CronJob.
        owner: the ``owner`` label on every object and pod.
        node_selector: ``(label, value)`` pairs the pods' nodes must carry (an instance type).
        labels: more ``(label, value)`` pairs on every object and pod (an experiment's run).
        queue: a Kueue LocalQueue of the namespace (the Job's ``kueue.x-k8s.io/queue-name``
            label, never its pods', which Kueue would take as plain pods of its own); empty: none.
        volcano_queue: a Volcano queue: the pods are Volcano's to schedule there, a multi-pod
            Job's as one PodGroup (:mod:`.queue_manifest`); empty: none.
    """

    name: str
    namespace: str = "default"
    image: str = DEFAULT_IMAGE
    command: tuple[str, ...] | str = ()
    gpus: int = 1
    mig_profile: str = ""
    cpu: str = ""
    memory: str = ""
    presets: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    workers: int = 1
    backoff_limit: int = 2
    active_deadline_seconds: int | None = None
    ttl_seconds_after_finished: int | None = None
    schedule: str = ""
    concurrency_policy: str = "Forbid"
    owner: str = ""
    node_selector: tuple[tuple[str, str], ...] = ()
    labels: tuple[tuple[str, str], ...] = ()
    queue: str = ""
    volcano_queue: str = ""

    @property
    def kind(self) -> str:
        """``"CronJob"`` with a schedule, else ``"Job"``."""
        return "CronJob" if self.schedule.strip() else "Job"

    @property
    def distributed(self) -> bool:
        return self.workers > 1

    @property
    def total_gpus(self) -> int:
        """GPUs (or MIG devices) of all the pods together."""
        return self.gpus * max(self.workers, 1)


# --------------------------------------------------------------------------- schedules


def cron_expression(schedule: str) -> str:
    """The five-field expression of a Kubernetes schedule (``@daily`` → ``0 0 * * *``).

    Raises:
        ValueError: not a schedule Kubernetes accepts; the message is for the user.
    """
    text = " ".join(schedule.split())
    if not text:
        raise ValueError("empty schedule")
    if text.startswith("@"):
        if text not in CRON_MACROS:
            raise ValueError(f"unknown macro {text}: one of {', '.join(CRON_MACROS)}")
        return CRON_MACROS[text]
    if text.startswith(("TZ=", "CRON_TZ=")):
        raise ValueError("no time zone in the schedule: Kubernetes runs it in the controller's zone (UTC)")
    fields = text.split(" ")
    if len(fields) != 5:
        raise ValueError(f"needs 5 fields (minute hour day month weekday), got {len(fields)}")
    if any(c in text for c in "L#W"):
        raise ValueError("Kubernetes schedules have no L, W or # fields")
    try:
        CronSim(text, datetime(2000, 1, 1, tzinfo=UTC))
    except (CronSimError, ValueError) as exc:
        raise ValueError(f"not a cron schedule: {str(exc).lower() or 'invalid'}") from None
    return text


def next_runs(schedule: str, now: float, count: int = 3) -> list[float]:
    """The next ``count`` run times after ``now`` (UTC, as the CronJob controller runs).

    Raises:
        ValueError: not a valid schedule.
    """
    it = CronSim(cron_expression(schedule), datetime.fromtimestamp(now, UTC))
    return [next(it).timestamp() for _ in range(count)]

