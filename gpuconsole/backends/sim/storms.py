"""Spot interruptions on demand: the demo's early one and ``--demo-faults cloud:spot-storm``.

EC2 reclaims spot capacity when it needs it, sometimes many instances of a zone at once. The
world draws one interruption time per spot instance (:mod:`.lifecycle`); these helpers move
some of them earlier, so a demo shows what the autopilot's spot recovery does within minutes.
Each moved interruption is an ordinary ``interrupt`` event: the instance shuts down with EC2's
state reason, its pods are evicted, and a node group's member is replaced. The demo's single
early interruption hits an instance launched by hand (no group replaces it), which is what
the autopilot's spot recovery is for.
"""

from __future__ import annotations

from typing import Any

from gpuconsole.model import InstanceState, JobState, Market

DEMO_INTERRUPTION_S = 150.0  # the demo's first spot interruption, after the console starts
STORM_AFTER_S = 60.0  # a spot storm strikes this long after the start (or the fault's seconds)


GROUP_TAGS = ("eks:nodegroup-name", "aws:autoscaling:groupName")


def launched_by_hand(inst: Any) -> None:
    """Make ``inst`` a spot instance no group replaces (the case spot recovery exists for)."""
    inst.managed = False
    inst.tags = tuple((k, v) for k, v in inst.tags if k not in GROUP_TAGS)


def interrupt_spot(world: Any, at: float, count: int | None = None) -> list[str]:
    """Interrupt ``count`` running EC2 spot instances (all with None) at sim time ``at``, those
    running the most jobs first (an interruption that evicts work is the one worth showing);
    the ids chosen. The other clouds' regions keep theirs: the demo's interruption is EC2's."""
    jobs: dict[int, int] = {}
    for job in world._jobs.values():
        if job.state is JobState.RUNNING and job.node is not None:
            jobs[id(job.node)] = jobs.get(id(job.node), 0) + 1
    spot = sorted((i for i in world._instances.values()
                   if i.market is Market.SPOT and i.state is InstanceState.RUNNING and i.cloud == "aws"),
                  key=lambda i: (-jobs.get(id(i), 0), i.launch_time, i.instance_id))
    chosen = spot if count is None else spot[:count]
    for inst in chosen:
        if count is not None:
            launched_by_hand(inst)
        inst.interrupt_at = float(at)
        world._at(float(at), "interrupt", inst)
    return [i.instance_id for i in chosen]
