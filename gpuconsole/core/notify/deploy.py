"""``notify manifest``: the sender as a Deployment on the cluster, or a systemd unit.

The sender holds the autopilot's ``gpuconsole-autopilot`` Lease (one sender, whichever of
``notify run`` and ``autopilot run`` holds it). Its episodes and queues must outlive a restart,
so the Deployment keeps them on a PersistentVolumeClaim and runs one replica, replaced with
``Recreate`` (two pods never write one queue). Channel secrets come from the Secret
``gpuconsole-notify``, mounted read-only; the config file travels as a ConfigMap. The objects
and the unit are built by :mod:`gpuconsole.core.ops.deploy` from :data:`SENDER`.
"""

from __future__ import annotations

from gpuconsole.core.ops.deploy import Unattended

EXAMPLE_CHANNELS = '''[[notify]]
kind = "alertmanager"
url = "http://127.0.0.1:9093"
'''
SENDER = Unattended(
    command="notify", about="alerts to Alertmanager, Slack, PagerDuty, webhooks", example_config=EXAMPLE_CHANNELS,
    environment=(("GPUCONSOLE_NOTIFY_DB", "/var/lib/gpuconsole/notify.db"),
                 ("GPUCONSOLE_DB", "/var/lib/gpuconsole/cache.db")),
    recreate=True, secrets=True, claim="1Gi", fs_group=65534, state_mode="0700")
