"""MPIJobs and PyTorchJobs in the simulated cluster: the object read into its roles, refused in
the API server's words, and made a :class:`~gpuconsole.backends.sim.distributed.SimGang` whose GPU
replicas the scheduler places like any pod (an MPIJob's launcher holds no GPU); then deleted,
suspended (``spec.runPolicy.suspend``: its pods go, their GPUs freed) and described as the
operator's object with its pods' events.
"""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from typing import Any

from gpuconsole.backends.kube.describe import EventLine, describe_text
from gpuconsole.backends.sim.distributed import SimGang, new_gang
from gpuconsole.model import JobState

REPLICA_SPECS = {"MPIJob": "mpiReplicaSpecs", "PyTorchJob": "pytorchReplicaSpecs"}
ROLE_ORDER = {"MPIJob": ("Launcher", "Worker"), "PyTorchJob": ("Master", "Worker")}
PLURALS = {"MPIJob": "mpijobs.kubeflow.org", "PyTorchJob": "pytorchjobs.kubeflow.org"}
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
PRODUCT_LABEL = "nvidia.com/gpu.product"


def _roles(kind: str, manifest: dict[str, Any]) -> list[tuple[str, int, int, str | None, str]]:
    """(role, replicas, GPUs each, GPU product asked for, image) in the operator's order."""
    specs = (manifest.get("spec") or {}).get(REPLICA_SPECS[kind]) or {}
    roles = []
    for role in ROLE_ORDER[kind]:
        spec = specs.get(role)
        if not isinstance(spec, dict):
            continue
        pod = (spec.get("template") or {}).get("spec") or {}
        containers = pod.get("containers") or [{}]
        gpus = sum(int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0)) for c in containers)
        product = (pod.get("nodeSelector") or {}).get(PRODUCT_LABEL)
        roles.append((role, int(spec.get("replicas", 1)), gpus, product, str(containers[0].get("image") or "")))
    return roles


def gang_problem(kind: str, manifest: dict[str, Any], namespaces: frozenset[str]) -> str | None:
    """Why the simulated API server refuses the MPIJob or PyTorchJob, in its words; None when fine."""
    meta = manifest.get("metadata") or {}
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "default")
    where = f'{kind}.kubeflow.org "{name}" is invalid'
    if not _DNS_LABEL.match(name) or len(name) > 63:
        return f"{where}: metadata.name: a DNS-1035 label is required"
    if namespace not in namespaces:
        return f'namespaces "{namespace}" not found'
    roles = _roles(kind, manifest)
    lead = ROLE_ORDER[kind][0]
    if not roles or roles[0][0] != lead or roles[0][1] != 1:
        return f"{where}: spec.{REPLICA_SPECS[kind]}.{lead}: one replica is required"
    if any(not image for *_rest, image in roles):
        return f"{where}: spec.{REPLICA_SPECS[kind]}: every container needs an image"
    if not any(gpus for _role, _n, gpus, _p, _i in roles):
        return "the simulated cluster runs GPU jobs only: ask for at least 1 nvidia.com/gpu"
    return None


def add_gang(world: Any, kind: str, manifest: dict[str, Any], ids: Any) -> SimGang:
    """Make the distributed job in ``world`` (a SimWorld): its GPU replicas wait for the scheduler."""
    meta = manifest.get("metadata") or {}
    name, namespace = str(meta["name"]), str(meta.get("namespace") or "default")
    owner = str((meta.get("labels") or {}).get("owner") or "")
    gang = new_gang(world, ids, kind, name, namespace, world._now, owner, _roles(kind, manifest))
    gang.manifest = copy.deepcopy(manifest)
    return gang


API_VERSIONS = {"MPIJob": "kubeflow.org/v2beta1", "PyTorchJob": "kubeflow.org/v1"}


def find_gang(world: Any, kind: str, namespace: str, name: str) -> SimGang:
    """The MPIJob or PyTorchJob ``namespace/name``.

    Raises:
        KeyError: none, in the API server's words.
    """
    for gang in world._gangs:
        if gang.kind == kind and gang.namespace == namespace and gang.name == name:
            return gang
    raise KeyError(f'{PLURALS[kind]} "{name}" not found')


def delete_gang(world: Any, gang: SimGang) -> None:
    """Delete the distributed job and its pods, freeing their GPUs."""
    for member in gang.members():
        try:
            world.delete_job(member.uid)
        except KeyError:
            pass  # already gone
    world._gangs.remove(gang)


def suspend_gang(world: Any, gang: SimGang, suspended: bool) -> None:
    """Set ``spec.runPolicy.suspend``: the operator deletes a suspended job's pods (their GPUs
    freed) and makes them again on resume, to wait for the scheduler."""
    for member in gang.members():
        world.suspend_object("Job", member.namespace, member.name, suspended)


def describe_gang(world: Any, gang: SimGang) -> str:
    """The MPIJob or PyTorchJob as YAML with its status, then its pods' events."""
    obj = copy.deepcopy(gang.manifest) if gang.manifest else _gang_object(gang)
    meta = obj.setdefault("metadata", {})
    meta.update(name=gang.name, namespace=gang.namespace, uid=gang.uid, creationTimestamp=_stamp(gang.created))
    state = gang.state()
    obj.setdefault("spec", {}).setdefault("runPolicy", {})["suspend"] = state is JobState.SUSPENDED
    status = {JobState.RUNNING: "Running", JobState.SUCCEEDED: "Succeeded", JobState.FAILED: "Failed",
              JobState.SUSPENDED: "Suspended"}.get(state, "Created")
    obj["status"] = {"conditions": [{"type": status, "status": "True"}],
                     "replicaStatuses": {role: {"active": sum(1 for m in members if m.state is JobState.RUNNING)}
                                         for role, _gpus, members in gang.roles if members}}
    events = [EventLine("Normal", "SuccessfulCreatePod", gang.created, f"{gang.kind.lower()}-controller",
                        f"Created pod: {pod}") for m in gang.members() for pod in m.pod_names()]
    for member in gang.members():
        events += [e for e in world._job_events(member) if e.reason != "SuccessfulCreate"]
    return describe_text(obj, events, world._now)


def _gang_object(gang: SimGang) -> dict[str, Any]:
    specs = {}
    for role, gpus, members in gang.roles:
        limits = {"nvidia.com/gpu": gpus} if gpus else {}
        specs[role] = {"replicas": max(len(members), 1), "template": {"spec": {"containers": [
            {"name": role.lower(), "image": gang.image, "resources": {"limits": limits}}]}}}
    return {"apiVersion": API_VERSIONS[gang.kind], "kind": gang.kind,
            "metadata": {"labels": {"owner": gang.owner}}, "spec": {REPLICA_SPECS[gang.kind]: specs}}


def _stamp(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
