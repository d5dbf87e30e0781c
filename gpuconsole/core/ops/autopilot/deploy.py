"""``autopilot manifest``: the autopilot as a Deployment on the cluster, or a systemd unit.

The Deployment runs two replicas (one leads through the ``gpuconsole-autopilot`` Lease, the
other waits to take over); the Role grants exactly what the autopilot reads and the Lease it
writes. The config file travels as a ConfigMap.
"""

from __future__ import annotations

from typing import Any

import yaml

NAME = "gpuconsole-autopilot"
EXAMPLE_RULES = '''[[rules]]
name = "autostop"
kind = "idle-stop"
scope = "all"
idle_for = "30m"
spot = "keep"
'''


def kubernetes_manifest(namespace: str, image: str, config_text: str = EXAMPLE_RULES) -> str:
    """ServiceAccount, Role, RoleBinding, ConfigMap and Deployment, as one YAML stream."""
    labels = {"app.kubernetes.io/name": NAME}
    meta = {"name": NAME, "namespace": namespace, "labels": labels}
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list", "watch"]},
        ]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"config.toml": config_text}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
            "replicas": 2, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "serviceAccountName": NAME,
                "securityContext": {"runAsNonRoot": True},
                "containers": [{
                    "name": "autopilot", "image": image,
                    "args": ["autopilot", "run", "--json", "--namespace", namespace, "--config", "/etc/gpuconsole/config.toml"],
                    "env": [{"name": "GPUCONSOLE_AUTOPILOT_DB", "value": "/var/lib/gpuconsole/autopilot.db"},
                            {"name": "GPUCONSOLE_DB", "value": "/var/lib/gpuconsole/cache.db"}],
                    "volumeMounts": [{"name": "config", "mountPath": "/etc/gpuconsole", "readOnly": True},
                                     {"name": "state", "mountPath": "/var/lib/gpuconsole"}],
                    "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
                }],
                "volumes": [{"name": "config", "configMap": {"name": NAME}}, {"name": "state", "emptyDir": {}}],
            }},
        }},
    ]
    return yaml.safe_dump_all(docs, sort_keys=False)


def systemd_unit(executable: str, config: str, user: str) -> str:
    """A unit for a bastion: restarts on failure, stops with SIGTERM (a clean stop)."""
    return f"""[Unit]
Description=gpuconsole autopilot (rules that scale, stop idle GPUs and recover spot work)
After=network-online.target
Wants=network-online.target

[Service]
User={user}
ExecStart={executable} autopilot run --json --config {config}
KillSignal=SIGTERM
Restart=on-failure
RestartSec=10
NoNewPrivileges=true
ProtectSystem=strict
ProtectHome=read-only
StateDirectory=gpuconsole
Environment=GPUCONSOLE_AUTOPILOT_DB=/var/lib/gpuconsole/autopilot.db
Environment=GPUCONSOLE_DB=/var/lib/gpuconsole/cache.db

[Install]
WantedBy=multi-user.target
"""
