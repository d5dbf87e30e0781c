"""Idle waste: billed GPUs that have computed nothing for a while, and what they cost.

:class:`IdleTracker` is fed every GPU reading. It remembers, per GPU UUID, since when the GPU
has been idle, and reports the ones idle for at least ``threshold_s`` (30 minutes) on a billed
instance as :class:`~gpuconsole.model.IdleGpu` rows, with their price per hour and the dollars
spent on them since they went idle.

Idle means: a whole GPU below 5 % utilization, even with a process holding memory (a job that
keeps a GPU without computing is the waste to find); a MIG GPU whose every device is below
5 % and holds no memory (a MIG device's utilization is often unknown, so its memory is the
sign of a tenant). That differs from :attr:`Gpu.busy`, which counts held memory as busy.

One ``update`` runs in the polling thread at fleet scale (8,192 GPUs a second): it touches one
dict entry per idle GPU and allocates nothing but its result and the entries of newly idle GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import attrgetter

from gpuconsole.model import CostLine, Gpu, IdleGpu, Instance, MigMode

IDLE_UTILIZATION = 5.0  # percent
IDLE_AFTER_S = 30 * 60.0
UNTAGGED = "(untagged)"

_MIG = MigMode.ENABLED
_WASTED = attrgetter("wasted")


def is_idle(gpu: Gpu) -> bool:
    """Whether ``gpu`` computes nothing right now (see the module notes for MIG GPUs)."""
    if gpu.mig_mode is _MIG:
        for s in gpu.mig_slices:
            if s.memory_used_mib > 0 or (s.utilization or 0.0) >= IDLE_UTILIZATION:
                return False
        return True
    return gpu.utilization < IDLE_UTILIZATION


class IdleTracker:
    """Remembers since when each GPU has been idle.

    Args:
        threshold_s: how long a GPU must be idle before it counts as waste.

    Not thread-safe: one polling thread feeds it.
    """

    def __init__(self, threshold_s: float = IDLE_AFTER_S) -> None:
        self.threshold_s = threshold_s
        # uuid -> [idle since, tick last seen idle]; a list so a tick updates it in place
        self._idle: dict[str, list[float]] = {}
        self._tick = 0
        self._instances: Sequence[Instance] | None = None
        self._by_node: dict[str, tuple[str, str, float]] = {}  # node -> instance id, owner, $/h a GPU

    def idle_since(self, uuid: str) -> float | None:
        """When ``uuid`` went idle, or None when it is busy or unknown."""
        entry = self._idle.get(uuid)
        return entry[0] if entry is not None else None

    def update(self, gpus: Iterable[Gpu], instances: Sequence[Instance], now: float) -> tuple[IdleGpu, ...]:
        """Take in one reading; return the GPUs idle for ``threshold_s`` or more on a billed
        instance, the most wasted first (ties in the reading's order).

        ``instances`` is indexed by node once per new tuple, so passing the same cloud
        reading's tuple each tick costs nothing.

        A GPU that is busy again starts over; one missing from the reading is forgotten (its
        node left, or it fell off the bus), so it starts over when it comes back.
        """
        if instances is not self._instances:  # a new cloud reading: index it once
            self._instances = instances
            self._by_node = {i.node: (i.instance_id, i.tag("Owner") or "", i.price_per_hour / (i.gpus or 1))
                             for i in instances if i.node and i.state.billed}
        by_node = self._by_node
        table = self._idle
        tick = self._tick = self._tick + 1
        cutoff = now - self.threshold_s
        seen = 0
        out: list[IdleGpu] = []
        for g in gpus:
            uuid = g.uuid
            if not (is_idle(g) if g.mig_mode is _MIG else g.utilization < IDLE_UTILIZATION):
                if uuid in table:
                    del table[uuid]
                continue
            seen += 1
            entry = table.get(uuid)
            if entry is None:
                table[uuid] = entry = [now, tick]
            else:
                entry[1] = tick
            since = entry[0]
            if since > cutoff:
                continue
            billed = by_node.get(g.node)
            if billed is None:
                continue
            instance_id, owner, per_hour = billed
            out.append(IdleGpu(uuid, g.node, instance_id, owner, since, per_hour, per_hour * (now - since) / 3600.0))
        if len(table) > seen:  # some GPU idle last time is missing from this reading
            for uuid in [u for u, e in table.items() if e[1] != tick]:
                del table[uuid]
        out.sort(key=_WASTED, reverse=True)  # stable: ties keep the reading's order
        return tuple(out)


def by_owner(idle: Iterable[IdleGpu]) -> list[CostLine]:
    """Idle waste summed by the instances' Owner tag (``(untagged)`` without one), most first."""
    sums: dict[str, list[float]] = {}
    for i in idle:
        acc = sums.setdefault(i.owner or UNTAGGED, [0.0, 0.0])
        acc[0] += i.wasted
        acc[1] += i.per_hour
    lines = [CostLine("tag:Owner", owner, a, r) for owner, (a, r) in sums.items()]
    lines.sort(key=lambda line: (-line.amount, line.key))
    return lines
