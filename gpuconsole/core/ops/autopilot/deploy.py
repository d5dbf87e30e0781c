"""``autopilot manifest``: the autopilot as a Deployment on the cluster, or a systemd unit.

The Deployment runs two replicas (one leads through the ``gpuconsole-autopilot`` Lease, the
other waits to take over); the Role grants exactly what the autopilot reads and the Lease it
writes. The config file travels as a ConfigMap. The objects and the unit are built by
:mod:`gpuconsole.core.ops.deploy` from :data:`AUTOPILOT`.
"""

from __future__ import annotations

from gpuconsole.core.ops.deploy import Unattended

EXAMPLE_RULES = '''[[rules]]
name = "autostop"
kind = "idle-stop"
scope = "all"
idle_for = "30m"
spot = "keep"
'''
AUTOPILOT = Unattended(
    command="autopilot", about="rules that scale, stop idle GPUs and recover spot work", example_config=EXAMPLE_RULES,
    environment=(("GPUCONSOLE_AUTOPILOT_DB", "/var/lib/gpuconsole/autopilot.db"),
                 ("GPUCONSOLE_DB", "/var/lib/gpuconsole/cache.db")),
    reads=("pods", "events"), replicas=2)
