"""MPIJobs and PyTorchJobs submitted to the simulated cluster: the object read into its roles,
refused in the API server's words, and made a :class:`~gpuconsole.backends.sim.distributed.SimGang`
whose GPU replicas the scheduler places like any pod (an MPIJob's launcher holds no GPU).
"""

from __future__ import annotations

import re
from typing import Any

from gpuconsole.backends.sim.distributed import SimGang, new_gang

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
    return new_gang(world, ids, kind, name, namespace, world._now, owner, _roles(kind, manifest))
