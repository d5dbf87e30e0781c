"""The demo's rules: one of each kind, tuned so each acts within the demo's first minutes.

On the simulated fleet: jobs wait for GPUs, so ``vision-pool`` grows (and shrinks once its new
nodes idle); the inference pool's spot L4 idles, so ``autostop`` ends it; the world interrupts a
spot instance after a couple of minutes (and ``--demo-faults cloud:spot-storm`` all of them),
so ``spot-recover`` relaunches it in another zone; a burst of requests a few minutes in slows the
embedding service down, so ``embed-scale`` adds a replica. Used only when the config file and the
database declare no rule of their own.
"""

from __future__ import annotations

from typing import Any

DEMO_RULES: tuple[dict[str, Any], ...] = (
    {"name": "vision-pool", "kind": "scale", "pool": "tag:Project=vision", "scope": "namespace:team-vision",
     "launch": {"type": "g5.12xlarge", "region": "us-east-1", "market": "on-demand", "ami": "ami-0a1b2c3d4e5f60718",
                "tags": {"Project": "vision", "Owner": "bob", "Name": "vision-pool"}},
     "scale_out": "pending_gpus > 0 for 1m", "scale_in": "idle_gpus >= 2 for 3m",
     "min": 1, "max": 5, "step": 1, "cooldown": "3m"},
    {"name": "autostop", "kind": "idle-stop", "scope": "tag:Project=inference", "idle_for": "2m", "spot": "terminate"},
    {"name": "spot-recover", "kind": "spot-recover", "scope": "all", "fallback_after": 1},
    {"name": "embed-scale", "kind": "serve-scale", "service": "search/text-embed", "scale_out": "p99_ms > 150 for 1m",
     "scale_in": "p99_ms < 40 for 10m", "min": 2, "max": 5, "step": 1, "cooldown": "2m"},
)
