"""What a service's GPUs cost: the GPUs pane's join (pod → node → instance → $/h), per replica.

A replica holds GPUs on a node; the node's instance bills ``price / GPUs`` an hour for each, a
MIG slice its compute share of one (:func:`~gpuconsole.core.money.costs.mig_share`). A service
costs what its replicas hold; $ per 1M generated tokens and per 1k requests divide that by its
rates over the window. A replica whose GPUs compute under 5 % and that serves nothing is idle
and costed as idle GPUs are. A node without a known price makes the service's cost unknown
(None), never $0; a price in another currency counts through ``[money] rates`` or not at all.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

import msgspec

from gpuconsole.core.money.attribution import instance_of
from gpuconsole.core.money.currency import BASE, factor
from gpuconsole.core.money.idle import IDLE_UTILIZATION
from gpuconsole.model import FleetSnapshot, Gpu, Instance, MigMode, Service, ServiceReplica

PodKey = tuple[str, str]


class GpuPrices:
    """Per node, what one GPU-hour costs in US dollars (None: unknown), worked out once per node."""

    def __init__(self, snapshot: FleetSnapshot, rates: Mapping[str, float] | Iterable[tuple[str, float]] = ()) -> None:
        self.snapshot = snapshot
        self.rates = dict(rates)
        self._known: dict[str, float | None] = {}
        # The instances each node could be backed by, found once (not by a scan of every
        # instance per node): by their node name, else by the instance id the node names.
        self._by_node: dict[str, list[Instance]] = defaultdict(list)
        self._by_id: dict[str, list[Instance]] = defaultdict(list)
        for instance in snapshot.instances:
            if instance.node:
                self._by_node[instance.node].append(instance)
            self._by_id[instance.instance_id].append(instance)
        self._node_ids: dict[str, list[str]] = defaultdict(list)
        for known in snapshot.nodes:
            if known.instance_id:
                self._node_ids[known.name].append(known.instance_id)

    def _candidates(self, node: str) -> FleetSnapshot:
        """The snapshot with only the instances that may back ``node``: what ``instance_of`` reads."""
        found = self._by_node.get(node)
        if not found:
            found = [i for instance_id in dict.fromkeys(self._node_ids.get(node, ())) for i in self._by_id.get(instance_id, ())]
        return msgspec.structs.replace(self.snapshot, instances=tuple(found))

    def per_gpu_hour(self, node: str) -> float | None:
        if node not in self._known:
            instance = instance_of(self._candidates(node), node)
            price = None
            if instance is not None and instance.gpus and instance.state.billed:
                rate = factor(instance.currency, BASE, self.rates)
                price = instance.price_per_hour / instance.gpus * rate if rate is not None else None
            self._known[node] = price
        return self._known[node]


def gpu_use(gpus: Iterable[Gpu]) -> tuple[dict[PodKey, list[float]], dict[str, list[float]]]:
    """Each pod's GPU (or MIG slice) utilizations, by ``(namespace, pod)`` where a source names the
    pod and by pod UID where it names the UID."""
    by_name: dict[PodKey, list[float]] = defaultdict(list)
    by_uid: dict[str, list[float]] = defaultdict(list)
    for gpu in gpus:
        if gpu.mig_mode is MigMode.ENABLED:
            for part in gpu.mig_slices:
                if part.utilization is None:
                    continue
                if part.pod and part.namespace:
                    by_name[(part.namespace, part.pod)].append(part.utilization)
                if part.pod_uid:
                    by_uid[part.pod_uid].append(part.utilization)
            continue
        if "utilization" in gpu.not_reported:
            continue
        if gpu.pod and gpu.namespace:
            by_name[(gpu.namespace, gpu.pod)].append(gpu.utilization)
        for uid in {p.pod_uid for p in gpu.processes if p.pod_uid}:
            by_uid[uid].append(gpu.utilization)
    return by_name, by_uid


def is_idle(replica: ServiceReplica) -> bool:
    """A ready replica whose GPUs compute under 5 % and that shows no request served or running
    (one still loading its model is not idle yet)."""
    if replica.gpu_utilization is None or replica.gpu_utilization >= IDLE_UTILIZATION or not replica.ready:
        return False
    return not ((replica.rps or 0.0) > 0 or (replica.running or 0.0) > 0)


def costed(service: Service, prices: GpuPrices, use: tuple[dict[PodKey, list[float]], dict[str, list[float]]]) -> Service:
    """``service`` with each replica's GPU use and $/h, its own $/h, $ per 1M tokens and per
    1k requests, and its idle replicas."""
    by_name, by_uid = use
    replicas = []
    total: float | None = 0.0
    idle_n, idle_cost = 0, 0.0
    for replica in service.replicas:
        utils = by_name.get((service.namespace, replica.pod)) or (by_uid.get(replica.uid) if replica.uid else None)
        utilization = sum(utils) / len(utils) if utils else None
        per_hour: float | None = None
        if replica.node and replica.gpus > 0:
            price = prices.per_gpu_hour(replica.node)
            per_hour = price * replica.gpus if price is not None else None
            total = total + per_hour if total is not None and per_hour is not None else None
        replica = msgspec.structs.replace(replica, gpu_utilization=utilization, usd_per_hour=per_hour)
        if is_idle(replica):
            idle_n += 1
            idle_cost += per_hour or 0.0
        replicas.append(replica)
    per_token = per_request = None
    if total is not None:
        if service.tokens_per_s:
            per_token = total / 3600.0 / service.tokens_per_s * 1e6
        if service.rps:
            per_request = total / 3600.0 / service.rps * 1e3
    return msgspec.structs.replace(service, replicas=tuple(replicas), usd_per_hour=total,
                                   usd_per_million_tokens=per_token, usd_per_1k_requests=per_request,
                                   idle_replicas=idle_n, idle_usd_per_hour=idle_cost if idle_n and total is not None else None)
