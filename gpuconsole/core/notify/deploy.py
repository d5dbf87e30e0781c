"""``notify manifest``: the sender as a Deployment on the cluster, or a systemd unit.

The sender holds the autopilot's ``gpuconsole-autopilot`` Lease (one sender, whichever of
``notify run`` and ``autopilot run`` holds it). Its episodes and queues must outlive a restart,
so the Deployment keeps them on a PersistentVolumeClaim and runs one replica, replaced with
``Recreate`` (two pods never write one queue). Channel secrets come from the Secret
``gpuconsole-notify``, mounted read-only; the config file travels as a ConfigMap.
"""

from __future__ import annotations

from typing import Any

import yaml

NAME = "gpuconsole-notify"
EXAMPLE_CHANNELS = '''[[notify]]
kind = "alertmanager"
url = "http://127.0.0.1:9093"
'''


def kubernetes_manifest(namespace: str, image: str, config_text: str = EXAMPLE_CHANNELS) -> str:
    """ServiceAccount, Role, RoleBinding, ConfigMap, PersistentVolumeClaim and Deployment."""
    labels = {"app.kubernetes.io/name": NAME}
    meta = {"name": NAME, "namespace": namespace, "labels": labels}
    container = {
        "name": "notify", "image": image,
        "args": ["notify", "run", "--json", "--namespace", namespace, "--config", "/etc/gpuconsole/config.toml"],
        "env": [{"name": "GPUCONSOLE_NOTIFY_DB", "value": "/var/lib/gpuconsole/notify.db"},
                {"name": "GPUCONSOLE_DB", "value": "/var/lib/gpuconsole/cache.db"}],
        "volumeMounts": [{"name": "config", "mountPath": "/etc/gpuconsole", "readOnly": True},
                         {"name": "secrets", "mountPath": "/etc/gpuconsole-secrets", "readOnly": True},
                         {"name": "state", "mountPath": "/var/lib/gpuconsole"}],
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
    }
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": [
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]},
            {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        ]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
         "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"config.toml": config_text}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
            "replicas": 1, "strategy": {"type": "Recreate"}, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "serviceAccountName": NAME, "securityContext": {"runAsNonRoot": True, "fsGroup": 65534},
                "containers": [container],
                "volumes": [{"name": "config", "configMap": {"name": NAME}},
                            {"name": "secrets", "secret": {"secretName": NAME, "optional": True, "defaultMode": 0o400}},
                            {"name": "state", "persistentVolumeClaim": {"claimName": NAME}}],
            }},
        }},
    ]
    return yaml.safe_dump_all(docs, sort_keys=False)


def systemd_unit(executable: str, config: str, user: str) -> str:
    """A unit for a bastion: the queue in ``/var/lib/gpuconsole``, a clean stop on SIGTERM."""
    return f"""[Unit]
Description=gpuconsole notify (alerts to Alertmanager, Slack, PagerDuty, webhooks)
After=network-online.target
Wants=network-online.target

[Service]
User={user}
ExecStart={executable} notify run --json --config {config}
KillSignal=SIGTERM
Restart=on-failure
RestartSec=10
NoNewPrivileges=true
ProtectSystem=strict
ProtectHome=read-only
StateDirectory=gpuconsole
StateDirectoryMode=0700
Environment=GPUCONSOLE_NOTIFY_DB=/var/lib/gpuconsole/notify.db
Environment=GPUCONSOLE_DB=/var/lib/gpuconsole/cache.db

[Install]
WantedBy=multi-user.target
"""
