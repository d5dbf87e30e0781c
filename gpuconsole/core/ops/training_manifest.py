"""A distributed training job as the user describes it (:class:`TrainingRequest`): an MPIJob
(``kubeflow.org/v2beta1``, the MPI Operator) or a PyTorchJob (``kubeflow.org/v1``), checked field
by field, read from a form, and turned into the object the API server receives. Pure: no I/O.

An MPIJob's launcher runs the deployment guide's line,
``mpirun -np 8 -hostfile hosts -mca btl_tcp_if_include eth0 python distributed_train.py``, as the
MPI Operator runs it: the operator writes the hostfile (``OMPI_MCA_orte_default_hostfile``), so
the line is ``mpirun -np <workers × slots> -bind-to none -map-by slot``, one ``-x NAME=VALUE`` for
each NCCL setting (and every other variable: the ranks see only what mpirun exports), the
interface as ``-mca btl_tcp_if_include IFACE``, then the script (:func:`mpirun`).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuconsole.core.ops.job_checks import parse_command, parse_env
from gpuconsole.core.ops.job_checks import validate as validate_job
from gpuconsole.core.ops.job_request import DEFAULT_IMAGE, GPU_RESOURCE, MANAGED_BY, MAX_WORKERS, JobRequest

TRAINING_KINDS = ("MPIJob", "PyTorchJob")
API_VERSIONS = {"MPIJob": "kubeflow.org/v2beta1", "PyTorchJob": "kubeflow.org/v1"}
# The NCCL presets of the guide's communication section, in the order mpirun exports them.
NCCL_PRESETS = ("NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE", "NCCL_DEBUG")
DEFAULT_SCRIPTS = {"MPIJob": "python train.py", "PyTorchJob": "torchrun train.py"}
PYTORCH_CONTAINER = "pytorch"  # the Training Operator sets MASTER_ADDR, RANK… in the container of this name
# OpenMPI refuses to start as root without these; the usual training images run as root.
LAUNCHER_ENV = (("OMPI_ALLOW_RUN_AS_ROOT", "1"), ("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"))
WORKER_COMMAND = ("/usr/sbin/sshd", "-De")  # an MPIJob's workers wait for mpirun's ssh (MPI Operator v2)


@dataclass(frozen=True, slots=True)
class TrainingRequest:
    """An MPIJob or a PyTorchJob as the user describes it.

    Attributes:
        kind: ``MPIJob`` or ``PyTorchJob``.
        script: the program and its arguments (``python train.py``; a JSON list too). An MPIJob's
            launcher runs it under :func:`mpirun`; a PyTorchJob's pods run it as it is
            (``torchrun train.py``: torchrun reads the operator's ``PET_*`` variables).
        workers: an MPIJob's workers; a PyTorchJob's workers beside its one master (0: the master alone).
        gpus: GPUs per worker: an MPIJob's ``slotsPerWorker``, a PyTorchJob's ``nprocPerNode``.
        presets: the :data:`NCCL_PRESETS` chosen, ``(name, value)``; an empty value leaves it out.
        env: any other variables, ``(name, value)``.
    """

    kind: str
    name: str
    namespace: str = "default"
    image: str = DEFAULT_IMAGE
    script: str = ""
    workers: int = 2
    gpus: int = 1
    presets: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    owner: str = ""

    # What the submit wizard's review reads of any request.
    mig_profile = ""
    schedule = ""
    distributed = True

    @property
    def pods(self) -> int:
        """GPU pods: an MPIJob's workers (its launcher has no GPU), a PyTorchJob's master and workers."""
        return self.workers + (1 if self.kind == "PyTorchJob" else 0)

    @property
    def total_gpus(self) -> int:
        return self.pods * self.gpus

    def exported(self) -> list[tuple[str, str]]:
        """Every variable the processes get: the NCCL presets in their order, then the others."""
        given = dict(self.presets)
        return [(name, given[name]) for name in NCCL_PRESETS if given.get(name)] + list(self.env)


def script_words(script: str) -> list[str]:
    """The script's words: a JSON list, or a line split as a shell would.

    Raises:
        ValueError: neither (unbalanced quotes, a list of something else).
    """
    text = script.strip()
    if text.startswith("["):
        return list(parse_command(text))
    try:
        return shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"cannot split: {exc}") from None


def mpirun(req: TrainingRequest) -> list[str]:
    """The launcher's command: the guide's mpirun for ``req``'s workers, slots, NCCL settings and script."""
    words = ["mpirun", "-np", str(req.workers * req.gpus), "-bind-to", "none", "-map-by", "slot"]
    for name, value in req.exported():
        words += ["-x", f"{name}={value}"]
    interfaces = dict(req.presets).get("NCCL_SOCKET_IFNAME", "")
    if interfaces:  # NCCL's ^lo,docker0 leaves those out; its =eth0 is an exact name, as mpirun's are
        parameter = "btl_tcp_if_exclude" if interfaces.startswith("^") else "btl_tcp_if_include"
        words += ["-mca", parameter, interfaces.lstrip("^=")]
    return words + script_words(req.script)


# --------------------------------------------------------------------------- checks


def _name_problem(req: TrainingRequest) -> str | None:
    name = req.name
    if not name:
        return "required"
    if not name[0].isalpha():
        return "names the job's Services too: start it with a letter"
    pod = f"{name}-worker-{max(req.workers - 1, 0)}"
    if len(pod) > 63:
        return f"too long for its pods' host names ({pod} is {len(pod)} > 63)"
    return None


def validate(req: TrainingRequest) -> dict[str, str]:
    """What is wrong with ``req``: ``{field: one-line message}``; empty when fine. The fields a
    batch Job has too (namespace, image, variables, owner) are checked as the Job form checks them."""
    problems: dict[str, str] = {}
    if req.kind not in TRAINING_KINDS:
        problems["kind"] = f"one of {', '.join(TRAINING_KINDS)}"
    if (problem := _name_problem(req)) is not None:
        problems["name"] = problem
    if not req.script.strip():
        problems["script"] = "required: what each process runs, e.g. " + DEFAULT_SCRIPTS.get(req.kind, "python train.py")
    else:
        try:
            script_words(req.script)
        except ValueError as exc:
            problems["script"] = str(exc)
    least = 1 if req.kind == "MPIJob" else 0
    if not least <= req.workers <= MAX_WORKERS - 1:
        problems["workers"] = f"between {least} and {MAX_WORKERS - 1} workers"
    if not 1 <= req.gpus <= 64:
        problems["gpus"] = "between 1 and 64 GPUs per worker (one process each)"
    # The rest as a batch Job of as many pods checks it (its torchrun variables are the operator's here).
    shadow = JobRequest(name=req.name, namespace=req.namespace, image=req.image, command=req.script,
                        gpus=req.gpus, presets=req.presets, env=req.env, workers=max(req.pods, 1), owner=req.owner)
    for field, message in validate_job(shadow).items():
        if field not in ("name", "workers", "gpus", "command"):
            problems.setdefault(field, message)
    return problems


def from_form(values: Mapping[str, str]) -> tuple[TrainingRequest, dict[str, str]]:
    """A request from a form's text fields (``kind``, ``name``, ``workers``, ``env:NCCL_DEBUG``…),
    and what could not be read. A field that cannot be read keeps its default."""
    problems: dict[str, str] = {}

    def text(field: str) -> str:
        return values.get(field, "").strip()

    def whole(field: str, default: int) -> int:
        words = text(field).replace(",", "").replace("_", "")
        try:
            return int(words)
        except ValueError:
            problems[field] = "not a whole number" if words else "required"
            return default

    env: tuple[tuple[str, str], ...] = ()
    try:
        env = parse_env(values.get("env", ""))
    except ValueError as exc:
        problems["env"] = str(exc)
    req = TrainingRequest(
        kind=text("kind") or "MPIJob", name=text("name"), namespace=text("namespace"), image=text("image"),
        script=text("script"), workers=whole("workers", 2), gpus=whole("gpus", 1),
        presets=tuple((p, text(f"env:{p}")) for p in NCCL_PRESETS if text(f"env:{p}")), env=env, owner=text("owner"))
    return req, problems


# --------------------------------------------------------------------------- the object


def _labels(req: TrainingRequest) -> dict[str, str]:
    labels = {MANAGED_BY[0]: MANAGED_BY[1]}
    if req.owner:
        labels["owner"] = req.owner
    return labels


def _env(pairs: list[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": name, "value": value} for name, value in pairs]


def _template(req: TrainingRequest, container: dict[str, Any], gpus: int) -> dict[str, Any]:
    if gpus:
        container["resources"] = {"limits": {GPU_RESOURCE: gpus}}
        # A memory-backed /dev/shm: NCCL and data loaders need more than the default 64 MiB.
        container["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    spec: dict[str, Any] = {"containers": [container]}
    if gpus:
        spec["volumes"] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
    return {"metadata": {"labels": _labels(req)}, "spec": spec}


def _mpijob_spec(req: TrainingRequest) -> dict[str, Any]:
    launcher = {"name": "launcher", "image": req.image.strip(), "command": mpirun(req), "env": _env(list(LAUNCHER_ENV))}
    worker = {"name": "worker", "image": req.image.strip(), "command": list(WORKER_COMMAND)}
    return {
        "slotsPerWorker": req.gpus,
        "runPolicy": {"cleanPodPolicy": "Running"},
        "mpiImplementation": "OpenMPI",
        "launcherCreationPolicy": "WaitForWorkersReady",  # mpirun starts once every worker's sshd is up
        "mpiReplicaSpecs": {
            "Launcher": {"replicas": 1, "restartPolicy": "OnFailure", "template": _template(req, launcher, 0)},
            "Worker": {"replicas": req.workers, "restartPolicy": "Never", "template": _template(req, worker, req.gpus)},
        },
    }


def _pytorchjob_spec(req: TrainingRequest) -> dict[str, Any]:
    def replica(replicas: int) -> dict[str, Any]:
        container: dict[str, Any] = {"name": PYTORCH_CONTAINER, "image": req.image.strip(),
                                     "command": script_words(req.script)}
        if req.exported():
            container["env"] = _env(req.exported())
        return {"replicas": replicas, "restartPolicy": "OnFailure", "template": _template(req, container, req.gpus)}

    replicas = {"Master": replica(1)}
    if req.workers:
        replicas["Worker"] = replica(req.workers)
    return {"nprocPerNode": str(req.gpus), "runPolicy": {"cleanPodPolicy": "None"}, "pytorchReplicaSpecs": replicas}


def manifests(req: TrainingRequest) -> list[dict[str, Any]]:
    """The one object to create: the MPIJob or the PyTorchJob (its operator makes the pods and Services)."""
    spec = _mpijob_spec(req) if req.kind == "MPIJob" else _pytorchjob_spec(req)
    return [{"apiVersion": API_VERSIONS[req.kind], "kind": req.kind,
             "metadata": {"name": req.name, "namespace": req.namespace, "labels": _labels(req)}, "spec": spec}]
