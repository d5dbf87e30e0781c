"""What EBS volumes cost: per GB-month by type, plus provisioned IOPS and throughput.

A volume bills while it exists, attached or not, whatever its instance's state: a stopped
instance costs nothing for compute but its disks go on. EC2 prorates a month's price per
second of the month the second falls in (AWS's example: $0.10 × 2000 GB × 43,200 s /
(86,400 s × 30) = $3.33 for 12 hours of a 30-day month), so a window is priced month by month.

Prices are AWS's us-east-1 list prices; other regions differ by a few percent.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpuconsole.core.money.periods import month_end, month_start
from gpuconsole.model import Volume

# $ per GB-month of each type (us-east-1)
GB_MONTH = {"gp3": 0.08, "gp2": 0.10, "io1": 0.125, "io2": 0.125, "st1": 0.045, "sc1": 0.015, "standard": 0.05}
GP3_FREE_IOPS = 3000
GP3_FREE_THROUGHPUT = 125  # MiB/s
GP3_IOPS_MONTH = 0.005  # $ per provisioned IOPS-month above the free 3,000
GP3_THROUGHPUT_MONTH = 0.04  # $ per MiB/s-month above the free 125
IO1_IOPS_MONTH = 0.065
IO2_IOPS_TIERS = ((32000, 0.065), (64000, 0.0455), (None, 0.032))  # up to 32k, 32k-64k, above


def month_price(volume: Volume) -> float:
    """Dollars a whole month of ``volume`` costs, as provisioned. An unknown type is priced as
    gp2, AWS's oldest general-purpose default."""
    kind = volume.volume_type
    total = volume.size_gib * GB_MONTH.get(kind, GB_MONTH["gp2"])
    if kind == "gp3":
        total += max(0, volume.iops - GP3_FREE_IOPS) * GP3_IOPS_MONTH
        total += max(0, volume.throughput - GP3_FREE_THROUGHPUT) * GP3_THROUGHPUT_MONTH
    elif kind == "io1":
        total += volume.iops * IO1_IOPS_MONTH
    elif kind == "io2":
        low = 0
        for high, rate in IO2_IOPS_TIERS:
            top = volume.iops if high is None else min(volume.iops, high)
            total += max(0, top - low) * rate
            if high is None or volume.iops <= high:
                break
            low = high
    return total


def volume_cost(volume: Volume, start: float, end: float) -> float:
    """Dollars ``volume`` cost within ``[start, end)`` (it exists from its creation on)."""
    at = max(start, volume.created)
    if end <= at:
        return 0.0
    monthly = month_price(volume)
    total = 0.0
    while at < end:
        first, last = month_start(at), month_end(at)
        stop = min(end, last)
        total += monthly * (stop - at) / (last - first)
        at = stop
    return total


def storage_cost(volumes: Iterable[Volume], start: float, end: float) -> float:
    return sum(volume_cost(v, start, end) for v in volumes)
