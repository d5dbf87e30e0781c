"""What the Kubernetes API test server checks of an MPIJob or a PyTorchJob it is asked to create
(a dry run too), the way a cluster with the CRDs and the operators' admission does: the types and
enums of the CRDs' OpenAPI schemas (``kubeflow.org/v2beta1`` MPIJob, ``kubeflow.org/v1``
PyTorchJob), and the operators' own rules (one launcher, one master, a PyTorchJob's container
named ``pytorch``). :func:`problem` says what is wrong in the API server's words, or None.
"""

from __future__ import annotations

from typing import Any

RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")
CLEAN_POD_POLICIES = ("None", "Running", "All")
REPLICA_TYPES = {"MPIJob": ("Launcher", "Worker"), "PyTorchJob": ("Master", "Worker")}
SPECS = {"MPIJob": "mpiReplicaSpecs", "PyTorchJob": "pytorchReplicaSpecs"}


class Invalid(Exception):
    """One field's problem: ``spec.slotsPerWorker: Invalid value: …``."""


def _type(value: Any, kind: type | tuple[type, ...], path: str, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, kind):
        raise Invalid(f'{path}: Invalid value: "{type(value).__name__}": {path} in body must be of type {name}')


def _enum(value: Any, allowed: tuple[str, ...], path: str) -> None:
    if value not in allowed:
        raise Invalid(f'{path}: Unsupported value: "{value}": supported values: '
                      + ", ".join(f'"{a}"' for a in allowed))


def _containers(template: Any, path: str) -> list[dict[str, Any]]:
    _type(template, dict, path, "object")
    spec = template.get("spec")
    _type(spec, dict, f"{path}.spec", "object")
    containers = spec.get("containers")
    _type(containers, list, f"{path}.spec.containers", "array")
    if not containers:
        raise Invalid(f"{path}.spec.containers: Required value")
    for i, container in enumerate(containers):
        where = f"{path}.spec.containers[{i}]"
        _type(container, dict, where, "object")
        for field in ("name", "image"):
            if not container.get(field):
                raise Invalid(f"{where}.{field}: Required value")
        for field in ("command", "args"):
            if field in container:
                _type(container[field], list, f"{where}.{field}", "array")
                for word in container[field]:
                    _type(word, str, f"{where}.{field}", "string")
    return containers


def _replicas(kind: str, spec: dict[str, Any]) -> None:
    field = SPECS[kind]
    replicas = spec.get(field)
    if replicas is None:
        raise Invalid(f"spec.{field}: Required value")
    _type(replicas, dict, f"spec.{field}", "object")
    for role, replica in replicas.items():
        where = f"spec.{field}.{role}"
        if role not in REPLICA_TYPES[kind]:
            raise Invalid(f'{where}: Unsupported value: "{role}": one of {", ".join(REPLICA_TYPES[kind])}')
        _type(replica, dict, where, "object")
        if "replicas" in replica:
            _type(replica["replicas"], int, f"{where}.replicas", "integer")
        if "restartPolicy" in replica:
            _enum(replica["restartPolicy"], RESTART_POLICIES, f"{where}.restartPolicy")
        containers = _containers(replica.get("template"), f"{where}.template")
        if kind == "PyTorchJob" and not any(c.get("name") == "pytorch" for c in containers):
            raise Invalid(f"{where}.template.spec.containers: Invalid value: there is no container named pytorch")
    lead = REPLICA_TYPES[kind][0]
    if lead not in replicas:
        raise Invalid(f"spec.{field}.{lead}: Required value")
    if replicas[lead].get("replicas", 1) != 1:
        raise Invalid(f"spec.{field}.{lead}.replicas: Invalid value: must be 1")


def _check(obj: dict[str, Any]) -> None:
    kind = obj["kind"]
    spec = obj.get("spec")
    _type(spec, dict, "spec", "object")
    run_policy = spec.get("runPolicy", {})
    _type(run_policy, dict, "spec.runPolicy", "object")
    if "cleanPodPolicy" in run_policy:
        _enum(run_policy["cleanPodPolicy"], CLEAN_POD_POLICIES, "spec.runPolicy.cleanPodPolicy")
    if kind == "MPIJob":
        if "slotsPerWorker" in spec:
            _type(spec["slotsPerWorker"], int, "spec.slotsPerWorker", "integer")
        if "mpiImplementation" in spec:
            _enum(spec["mpiImplementation"], ("OpenMPI", "Intel", "MPICH"), "spec.mpiImplementation")
        if "launcherCreationPolicy" in spec:
            _enum(spec["launcherCreationPolicy"], ("AtStartup", "WaitForWorkersReady"), "spec.launcherCreationPolicy")
    elif "nprocPerNode" in spec:
        _type(spec["nprocPerNode"], str, "spec.nprocPerNode", "string")
    _replicas(kind, spec)


def problem(obj: dict[str, Any]) -> str | None:
    """Why the API server refuses to create ``obj`` (an MPIJob or a PyTorchJob), or None."""
    if obj.get("kind") not in SPECS:
        return None
    try:
        _check(obj)
    except Invalid as exc:
        name = (obj.get("metadata") or {}).get("name", "")
        return f'{obj["kind"]}.kubeflow.org "{name}" is invalid: {exc}'
    return None
