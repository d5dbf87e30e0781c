"""What ``autopilot manifest`` and ``notify manifest`` share: one unattended service, declared
once (:class:`Unattended`), printed as the Kubernetes objects that run it or a systemd unit.

Each service is ``gpuconsole COMMAND run --json`` with the state files of its ``environment``;
on a cluster it has its own ServiceAccount and a Role that grants the Lease it writes and what
it reads, and the config file travels as a ConfigMap.
"""

from __future__ import annotations

import getpass
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpuconsole.core.config import ConfigError

CONFIG_DIR = "/etc/gpuconsole"
SECRETS_DIR = "/etc/gpuconsole-secrets"
STATE_DIR = "/var/lib/gpuconsole"
# Every file a service keeps beyond its own (its audit log and queues, the alerts' database) goes
# to the state volume too: a unit's home is read-only (ProtectHome) and so is a pod's root.
STATE_HOME = ("XDG_STATE_HOME", f"{STATE_DIR}/state")


@dataclass(frozen=True, slots=True)
class Unattended:
    """A service gpuconsole runs on its own (the autopilot, the sender of alerts).

    Attributes:
        command: the command family, run as ``gpuconsole COMMAND run --json``.
        about: what it does, for the unit's description.
        example_config: the ConfigMap's text when no ``--config`` is given.
        environment: the state files it keeps, as variables (the container's and the unit's).
        reads: the core resources the Role lets it read besides jobs and cronjobs.
        replicas: how many pods (one leads through the Lease, the others wait).
        recreate: replace the pod with ``Recreate`` (two pods never write one queue).
        secrets: mount the Secret of its name read-only (channel secrets).
        claim: keep the state on a PersistentVolumeClaim of this size ('' : an emptyDir).
        fs_group: the pod's fsGroup (a claim the non-root user writes).
        state_mode: the unit's ``StateDirectoryMode`` ('' : systemd's default).
    """

    command: str
    about: str
    example_config: str
    environment: tuple[tuple[str, str], ...]
    reads: tuple[str, ...] = ("pods",)
    replicas: int = 1
    recreate: bool = False
    secrets: bool = False
    claim: str = ""
    fs_group: int | None = None
    state_mode: str = ""

    @property
    def name(self) -> str:
        return f"gpuconsole-{self.command}"


def manifest(service: Unattended, *, kubernetes: bool, namespace: str | None, image: str,
             config: Path | None) -> str:
    """What ``COMMAND manifest`` prints: the Kubernetes objects (``config``'s text as the
    ConfigMap) or a systemd unit for this host's ``gpuconsole`` and user.

    Raises:
        ConfigError: ``config`` cannot be read (one line).
    """
    if kubernetes:
        text = service.example_config
        if config is not None:
            try:
                text = config.read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"{config}: cannot read it: {exc.strerror or exc}") from None
        return kubernetes_manifest(service, namespace or "gpuconsole", image, text)
    executable = shutil.which("gpuconsole") or f"{sys.executable} -m gpuconsole"
    return systemd_unit(service, executable, str(config) if config is not None else f"{CONFIG_DIR}/config.toml",
                        getpass.getuser())


def kubernetes_manifest(service: Unattended, namespace: str, image: str, config_text: str) -> str:
    """ServiceAccount, Role, RoleBinding, ConfigMap, the claim if any, and the Deployment."""
    name = service.name
    labels = {"app.kubernetes.io/name": name}
    meta = {"name": name, "namespace": namespace, "labels": labels}
    mounts = [{"name": "config", "mountPath": CONFIG_DIR, "readOnly": True}]
    volumes: list[dict[str, Any]] = [{"name": "config", "configMap": {"name": name}}]
    if service.secrets:
        mounts.append({"name": "secrets", "mountPath": SECRETS_DIR, "readOnly": True})
        volumes.append({"name": "secrets", "secret": {"secretName": name, "optional": True, "defaultMode": 0o400}})
    mounts.append({"name": "state", "mountPath": STATE_DIR})
    volumes.append({"name": "state", "persistentVolumeClaim": {"claimName": name}} if service.claim
                   else {"name": "state", "emptyDir": {}})
    container = {
        "name": service.command, "image": image,
        "args": [service.command, "run", "--json", "--namespace", namespace, "--config", f"{CONFIG_DIR}/config.toml"],
        "env": [{"name": k, "value": v} for k, v in (*service.environment, STATE_HOME)],
        "volumeMounts": mounts,
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
    }
    pod_security: dict[str, Any] = {"runAsNonRoot": True}
    if service.fs_group is not None:
        pod_security["fsGroup"] = service.fs_group
    spec: dict[str, Any] = {"replicas": service.replicas}
    if service.recreate:
        spec["strategy"] = {"type": "Recreate"}
    spec["selector"] = {"matchLabels": labels}
    spec["template"] = {"metadata": {"labels": labels}, "spec": {
        "serviceAccountName": name, "securityContext": pod_security, "containers": [container], "volumes": volumes}}
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": list(service.reads), "verbs": ["get", "list", "watch"]},
        ]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"config.toml": config_text}},
    ]
    if service.claim:
        docs.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
                     "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": service.claim}}}})
    docs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec})
    return yaml.safe_dump_all(docs, sort_keys=False)


def systemd_unit(service: Unattended, executable: str, config: str, user: str) -> str:
    """A unit for a bastion: the state in ``/var/lib/gpuconsole``, restarted on failure, a clean
    stop on SIGTERM."""
    mode = f"StateDirectoryMode={service.state_mode}\n" if service.state_mode else ""
    env = "".join(f"Environment={k}={v}\n" for k, v in (*service.environment, STATE_HOME))
    return f"""[Unit]
Description=gpuconsole {service.command} ({service.about})
After=network-online.target
Wants=network-online.target

[Service]
User={user}
ExecStart={executable} {service.command} run --json --config {config}
KillSignal=SIGTERM
Restart=on-failure
RestartSec=10
NoNewPrivileges=true
ProtectSystem=strict
ProtectHome=read-only
StateDirectory=gpuconsole
{mode}{env}
[Install]
WantedBy=multi-user.target
"""
