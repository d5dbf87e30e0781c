"""GPU training jobs as Kubernetes manifests: one :class:`JobRequest`, checked field by field.

The submit wizard, the CLI and the tests describe a job with a :class:`JobRequest`;
:func:`validate` says what is wrong with it, one line per field, in the form's order;
:func:`manifests` turns it into the objects the API server receives, and :func:`to_yaml` into
what the user reviews. Everything here is pure: no I/O, no client.

What the manifests do, and why:

* **One pod per worker, restartPolicy Never.** Retries are the Job's ``backoffLimit``, so a
  crashed run shows as a failed pod instead of a container restarting in place.
* **GPUs are limits** (``nvidia.com/gpu``, or ``nvidia.com/mig-<profile>`` for a MIG device of the
  device plugin's mixed strategy): extended resources are requested by their limit.
  CPU goes in requests only (a CPU limit throttles data loading); memory in both.
* **/dev/shm is a memory-backed emptyDir**: PyTorch data loaders and NCCL need more shared
  memory than the 64 MiB a container gets by default.
* **Distributed training** (``workers > 1``) is an Indexed Job of N pods (``completionMode:
  Indexed``, ``completions = parallelism = N``) with a headless Service of the same name as the
  pods' ``subdomain``, so pod *i* is reachable as ``<job>-<i>.<service>``. Each pod gets the
  torchrun variables: ``MASTER_ADDR`` (pod 0), ``MASTER_PORT``, ``WORLD_SIZE`` (the number of pods,
  torchrun's ``--nnodes``), ``NODE_RANK`` (the pod's completion index) and ``NPROC_PER_NODE``
  (its GPUs), e.g. ``torchrun --nnodes=$WORLD_SIZE --nproc_per_node=$NPROC_PER_NODE
  --node_rank=$NODE_RANK --master_addr=$MASTER_ADDR --master_port=$MASTER_PORT train.py``.
  A CronJob's runs have names the controller picks, so there ``MASTER_ADDR`` is built from the
  pod's own ``job-name`` label (``$(JOB_NAME)-0.<service>``).
* **A schedule makes it a CronJob** whose ``jobTemplate`` is the Job above; Kubernetes limits a
  CronJob's name to 52 characters because it appends 11 to name each run.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cronsim import CronSim, CronSimError

from gpuconsole.core.money.budgets import namespace_problem

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

_RFC1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_CPU = re.compile(r"^(?:\d+(?:\.\d{1,3})?|\.\d{1,3}|\d+m)$")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_MEMORY_FACTORS = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
                   "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
# An image reference as the distribution spec writes it: [registry[:port]/]path[:tag][@digest].
_HOST = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?))*(?::[0-9]+)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_IMAGE = re.compile(
    rf"^(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)


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


# --------------------------------------------------------------------------- checking


def memory_bytes(text: str) -> float:
    """Bytes of a memory quantity. Raises ValueError when it is not one."""
    match = _MEMORY.match(text.strip())
    if match is None:
        raise ValueError(text)
    return float(match.group(1)) * _MEMORY_FACTORS[match.group(2)]


def _name_problem(req: JobRequest) -> str | None:
    name = req.name
    limit = CRONJOB_NAME_MAX if req.kind == "CronJob" else JOB_NAME_MAX
    if not name:
        return "required"
    if not _RFC1123_LABEL.match(name):
        return "only lowercase a-z, 0-9 and '-' (not at either end)"
    if len(name) > limit:
        why = " (Kubernetes adds 11 to name each run)" if req.kind == "CronJob" else ""
        return f"at most {limit} characters for a {req.kind}{why}, this is {len(name)}"
    if req.distributed:
        if not name[0].isalpha():
            return "a distributed job's name also names its Service: start it with a letter"
        host = len(f"{name}-{req.workers - 1}")
        if host > JOB_NAME_MAX:
            return f"too long for pod host names ({name}-{req.workers - 1} is {host} > {JOB_NAME_MAX})"
    return None


def _preset_problem(name: str, value: str) -> str | None:
    if name == "NVIDIA_DRIVER_CAPABILITIES":
        words = [w.strip() for w in value.split(",")]
        bad = [w for w in words if w not in DRIVER_CAPABILITIES]
        if bad:
            return f"unknown capability {bad[0]!r}: use compute,utility (add video for NVDEC/NVENC)"
    elif name in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        if name == "NVIDIA_VISIBLE_DEVICES" and value in ("all", "none", "void"):
            return None
        items = [w.strip() for w in value.split(",")]
        if not all(w.isdigit() or w.startswith(("GPU-", "MIG-")) for w in items):
            more = "all, none, " if name == "NVIDIA_VISIBLE_DEVICES" else ""
            return f"{more}or GPU indexes / UUIDs separated by commas, e.g. 0,1"
    elif name == "NCCL_DEBUG":
        if value.upper() not in NCCL_DEBUG_LEVELS:
            return f"one of {', '.join(NCCL_DEBUG_LEVELS)}"
    elif name == "NCCL_IB_DISABLE":
        if value not in ("0", "1"):
            return "1 (use sockets, no InfiniBand) or 0"
    elif name == "NCCL_SOCKET_IFNAME":
        if not re.match(r"^[\^=]?[A-Za-z0-9_.:-]+(,[A-Za-z0-9_.:-]+)*$", value):
            return "interface names separated by commas, e.g. eth0 or ^lo,docker0"
    else:
        return f"not a preset: one of {', '.join(PRESETS)}"
    return None


def validate(req: JobRequest) -> dict[str, str]:
    """What is wrong with ``req``: ``{field: one-line message}`` in the form's order; empty when fine.

    Fields are the :class:`JobRequest` attribute names, ``env:<NAME>`` for a preset.
    """
    problems: dict[str, str] = {}

    def check(field: str, message: str | None) -> None:
        if message:
            problems.setdefault(field, message)

    check("name", _name_problem(req))
    if (problem := namespace_problem(req.namespace)) is not None:
        check("namespace", problem)
    if not req.image.strip():
        check("image", "required")
    elif not _IMAGE.match(req.image.strip()) or len(req.image) > 255:
        check("image", "not an image reference like nvcr.io/nvidia/pytorch:24.10-py3")
    if isinstance(req.command, str):
        if "\x00" in req.command:
            check("command", "contains a NUL character")
    elif any(not isinstance(word, str) for word in req.command):
        check("command", "every word of a command list must be a string")
    if not 1 <= req.workers <= MAX_WORKERS:
        check("workers", f"between 1 and {MAX_WORKERS} pods")
    if req.mig_profile:
        if req.mig_profile not in MIG_PROFILES | MEDIA_PROFILES:
            check("mig_profile", "not a MIG profile: e.g. 1g.10gb, 3g.40gb")
        if not 1 <= req.gpus <= MAX_MIG_DEVICES:
            check("gpus", f"with a MIG profile: 1 to {MAX_MIG_DEVICES} MIG devices per pod")
    elif not 0 <= req.gpus <= MAX_GPUS:
        check("gpus", f"between 0 and {MAX_GPUS} GPUs per pod")
    if req.cpu and (not _CPU.match(req.cpu) or float(req.cpu.rstrip("m") or 0) <= 0):
        check("cpu", 'not a CPU amount: like "8", "0.5" or "500m"')
    if req.memory:
        try:
            size = memory_bytes(req.memory)
        except ValueError:
            check("memory", 'not a memory amount: like "64Gi" or "512Mi"')
        else:
            if size <= 0:
                check("memory", "must be more than 0")
            elif size < 2**20:
                check("memory", f"{req.memory} bytes is too little: did you mean {req.memory}Gi?")
    if req.owner and (len(req.owner) > 63 or not _LABEL_VALUE.match(req.owner)):
        check("owner", "a label value: letters, digits, '-', '_' and '.', at most 63")
    for label, value in req.labels + req.node_selector:
        if len(value) > 63 or not _LABEL_VALUE.match(value):
            check("labels", f"{label}={value!r} is not a label value")
    if req.schedule.strip():
        try:
            cron_expression(req.schedule)
        except ValueError as exc:
            check("schedule", str(exc))
    if req.concurrency_policy not in CONCURRENCY_POLICIES:
        check("concurrency_policy", f"one of {', '.join(CONCURRENCY_POLICIES)}")
    if not 0 <= req.backoff_limit <= MAX_BACKOFF:
        check("backoff_limit", f"between 0 and {MAX_BACKOFF} retries")
    if req.active_deadline_seconds is not None and req.active_deadline_seconds <= 0:
        check("active_deadline_seconds", "more than 0 seconds, or empty for no deadline")
    if req.ttl_seconds_after_finished is not None and req.ttl_seconds_after_finished < 0:
        check("ttl_seconds_after_finished", "0 or more seconds, or empty to keep finished jobs")
    seen: set[str] = set()
    for name, value in req.presets:
        if value:
            check(f"env:{name}", _preset_problem(name, value))
            seen.add(name)
    reserved = set(TORCHRUN_VARS) if req.distributed else set()
    for name, _value in req.env:
        if not _ENV_NAME.match(name):
            check("env", f"{name!r} is not a variable name")
        elif name in seen:
            check("env", f"{name} is set twice")
        elif name in reserved:
            check("env", f"{name} is set for distributed training already")
        seen.add(name)
    return problems


# --------------------------------------------------------------------------- the form


def parse_command(text: str) -> tuple[str, ...] | str:
    """A form's command: a JSON list (``["python", "train.py"]``) or a shell line.

    Raises:
        ValueError: it starts like a JSON list but is not a list of strings.
    """
    text = text.strip()
    if not text.startswith("["):
        return text
    try:
        words = json.loads(text)
    except ValueError:
        raise ValueError('a list is JSON: ["python", "train.py"]') from None
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise ValueError('a list is JSON strings: ["python", "train.py"]')
    return tuple(words)


def parse_env(text: str) -> tuple[tuple[str, str], ...]:
    """``KEY=VALUE`` pairs separated by spaces (shell quoting for values with spaces).

    Raises:
        ValueError: a word without ``=`` or unbalanced quotes.
    """
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"cannot split: {exc}") from None
    pairs = []
    for word in words:
        name, sep, value = word.partition("=")
        if not sep or not name:
            raise ValueError(f"{word!r} is not KEY=VALUE")
        pairs.append((name, value))
    return tuple(pairs)


def from_form(values: Mapping[str, str]) -> tuple[JobRequest, dict[str, str]]:
    """A request from a form's text fields (keyed like :func:`validate`'s fields), and what
    could not be read. A field that cannot be read keeps its default in the request."""
    problems: dict[str, str] = {}

    def text(field: str, default: str = "") -> str:
        return values.get(field, default).strip()

    def number(field: str) -> int | None:
        words = text(field).replace(",", "").replace("_", "")
        if not words:
            return None
        try:
            return int(words)
        except ValueError:
            problems[field] = "not a whole number"
            return None

    def whole(field: str, default: int) -> int:
        value = number(field)
        if value is None:
            problems.setdefault(field, "required")
            return default
        return value

    command: tuple[str, ...] | str = ""
    try:
        command = parse_command(values.get("command", ""))
    except ValueError as exc:
        problems["command"] = str(exc)
    env: tuple[tuple[str, str], ...] = ()
    try:
        env = parse_env(values.get("env", ""))
    except ValueError as exc:
        problems["env"] = str(exc)
    req = JobRequest(
        name=text("name"),
        namespace=text("namespace"),
        image=text("image"),
        command=command,
        gpus=whole("gpus", 1),
        mig_profile=text("mig_profile"),
        cpu=text("cpu"),
        memory=text("memory"),
        presets=tuple((p, text(f"env:{p}")) for p in PRESETS if text(f"env:{p}")),
        env=env,
        workers=whole("workers", 1),
        backoff_limit=whole("backoff_limit", 2),
        active_deadline_seconds=number("active_deadline_seconds"),
        ttl_seconds_after_finished=number("ttl_seconds_after_finished"),
        schedule=" ".join(values.get("schedule", "").split()),
        concurrency_policy=text("concurrency_policy", "Forbid") or "Forbid",
        owner=text("owner"),
    )
    return req, problems


# --------------------------------------------------------------------------- manifests


def _labels(req: JobRequest) -> dict[str, str]:
    labels = {MANAGED_BY[0]: MANAGED_BY[1]}
    if req.owner:
        labels["owner"] = req.owner
    labels.update(req.labels)
    return labels


def _command(req: JobRequest) -> list[str] | None:
    if isinstance(req.command, str):
        return ["/bin/sh", "-c", req.command] if req.command.strip() else None
    return list(req.command) or None


def _env(req: JobRequest) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = []
    if req.distributed:
        if req.kind == "CronJob":
            env.append({"name": "JOB_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['job-name']"}}})
            master = f"$(JOB_NAME)-0.{req.name}"
        else:
            master = f"{req.name}-0.{req.name}"
        env += [
            {"name": "MASTER_ADDR", "value": master},
            {"name": "MASTER_PORT", "value": str(MASTER_PORT)},
            {"name": "WORLD_SIZE", "value": str(req.workers)},
            {"name": "NODE_RANK", "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}},
            {"name": "NPROC_PER_NODE", "value": str(req.gpus if req.gpus and not req.mig_profile else 1)},
        ]
    given = dict(req.presets)
    env += [{"name": name, "value": given[name]} for name in PRESETS if given.get(name)]
    env += [{"name": name, "value": value} for name, value in req.env]
    return env


def _resources(req: JobRequest) -> dict[str, dict[str, Any]]:
    requests: dict[str, Any] = {}
    limits: dict[str, Any] = {}
    if req.cpu:
        requests["cpu"] = req.cpu
    if req.memory:
        requests["memory"] = req.memory
        limits["memory"] = req.memory
    if req.mig_profile:
        limits[f"{MIG_RESOURCE_PREFIX}{req.mig_profile}"] = req.gpus
    elif req.gpus:
        limits[GPU_RESOURCE] = req.gpus
    out: dict[str, dict[str, Any]] = {}
    if requests:
        out["requests"] = requests
    if limits:
        out["limits"] = limits
    return out


def pod_template(req: JobRequest) -> dict[str, Any]:
    """The pod template of each worker."""
    container: dict[str, Any] = {"name": CONTAINER, "image": req.image.strip()}
    command = _command(req)
    if command:
        container["command"] = command
    env = _env(req)
    if env:
        container["env"] = env
    resources = _resources(req)
    if resources:
        container["resources"] = resources
    container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    spec: dict[str, Any] = {"restartPolicy": "Never"}
    if req.distributed:
        spec["subdomain"] = req.name
    if req.node_selector:
        spec["nodeSelector"] = dict(req.node_selector)
    spec["containers"] = [container]
    spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    labels = _labels(req)
    if req.distributed:
        labels[INSTANCE_LABEL] = req.name
    return {"metadata": {"labels": labels}, "spec": spec}


def job_spec(req: JobRequest) -> dict[str, Any]:
    """The ``spec`` of the Job (of each run, for a CronJob)."""
    spec: dict[str, Any] = {"backoffLimit": req.backoff_limit}
    if req.distributed:
        spec.update(completionMode="Indexed", completions=req.workers, parallelism=req.workers)
    if req.active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = req.active_deadline_seconds
    if req.ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = req.ttl_seconds_after_finished
    spec["template"] = pod_template(req)
    return spec


def manifests(req: JobRequest) -> list[dict[str, Any]]:
    """The objects to create, in order: the Job or CronJob, then a distributed job's Service."""
    meta = {"name": req.name, "namespace": req.namespace, "labels": _labels(req)}
    if req.kind == "CronJob":
        workload: dict[str, Any] = {
            "apiVersion": "batch/v1", "kind": "CronJob", "metadata": meta,
            "spec": {
                "schedule": " ".join(req.schedule.split()),
                "concurrencyPolicy": req.concurrency_policy,
                "successfulJobsHistoryLimit": 3,
                "failedJobsHistoryLimit": 1,
                "jobTemplate": {"metadata": {"labels": _labels(req)}, "spec": job_spec(req)},
            },
        }
    else:
        workload = {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job_spec(req)}
    out = [workload]
    if req.distributed:
        out.append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": req.name, "namespace": req.namespace, "labels": _labels(req)},
            "spec": {
                "clusterIP": "None",
                "selector": {INSTANCE_LABEL: req.name},
                "publishNotReadyAddresses": True,
                "ports": [{"name": "torchrun", "port": MASTER_PORT, "targetPort": MASTER_PORT}],
            },
        })
    return out


def to_yaml(objects: list[dict[str, Any]]) -> str:
    """The manifests as one YAML stream (``---`` between objects), keys in Kubernetes order."""
    import yaml  # only when YAML is shown: it is not needed to start

    return yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False, width=100)
