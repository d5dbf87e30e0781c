"""What the fleet costs: spend in a period, burn rate, and the price of an idle GPU.

Instances report their hourly price and what they accrued since launch. From those this module
derives spend within a calendar period (UTC day, UTC month) and the current burn rate. A billed
instance is assumed to have run for the whole overlap of its life with the period; one that is
no longer billed contributes what it accrued, if it was launched inside the period.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterable
from datetime import UTC, datetime

from gpuconsole.model import Gpu, Instance


def day_start(now: float) -> float:
    """Midnight UTC of the day containing ``now``."""
    d = datetime.fromtimestamp(now, UTC)
    return datetime(d.year, d.month, d.day, tzinfo=UTC).timestamp()


def month_start(now: float) -> float:
    d = datetime.fromtimestamp(now, UTC)
    return datetime(d.year, d.month, 1, tzinfo=UTC).timestamp()


def month_end(now: float) -> float:
    d = datetime.fromtimestamp(now, UTC)
    last = calendar.monthrange(d.year, d.month)[1]
    return datetime(d.year, d.month, last, tzinfo=UTC).timestamp() + 86400.0


def instance_spend(instance: Instance, start: float, now: float) -> float:
    """Dollars an instance cost between ``start`` and ``now``."""
    overlap = max(0.0, now - max(start, instance.launch_time))
    at_price = instance.price_per_hour * overlap / 3600.0
    if instance.state.billed:
        return min(at_price, instance.accrued_cost) if instance.accrued_cost else at_price
    if instance.launch_time >= start:
        return min(instance.accrued_cost, at_price) if at_price else instance.accrued_cost
    return 0.0


def spend(instances: Iterable[Instance], start: float, now: float) -> float:
    return sum(instance_spend(i, start, now) for i in instances)


def burn_per_hour(instances: Iterable[Instance]) -> float:
    """Dollars per hour the billed instances cost right now."""
    return sum(i.price_per_hour for i in instances if i.state.billed)


def gpu_price_per_hour(instances: Iterable[Instance]) -> dict[str, float]:
    """Price of one GPU-hour on each node (instance price / GPUs), keyed by node name."""
    prices: dict[str, float] = {}
    for inst in instances:
        if inst.node and inst.gpus and inst.state.billed:
            prices[inst.node] = inst.price_per_hour / inst.gpus
    return prices


def idle_cost_per_hour(gpus: Iterable[Gpu], node_gpu_price: dict[str, float]) -> float:
    """What the GPUs doing nothing cost per hour right now (billed, but not busy)."""
    return sum(node_gpu_price.get(g.node, 0.0) for g in gpus if not g.busy)
